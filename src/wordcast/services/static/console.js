// The wordcast web console: one page over the router's own API, with the key given at login.
// No framework and no build step; every text from the API goes in as textContent, never HTML.
"use strict";

const PAGE = 50; // subscriptions a page: the console stays quick with any number of them
const SHOWN_MATCHES = 200; // live matches kept on screen
const KEY_STORE = "wordcast-console-key";

let key = sessionStorage.getItem(KEY_STORE) || "";
let admin = false;
let cursor = 0;
let searchText = "";
let following = null; // the AbortController of the live match stream
let refreshing = null; // the cluster view's timer
const labels = new Map(); // subscription id -> its query or pattern

const $ = (id) => document.getElementById(id);

function notice(text, error = false) {
  const line = $("notice");
  line.textContent = text;
  line.classList.toggle("error", error);
}

async function api(method, path, body) {
  const headers = { authorization: `Bearer ${key}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  const answer = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!answer.ok) {
    let detail = answer.statusText;
    try {
      const parsed = await answer.json();
      detail = Array.isArray(parsed.detail)
        ? parsed.detail.map((e) => `${(e.loc || []).slice(1).join(".")}: ${e.msg}`).join("; ")
        : parsed.detail;
    } catch (_) {
      /* not JSON: the status says it */
    }
    throw new Error(`${answer.status}: ${detail}`);
  }
  return answer.status === 204 ? null : answer.json();
}

// A new signing secret stays on screen, with a copy button, until it is dismissed (a notice
// would be overwritten by the next action).
const SIGNING_HINT =
  "Keep it where your receiver checks signatures: it is not shown again (GET /endpoints/{id}/secret shows it to your key).";

function showSecret(about, secret, title = "Signing secret", hint = SIGNING_HINT) {
  $("secret-title").textContent = title;
  $("secret-hint").textContent = hint;
  $("secret-about").textContent = about;
  $("secret-value").textContent = secret;
  $("secret-copy").textContent = "Copy";
  $("secret-dialog").showModal();
}

async function copySecret() {
  const secret = $("secret-value").textContent;
  try {
    await navigator.clipboard.writeText(secret);
    $("secret-copy").textContent = "Copied";
  } catch (_) {
    // No clipboard (a page not served over https or from localhost): select it for the user.
    const range = document.createRange();
    range.selectNodeContents($("secret-value"));
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    $("secret-copy").textContent = "Selected: press Ctrl-C";
  }
}

function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (className) td.className = className;
  return td;
}

function button(td, text, onClick) {
  const b = document.createElement("button");
  b.textContent = text;
  b.addEventListener("click", onClick);
  td.appendChild(b);
  return b;
}

// What a button starts: asked first when it destroys something (``ask``); a failure goes to the
// notice (the work puts what it did there).
function action(td, text, work, ask = null) {
  return button(td, text, async () => {
    if (ask && !window.confirm(ask)) return;
    try {
      await work();
    } catch (error) {
      notice(error.message, true);
    }
  });
}

// -- logging in ----------------------------------------------------------------------------
async function logIn(given) {
  key = given;
  let who;
  try {
    who = await api("GET", "/whoami");
  } catch (error) {
    key = "";
    sessionStorage.removeItem(KEY_STORE);
    notice(`Not logged in: ${error.message}`, true);
    return;
  }
  admin = who.role === "admin";
  sessionStorage.setItem(KEY_STORE, key);
  $("login-view").hidden = true;
  $("nav").hidden = false;
  for (const el of document.querySelectorAll(".admin-only")) el.hidden = !admin;
  for (const el of document.querySelectorAll(".tenant-only")) el.hidden = admin;
  $("who").textContent = admin ? "admin" : `tenant ${who.tenant}`;
  notice("");
  show(admin ? "cluster" : "matches");
}

function logOut() {
  stopFollowing();
  clearInterval(refreshing);
  key = "";
  sessionStorage.removeItem(KEY_STORE);
  for (const view of document.querySelectorAll(".view")) view.hidden = true;
  $("nav").hidden = true;
  $("login-view").hidden = false;
}

const VIEWS = {
  matches: () => follow(),
  subscriptions: () => loadSubscriptions(true),
  endpoints: loadEndpoints,
  deadletters: () => loadDeadLetters($("deadletters"), "/deadletters", null),
  cluster: async () => {
    await loadCluster();
    refreshing = setInterval(() => loadCluster().catch((e) => notice(e.message, true)), 2000);
  },
  tenants: loadTenants,
  streams: loadStreams,
  routing: loadRouting,
  learning: loadLearning,
  "admin-deadletters": async () => {},
};

function show(name) {
  clearInterval(refreshing);
  notice(""); // a notice belongs to the view it came from

  for (const view of document.querySelectorAll(".view")) view.hidden = view.id !== `${name}-view`;
  for (const b of document.querySelectorAll("nav button[data-view]")) {
    b.classList.toggle("current", b.dataset.view === name);
  }
  VIEWS[name]().catch((error) => notice(error.message, true));
}

// -- live matches: the match stream, read with fetch (EventSource cannot send a key) ---------
function stopFollowing() {
  if (following) following.abort();
  following = null;
}

// From now (``from`` null), or after a position: "0" is the oldest match the stream keeps.
async function follow(from = null) {
  if (following) return;
  await labelSubscriptions();
  following = new AbortController();
  const { signal } = following;
  let lastId = from;
  while (!signal.aborted) {
    $("stream-state").textContent = "connecting";
    try {
      const headers = { authorization: `Bearer ${key}` };
      if (lastId) headers["last-event-id"] = lastId;
      const answer = await fetch("/matches/stream", { headers, signal });
      if (!answer.ok) throw new Error(`${answer.status}: ${(await answer.json()).detail}`);
      $("stream-state").textContent = "following";
      lastId = await readEvents(answer.body.getReader(), lastId);
    } catch (error) {
      if (signal.aborted) return;
      $("stream-state").textContent = `reconnecting (${error.message})`;
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

async function readEvents(reader, lastId) {
  const decoder = new TextDecoder();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return lastId;
    buffered += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const event = { id: null, event: "message", data: "" };
      for (const line of buffered.slice(0, end).split("\n")) {
        const colon = line.indexOf(":");
        if (colon <= 0) continue; // a comment (heartbeat) or nothing
        const field = line.slice(0, colon);
        const value = line.slice(colon + 1).replace(/^ /, "");
        if (field === "data") event.data += value;
        else if (field in event) event[field] = value;
      }
      buffered = buffered.slice(end + 2);
      if (event.id) lastId = event.id;
      if (event.event === "matches") showMatches(JSON.parse(event.data));
      if (event.event === "gone") notice(JSON.parse(event.data).detail, true);
    }
  }
}

async function labelSubscriptions() {
  // Matches name their subscription by id; the first pages give the labels to most of them.
  let next = 0;
  for (let page = 0; page < 4; page++) {
    const answer = await api("GET", `/subscriptions?cursor=${next}&limit=500`);
    for (const sub of answer.subscriptions) labels.set(sub.id, sub.query || sub.pattern);
    next = answer.next_cursor;
    if (!next) break;
  }
}

// The [start, end) offsets a match's `matched` gives (code points), merged where they overlap.
function highlights(matched) {
  if (!matched) return [];
  const ranges = [...Object.values(matched.terms || {}), ...Object.values(matched.spans || {})];
  const all = [...ranges.flat(), ...(matched.offsets || [])].sort((a, b) => a[0] - b[0]);
  const merged = [];
  for (const [start, end] of all) {
    const last = merged[merged.length - 1];
    if (last && start <= last[1]) last[1] = Math.max(last[1], end);
    else merged.push([start, end]);
  }
  return merged;
}

// The text with the ranges in <mark>: offsets count code points, so the text is cut as an
// array of them (a JavaScript string counts UTF-16 units).
function appendHighlighted(parent, text, ranges) {
  const points = Array.from(text);
  let at = 0;
  for (const [start, end] of ranges) {
    parent.appendChild(document.createTextNode(points.slice(at, start).join("")));
    const mark = document.createElement("mark");
    mark.textContent = points.slice(start, end).join("");
    parent.appendChild(mark);
    at = end;
  }
  parent.appendChild(document.createTextNode(points.slice(at).join("")));
}

// Each match with its publication's id and text, whatever the payload's version (version 2
// names each publication once, and its matches refer to it by place).
function matchesOf(body) {
  if ((body.version || 1) < 2) return body.matches;
  return body.matches.map((match) => {
    const publication = body.publications[match.publication];
    return { ...match, publication_id: publication.id, text: publication.text };
  });
}

function showMatches(body) {
  const list = $("matches");
  for (const match of matchesOf(body)) {
    const item = document.createElement("li");
    const label = document.createElement("span");
    label.className = "label";
    const written = match.query || match.pattern || labels.get(match.subscription_id) || "";
    label.textContent = match.tag ? `${written} [${match.tag}]` : written;
    item.appendChild(label);
    appendHighlighted(item, match.text, highlights(match.matched));
    item.title = `${match.subscription_id} / ${match.publication_id}`;
    item.dataset.subscription = match.subscription_id;
    list.insertBefore(item, list.firstChild);
  }
  while (list.children.length > SHOWN_MATCHES) list.removeChild(list.lastChild);
}

// -- trying a text: a dry run of publishing it ------------------------------------------------
async function tryText(event) {
  event.preventDefault();
  const text = $("try-text").value;
  const answer = await api("POST", "/publications?dry_run=true", { publications: [{ text }] });
  if (answer.matches.some((m) => !labels.has(m.subscription_id))) await labelSubscriptions();
  const list = $("tried");
  list.textContent = "";
  for (const match of answer.matches) {
    const item = document.createElement("li");
    const label = document.createElement("span");
    label.className = "label";
    label.textContent = labels.get(match.subscription_id) || match.subscription_id;
    item.appendChild(label);
    appendHighlighted(item, text, highlights(match.matched));
    item.dataset.subscription = match.subscription_id;
    list.appendChild(item);
  }
  notice(`${answer.matches.length} of your subscriptions would match (nothing was published)`);
}

// -- subscriptions ---------------------------------------------------------------------------
async function loadSubscriptions(fromStart) {
  const body = $("subscriptions");
  if (fromStart) {
    cursor = 0;
    body.textContent = "";
  }
  // A search filters each page on the router: look further until a page's worth is found.
  let found = 0;
  let total = 0;
  do {
    const query = new URLSearchParams({ cursor, limit: PAGE });
    // "tag:NAME" searches by tag, anything else the queries and patterns.
    if (searchText.startsWith("tag:")) query.set("tag", searchText.slice(4));
    else if (searchText) query.set("q", searchText);
    const answer = await api("GET", `/subscriptions?${query}`);
    for (const sub of answer.subscriptions) addSubscriptionRow(sub);
    found += answer.subscriptions.length;
    total = answer.total;
    cursor = answer.next_cursor;
  } while (searchText && cursor && found < PAGE);
  $("more").hidden = !cursor;
  let which = searchText ? ` that hold "${searchText}"` : "";
  if (searchText.startsWith("tag:")) which = ` tagged "${searchText.slice(4)}"`;
  const all = cursor ? "" : searchText ? ", all found" : ", all";
  $("subscriptions-count").textContent = `${body.rows.length}${which} shown of ${total}${all}`;
}

function addSubscriptionRow(sub, first = false) {
  labels.set(sub.id, sub.query || sub.pattern);
  const row = $("subscriptions").insertRow(first ? 0 : -1);
  row.dataset.id = sub.id;
  cell(row, sub.id);
  cell(row, sub.kind === "pattern" ? `pattern ${sub.pattern}` : sub.query);
  cell(row, sub.tag, "tag");
  const counted = sub.counters;
  cell(row, counted ? `${counted.matched} / ${counted.delivered} / ${counted.failed}` : "", "num");
  cell(row, counted && counted.last_match ? new Date(counted.last_match * 1000).toLocaleString() : "");
  cell(row, sub.delivery.map((d) => (d === "webhook" ? sub.callback_url : "stream")).join(" + "));
  cell(row, sub.matcher, "num");
  const actions = cell(row, "");
  const label = sub.kind === "pattern" ? `pattern ${sub.pattern}` : sub.query;
  const rotate = `Rotate the signing secret of the endpoint of "${label}" (every subscription there shares it)? The old secret keeps signing for its grace period.`;
  action(actions, "Rotate secret", async () => {
    const answer = await api("POST", `/subscriptions/${sub.id}/secret`);
    notice(`Rotated the signing secret of ${sub.id}'s endpoint`);
    showSecret(`The new signing secret of the endpoint of "${label}"`, answer.secret);
  }, rotate);
  const remove = `Delete the subscription "${label}"? Its matches stop at once.`;
  action(actions, "Delete", async () => {
    await api("DELETE", `/subscriptions/${sub.id}`);
    row.remove();
    notice(`Deleted ${sub.id}`);
  }, remove);
}

async function createSubscription(event) {
  event.preventDefault();
  const way = $("new-delivery").value;
  const body = { [$("new-kind").value]: $("new-text").value };
  body.delivery = way === "both" ? ["webhook", "stream"] : [way];
  if (way !== "stream") body.callback_url = $("new-callback").value;
  if ($("new-tag").value) body.tag = $("new-tag").value;
  showWarnings([]);
  try {
    const sub = await api("POST", "/subscriptions", body);
    addSubscriptionRow(sub, true);
    $("new-text").value = "";
    $("new-tag").value = "";
    showWarnings(sub.warnings || []);
    const read = sub.warnings && sub.warnings.length ? ": read otherwise than you may mean, see below" : "";
    notice(`Created ${sub.id}${read}`);
    if (sub.secret) showSecret(`The signing secret of ${sub.id}'s endpoint`, sub.secret);
  } catch (error) {
    notice(error.message, true);
  }
}

// Beside the form: each piece of the query read otherwise than X's rules or Lucene would read it.
function showWarnings(warnings) {
  const list = $("create-warnings");
  list.textContent = "";
  for (const warning of warnings) {
    const item = document.createElement("li");
    item.textContent = warning;
    list.append(item);
  }
  list.hidden = warnings.length === 0;
}

// -- webhook endpoints -----------------------------------------------------------------------
function health(h) {
  const text = `${h.delivered} delivered, ${h.failed} failed; ${h.attempts_ok} attempts ok (${h.latency_ms.toFixed(1)} ms), ${h.attempts_failed} failed`;
  return h.failing_since ? `${text}; failing: ${h.last_error}` : text;
}

async function loadEndpoints() {
  const body = $("endpoints");
  body.textContent = "";
  const answer = await api("GET", "/endpoints");
  for (const endpoint of answer.endpoints) addEndpointRow(body, endpoint);
  if (!answer.endpoints.length) notice("No endpoints yet: a subscription with a webhook makes one.");
}

function addEndpointRow(body, endpoint) {
  const row = body.insertRow();
  cell(row, endpoint.id);
  cell(row, endpoint.description ? `${endpoint.url} (${endpoint.description})` : endpoint.url);
  const state = endpoint.enabled ? "enabled" : `disabled${endpoint.disabled_reason ? `: ${endpoint.disabled_reason}` : ""}`;
  cell(row, state);
  cell(row, endpoint.health ? health(endpoint.health) : "");
  const actions = cell(row, "");
  const act = async (work) => {
    try {
      await work();
      await loadEndpoints();
    } catch (error) {
      notice(error.message, true);
    }
  };
  button(actions, endpoint.enabled ? "Disable" : "Enable", () =>
    act(async () => {
      await api("PATCH", `/endpoints/${endpoint.id}`, { enabled: !endpoint.enabled });
      notice(`${endpoint.enabled ? "Disabled" : "Enabled"} ${endpoint.id}`);
    }),
  );
  button(actions, "Rotate secret", () => {
    const ask = `Rotate the signing secret of ${endpoint.url}? The old secret keeps signing for its grace period.`;
    if (!window.confirm(ask)) return;
    act(async () => {
      const answer = await api("POST", `/endpoints/${endpoint.id}/secret`);
      notice(`Rotated the signing secret of ${endpoint.id}`);
      showSecret(`The new signing secret of ${endpoint.url}`, answer.secret);
    });
  });
  button(actions, "Delete", () => {
    const ask = `Delete the endpoint ${endpoint.url}, and every subscription delivering there?`;
    if (!window.confirm(ask)) return;
    act(async () => {
      await api("DELETE", `/endpoints/${endpoint.id}?cascade=true`);
      notice(`Deleted ${endpoint.id}`);
    });
  });
}

async function createEndpoint(event) {
  event.preventDefault();
  const body = { url: $("endpoint-url").value, description: $("endpoint-description").value };
  try {
    const endpoint = await api("POST", "/endpoints", body);
    $("endpoint-url").value = "";
    $("endpoint-description").value = "";
    await loadEndpoints();
    notice(`Created ${endpoint.id}`);
    showSecret(`The signing secret of ${endpoint.url}`, endpoint.secret);
  } catch (error) {
    notice(error.message, true);
  }
}

// -- dead letters ----------------------------------------------------------------------------
async function loadDeadLetters(body, path, tenant) {
  body.textContent = "";
  const answer = await api("GET", path);
  for (const letter of answer.dead_letters) {
    const row = body.insertRow();
    cell(row, letter.id);
    cell(row, letter.callback_url);
    cell(row, `${letter.reason} (${letter.attempts} attempts)`);
    cell(row, (letter.payload.matches || []).length, "num");
    button(cell(row, ""), "Replay", async () => {
      const where = tenant
        ? `/admin/deadletters/${letter.id}/replay?tenant=${encodeURIComponent(tenant)}`
        : `/deadletters/${letter.id}/replay`;
      try {
        await api("POST", where);
        row.remove();
        notice(`Replayed ${letter.id}`);
      } catch (error) {
        notice(error.message, true);
      }
    });
  }
  if (!answer.dead_letters.length) notice("No dead letters.");
}

// -- the cluster (admin) ----------------------------------------------------------------------
function describe(list, pairs) {
  list.textContent = "";
  for (const [term, value] of pairs) {
    const dt = document.createElement("dt");
    dt.textContent = term;
    const dd = document.createElement("dd");
    dd.textContent = value;
    list.append(dt, dd);
  }
}

const CHARTS = [
  ["publications_per_s", "publications / s (this router)"],
  ["matches_per_s", "matches / s"],
  ["deliveries_per_s", "deliveries / s"],
  ["backlog", "backlog (deliveries pending)"],
];

// A line of each rate over the last 15 minutes (the router's ring buffer), newest on the right.
function drawHistory(history) {
  const charts = $("charts");
  charts.textContent = "";
  const ns = "http://www.w3.org/2000/svg";
  const width = 300, height = 90, top = 14, bottom = 14;
  const until = history.updated || Date.now() / 1000;
  const since = until - history.window_s;
  for (const [field, title] of CHARTS) {
    const figure = document.createElement("figure");
    figure.dataset.chart = field;
    const caption = document.createElement("figcaption");
    const values = history.points.map((p) => p[field]);
    const last = values.length ? values[values.length - 1] : null;
    caption.textContent = last === null ? title : `${title}: ${last}`;
    figure.appendChild(caption);
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", title);
    const most = Math.max(1, ...values);
    const at = (p) => [
      ((p.at - since) / history.window_s) * width,
      top + (1 - p[field] / most) * (height - top - bottom),
    ];
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", history.points.map((p) => at(p).join(",")).join(" "));
    line.setAttribute("class", "history");
    svg.appendChild(line);
    for (const [text, x, y, anchor] of [
      [String(most), 2, 11, "start"],
      ["15 min ago", 2, height - 2, "start"],
      ["now", width - 2, height - 2, "end"],
    ]) {
      const label = document.createElementNS(ns, "text");
      Object.entries({ x, y, "text-anchor": anchor }).forEach(([k, v]) => label.setAttribute(k, v));
      label.textContent = text;
      svg.appendChild(label);
    }
    figure.appendChild(svg);
    charts.appendChild(figure);
  }
  const updated = history.updated ? new Date(history.updated * 1000).toLocaleTimeString() : "not yet";
  const note = history.points.length < 2 ? `; a point every ${history.every_s} s, collecting` : "";
  $("history-updated").textContent = `last updated ${updated}${note}`;
}

async function loadCluster() {
  const [stats, matchers, history] = await Promise.all([
    api("GET", "/stats"),
    api("GET", "/stats/matchers"),
    api("GET", "/stats/history"),
  ]);
  drawHistory(history);
  const mapping = stats.mapping;
  describe($("mapping"), [
    ["mapping version (active, latest)", `${mapping.active}, ${mapping.latest}`],
    ["spread (matchers per publication)", mapping.spread.toFixed(2)],
    ["imbalance (busiest / mean)", mapping.imbalance.toFixed(2)],
    ["publications routed by this router", mapping.publications],
    ["shedding level", `${stats.shedding.level} of ${stats.shedding.max_level} (${stats.shedding.strategy})`],
    ["matchers (routed, wanted)", `${stats.matchers}, ${stats.matchers_wanted}`],
  ]);
  const body = $("matchers");
  body.textContent = "";
  for (const [n, m] of matchers.matchers.entries()) {
    const row = body.insertRow();
    cell(row, `matcher-${m.ordinal ?? n}`);
    cell(row, m.subscriptions, "num");
    cell(row, m.pattern_subscriptions, "num");
    cell(row, mapping.loads[n], "num");
    cell(row, m.deliveries_pending, "num");
    cell(row, m.delivered, "num");
    cell(row, m.streamed, "num");
    cell(row, m.error ? `unreachable: ${m.error}` : m.ready ? "ready" : "loading");
  }
}

function figureRow(body, figures, first) {
  const row = body.insertRow();
  if (first !== undefined) cell(row, first);
  cell(row, figures.name);
  cell(row, figures.version, "num");
  cell(row, figures.spread.toFixed(3), "num");
  cell(row, figures.imbalance.toFixed(3), "num");
  return row;
}

// Bars of each matcher's load under each mapping, with its axes named and its sample said.
function plotLoads(svg, mappings, sampled) {
  svg.textContent = "";
  const ns = "http://www.w3.org/2000/svg";
  const add = (name, attrs, text) => {
    const el = document.createElementNS(ns, name);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    if (text !== undefined) el.textContent = text;
    svg.appendChild(el);
    return el;
  };
  const matchers = Math.max(...mappings.map((m) => m.loads.length));
  const top = Math.max(1, ...mappings.flatMap((m) => m.loads));
  const width = 720, height = 260, left = 50, bottom = 44, plotH = height - bottom - 20;
  const group = (width - left - 10) / matchers;
  const barW = Math.max(2, (group * 0.8) / mappings.length);
  add("line", { x1: left, y1: height - bottom, x2: width, y2: height - bottom, stroke: "#888" });
  add("text", { x: 4, y: 20 }, String(top));
  mappings.forEach((m, k) => {
    m.loads.forEach((load, i) => {
      const h = (load / top) * plotH;
      const bar = add("rect", {
        x: left + i * group + k * barW,
        y: height - bottom - h,
        width: barW,
        height: h,
        class: `bar-${m.name}`,
      });
      bar.dataset.mapping = m.name;
      add("title", {}, `${m.name} matcher ${i}: ${load}`);
      bar.appendChild(svg.lastChild);
    });
    add("rect", { x: left + k * 110, y: 2, width: 10, height: 10, class: `bar-${m.name}` });
    add("text", { x: left + 14 + k * 110, y: 11 }, `${m.name} (v${m.version})`);
  });
  for (let i = 0; i < matchers; i++) {
    add("text", { x: left + i * group + 2, y: height - bottom + 14 }, String(i));
  }
  const across = `matcher (${sampled} sampled publications)`;
  add("text", { x: left + (width - left) / 2, y: height - 6, "text-anchor": "middle", class: "axis" }, across);
  const y = height - bottom - plotH / 2;
  const up = { x: 12, y, transform: `rotate(-90 12 ${y})`, "text-anchor": "middle", class: "axis" };
  add("text", up, "publications routed");
}

async function loadRouting() {
  const insight = await api("GET", "/admin/routing");
  const figures = $("routing-figures");
  figures.textContent = "";
  for (const m of insight.mappings) figureRow(figures, m);
  plotLoads($("load-plot"), insight.mappings, insight.publications);
  const words = $("hot-words");
  words.textContent = "";
  for (const w of insight.hot_words) {
    const row = words.insertRow();
    cell(row, w.word);
    cell(row, w.publications, "num");
    cell(row, w.routed_to.join(", "));
    cell(row, w.held_by.join(", "));
  }
  if (!insight.publications) notice("No publications logged yet: publish some first.");
}

// -- tenants and their keys (admin) ---------------------------------------------------------------
async function loadTenants() {
  const answer = await api("GET", "/admin/tenants");
  const body = $("tenants");
  body.textContent = "";
  for (const t of answer.tenants) {
    const row = body.insertRow();
    row.dataset.tenant = t.tenant;
    cell(row, t.tenant);
    cell(row, t.keys, "num");
    cell(row, t.subscriptions, "num");
    button(cell(row, ""), "Keys", () => showKeys(t.tenant).catch((e) => notice(e.message, true)));
  }
}

async function showKeys(tenant) {
  const answer = await api("GET", `/admin/tenants/${encodeURIComponent(tenant)}/keys`);
  $("keys-title").textContent = `Keys of ${tenant}`;
  $("keys-title").hidden = $("keys-table").hidden = false;
  const body = $("tenant-keys");
  body.textContent = "";
  for (const k of answer.keys) {
    const row = body.insertRow();
    row.dataset.key = k.key_id;
    cell(row, k.key_id);
    cell(row, new Date(k.created * 1000).toLocaleString());
    const ask = `Revoke key ${k.key_id} of ${tenant}? Clients using it are refused within a second.`;
    action(cell(row, ""), "Revoke", async () => {
      await api("DELETE", `/admin/tenants/${encodeURIComponent(tenant)}/keys/${k.key_id}`);
      notice(`Revoked ${k.key_id}`);
      await Promise.all([showKeys(tenant), loadTenants()]);
    }, ask);
  }
}

async function createTenantKey(event) {
  event.preventDefault();
  const tenant = $("tenant-name").value.trim();
  try {
    const made = await api("POST", "/admin/tenants", { tenant });
    $("tenant-name").value = "";
    notice(made.new_tenant ? `Made tenant ${tenant}` : `Made another key for ${tenant}`);
    const hint = "Give it to the tenant now: only its SHA-256 is kept, and it is not shown again.";
    showSecret(`The API key ${made.key_id} of ${tenant}`, made.api_key, "API key", hint);
    await Promise.all([loadTenants(), showKeys(tenant)]);
  } catch (error) {
    notice(error.message, true);
  }
}

// -- shared streams and their grants (admin) ---------------------------------------------------
let grantsOf = null; // the stream whose grants are shown
let grantsShown = new Map(); // its tenants -> their grant

const streamPath = (stream) => `/admin/streams/${encodeURIComponent(stream)}`;
const tenantsWith = (grants, right) => grants.filter((g) => g[right]).map((g) => g.tenant).join(", ");

async function loadStreams() {
  const answer = await api("GET", "/admin/streams");
  const body = $("streams");
  body.textContent = "";
  for (const s of answer.streams) {
    const row = body.insertRow();
    row.dataset.stream = s.stream;
    cell(row, s.stream);
    cell(row, tenantsWith(s.grants, "publish"));
    cell(row, tenantsWith(s.grants, "subscribe"));
    const actions = cell(row, "");
    button(actions, "Grants", () => showGrants(s.stream).catch((e) => notice(e.message, true)));
    const ask = `Delete the shared stream ${s.stream}? Its grants go, and every subscription to it is deleted.`;
    action(actions, "Delete", async () => {
      await api("DELETE", streamPath(s.stream));
      notice(`Deleted the stream ${s.stream}`);
      if (grantsOf === s.stream) hideGrants();
      await loadStreams();
    }, ask);
  }
  if (grantsOf && !answer.streams.some((s) => s.stream === grantsOf)) hideGrants();
}

function hideGrants() {
  grantsOf = null;
  $("grants-title").hidden = $("grant").hidden = $("grants-table").hidden = true;
}

async function showGrants(stream) {
  const shown = await api("GET", streamPath(stream));
  grantsOf = stream;
  grantsShown = new Map(shown.grants.map((g) => [g.tenant, g]));
  $("grants-title").textContent = `Who may use ${stream}`;
  $("grants-title").hidden = $("grant").hidden = $("grants-table").hidden = false;
  const body = $("grants");
  body.textContent = "";
  for (const g of shown.grants) {
    const row = body.insertRow();
    row.dataset.tenant = g.tenant;
    cell(row, g.tenant);
    cell(row, g.publish ? "yes" : "no");
    cell(row, g.subscribe ? "yes" : "no");
    const ask = `Take every right on ${stream} away from ${g.tenant}? Its subscriptions to the stream are deleted.`;
    action(cell(row, ""), "Revoke", async () => {
      await api("DELETE", `${streamPath(stream)}/grants/${encodeURIComponent(g.tenant)}`);
      notice(`Revoked ${g.tenant}'s rights on ${stream}`);
      await Promise.all([showGrants(stream), loadStreams()]);
    }, ask);
  }
}

async function createStream(event) {
  event.preventDefault();
  const stream = $("stream-name").value.trim();
  try {
    await api("POST", "/admin/streams", { stream });
    $("stream-name").value = "";
    notice(`Made the shared stream ${stream}: grant tenants the right to use it`);
    await Promise.all([loadStreams(), showGrants(stream)]);
  } catch (error) {
    notice(error.message, true);
  }
}

async function grant(event) {
  event.preventDefault();
  const tenant = $("grant-tenant").value.trim();
  const rights = { publish: $("grant-publish").checked, subscribe: $("grant-subscribe").checked };
  if (!rights.publish && !rights.subscribe) {
    notice("Grant what: publish, subscribe or both? (Revoke takes every right away.)", true);
    return;
  }
  // A grant sets the tenant's rights: one that drops "subscribe" deletes its subscriptions.
  const before = grantsShown.get(tenant);
  if (before && before.subscribe && !rights.subscribe) {
    const ask = `${tenant} may subscribe to ${grantsOf} now: without that right, its subscriptions to the stream are deleted. Go on?`;
    if (!window.confirm(ask)) return;
  }
  try {
    await api("PUT", `${streamPath(grantsOf)}/grants/${encodeURIComponent(tenant)}`, rights);
    $("grant-tenant").value = "";
    notice(`${tenant} may now ${Object.keys(rights).filter((r) => rights[r]).join(" and ")} on ${grantsOf}`);
    await Promise.all([showGrants(grantsOf), loadStreams()]);
  } catch (error) {
    notice(error.message, true);
  }
}

// -- learning (admin) --------------------------------------------------------------------------
async function loadLearning() {
  const run = await api("GET", "/admin/learning");
  $("learning-state").textContent = [
    `state: ${run.state}`,
    run.detail ? run.detail : "",
    ...(run.output || []),
  ].join("\n");
  $("learn").disabled = run.state === "running";
  const body = $("learning-figures");
  body.textContent = "";
  for (const [when, figures] of [["before", run.before], ["after", run.after]]) {
    if (!figures) continue;
    for (const m of figures.mappings) {
      const row = figureRow(body, m, when);
      cell(row, m.loads.join(" "));
    }
  }
  if (run.state === "running") refreshing = setTimeout(loadLearning, 1000);
}

const FEW_PUBLICATIONS = 1000; // fewer logged than this: a learned mapping is a guess

async function startLearning() {
  try {
    const logged = (await api("GET", "/admin/routing")).publications;
    const few =
      logged < FEW_PUBLICATIONS
        ? ` Only ${logged} are logged: a mapping learned from so few may route worse than hashing.`
        : "";
    const ask = `Learn a mapping from the ${logged} logged publications and publish it? The routers move to it at once.${few}`;
    if (!window.confirm(ask)) return;
    await api("POST", "/admin/learning");
    notice("Learning run started.");
    await loadLearning();
  } catch (error) {
    notice(error.message, true);
  }
}

// -- wiring ----------------------------------------------------------------------------------
// Every table sorts by a column when its heading is clicked (again: the other way), numbers as
// numbers; the rows shown are sorted, a page at a time as they are loaded.
function sortable(table) {
  const headings = [...table.tHead.rows[0].cells];
  headings.forEach((th, column) => {
    if (!th.textContent) return;
    th.classList.add("sortable");
    th.addEventListener("click", () => {
      const down = th.dataset.sorted === "up";
      headings.forEach((other) => delete other.dataset.sorted);
      th.dataset.sorted = down ? "down" : "up";
      const body = table.tBodies[0];
      const key = (row) => (row.cells[column] ? row.cells[column].textContent : "");
      const rows = [...body.rows].sort((a, b) => {
        const [x, y] = [key(a), key(b)];
        const numbers = x !== "" && y !== "" && !isNaN(x) && !isNaN(y);
        const order = numbers ? Number(x) - Number(y) : x.localeCompare(y, undefined, { numeric: true });
        return down ? -order : order;
      });
      for (const row of rows) body.appendChild(row);
    });
  });
}

document.addEventListener("DOMContentLoaded", () => {
  for (const table of document.querySelectorAll("table")) sortable(table);
  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    logIn($("key").value.trim());
  });
  $("logout").addEventListener("click", logOut);
  for (const b of document.querySelectorAll("nav button[data-view]")) {
    b.addEventListener("click", () => show(b.dataset.view));
  }
  $("create").addEventListener("submit", createSubscription);
  $("create-tenant").addEventListener("submit", createTenantKey);
  $("create-stream").addEventListener("submit", createStream);
  $("grant").addEventListener("submit", grant);
  $("secret-copy").addEventListener("click", copySecret);
  $("secret-close").addEventListener("click", () => $("secret-dialog").close());
  $("try").addEventListener("submit", (event) =>
    tryText(event).catch((error) => notice(error.message, true)),
  );
  $("create-endpoint").addEventListener("submit", createEndpoint);
  $("search").addEventListener("submit", (event) => {
    event.preventDefault();
    searchText = $("search-text").value.trim();
    loadSubscriptions(true).catch((error) => notice(error.message, true));
  });
  $("more").addEventListener("click", () =>
    loadSubscriptions(false).catch((error) => notice(error.message, true)),
  );
  $("learn").addEventListener("click", startLearning);
  $("from-oldest").addEventListener("click", () => {
    stopFollowing();
    $("matches").replaceChildren();
    follow("0").catch((error) => notice(error.message, true));
  });
  $("admin-deadletters-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const tenant = $("admin-deadletters-tenant").value.trim();
    const path = `/admin/deadletters?tenant=${encodeURIComponent(tenant)}`;
    loadDeadLetters($("admin-deadletters"), path, tenant).catch((e) => notice(e.message, true));
  });
  if (key) logIn(key);
});
