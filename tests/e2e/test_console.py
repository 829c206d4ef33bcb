"""The web console (/console) and the docs page (/docs) in a real browser: Debian's Chromium,
driven by Selenium through Debian's chromedriver, against a real local cluster.

A tenant logs in with the development key, creates a subscription delivered to the match stream,
sees its match arrive live, and deletes it; the admin sees the matchers, the mapping and the load
per matcher under hash and learned routing, and replays a dead letter; neither page loads anything
from another origin, and the browser reports no Content-Security-Policy violation.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import RunningCluster, tenant_key
from wordcast.local.supervisor import free_port
from wordcast.storage import Store
from wordcast.storage.outbox import Message

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
DEV_KEY = "wck_development_only"
ADMIN_TOKEN = "wordcast-development-admin-token"
AUTH = {"authorization": f"Bearer {DEV_KEY}"}
WAIT_S = 30


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("Chromium and chromedriver are missing (make test installs them as root)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


def _wait(driver: Any, condition: Any, what: str) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S).until(condition, message=what)


def _by_id(driver: Any, element_id: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, element_id)


def _open_logged_out(driver: Any, router: str) -> None:
    """The console with no key kept. The key is cleared from a page of the same origin that is
    not the console: a console page would log in with the key it holds, and that login can
    finish after the clearing and keep the key again."""
    driver.get(f"{router}/stats")
    driver.execute_script("sessionStorage.clear()")
    driver.get(f"{router}/console")
    _wait(driver, lambda d: _by_id(d, "key").is_displayed(), "the login form")


def _log_in(driver: Any, router: str, key: str) -> None:
    driver.get_log("browser")  # what earlier pages said is not this login's
    _open_logged_out(driver, router)
    _by_id(driver, "key").send_keys(key)
    _by_id(driver, "login-button").click()
    _wait(driver, lambda d: _by_id(d, "nav").is_displayed(), "logged in")


def _view(driver: Any, name: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, f"nav button[data-view='{name}']").click()
    _wait(driver, lambda d: _by_id(d, f"{name}-view").is_displayed(), f"the {name} view")


def _problems(driver: Any) -> list[str]:
    """What the browser's console reported as errors (CSP violations among them)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def _other_origins(driver: Any, router: str) -> list[str]:
    resources = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    return [url for url in resources if not url.startswith(router)]


def _column(driver: Any, column: int) -> list[str]:
    """The subscriptions table's cells of one column, top to bottom."""
    cells: list[str] = driver.execute_script(
        "return [...document.querySelectorAll('#subscriptions tr')]"
        ".map((r) => r.cells[arguments[0]].textContent)",
        column,
    )
    return cells


def _natural(text: str) -> list[Any]:
    """How the console orders text: numbers within it as numbers, case aside."""
    return [int(part) if part.isdigit() else part.casefold() for part in re.split(r"(\d+)", text)]


def test_a_tenant_logs_in_creates_a_subscription_sees_a_match_arrive_and_deletes_it(
    cluster: RunningCluster, browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.expected_conditions import alert_is_present
    from selenium.webdriver.support.ui import Select

    router = cluster.router_url
    for query in ("zebra 10", "zebra 9", "aardvark"):  # for the sorting below
        made = httpx.post(
            f"{router}/subscriptions", json={"query": query}, headers=AUTH, timeout=10
        )
        assert made.status_code == 201, made.text
    _log_in(browser, router, DEV_KEY)
    _view(browser, "subscriptions")
    Select(_by_id(browser, "new-kind")).select_by_value("query")
    _by_id(browser, "new-text").send_keys("platypus swims")
    Select(_by_id(browser, "new-delivery")).select_by_value("stream")
    _by_id(browser, "new-tag").send_keys("zoo")
    _by_id(browser, "create-button").click()
    row = _wait(
        browser,
        lambda d: [
            r
            for r in d.find_elements(By.CSS_SELECTOR, "#subscriptions tr[data-id]")
            if "platypus swims" in r.text
        ],
        "the new subscription listed",
    )[0]
    sub_id = row.get_attribute("data-id")
    assert "platypus swims" in row.text
    assert "stream" in row.text
    assert "zoo" in row.text
    assert f"Created {sub_id}" == _by_id(browser, "notice").text  # stream only: no secret
    assert not _by_id(browser, "create-warnings").is_displayed()  # read as it is meant
    stored = httpx.get(f"{router}/subscriptions/{sub_id}", headers=AUTH, timeout=10).json()
    assert (stored["delivery"], stored["tag"]) == (["stream"], "zoo")
    searches = [("PLATYPUS", True), ("no such words", False), ("tag:zoo", True), ("tag:zo", False)]
    for wanted, found in searches:
        _by_id(browser, "search-text").clear()
        _by_id(browser, "search-text").send_keys(wanted)
        _by_id(browser, "search-text").submit()
        _wait(
            browser,
            lambda d, found=found: (
                bool(d.find_elements(By.CSS_SELECTOR, f"#subscriptions tr[data-id='{sub_id}']"))
                == found
            ),
            f"the search for {wanted!r}",
        )
    _by_id(browser, "search-text").clear()
    _by_id(browser, "search-text").submit()
    _wait(browser, lambda d: len(_column(d, 1)) > 1, "the subscriptions listed again")
    total = httpx.get(f"{router}/subscriptions", headers=AUTH, timeout=10).json()["total"]
    counted = _by_id(browser, "subscriptions-count").text
    assert f"{len(_column(browser, 1))} shown of {total}" in counted
    # A heading sorts the rows by its column, a second click the other way.
    heading = browser.find_element(By.XPATH, "//th[text()='query or pattern']")
    heading.click()
    ascending = _column(browser, 1)
    assert ascending == sorted(ascending, key=_natural)
    heading.click()
    assert _column(browser, 1) == ascending[::-1]
    # Trying a text shows what it would match, highlighted, and publishes nothing.
    tried = "Look, a platypus swims by the try box"
    _by_id(browser, "try-text").send_keys(tried)
    _by_id(browser, "try-button").click()
    shown = _wait(
        browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#tried li"), "the tried matches"
    )
    assert [li.get_attribute("data-subscription") for li in shown] == [sub_id]
    assert [m.text for m in shown[0].find_elements(By.TAG_NAME, "mark")] == ["platypus", "swims"]
    assert "nothing was published" in _by_id(browser, "notice").text

    _view(browser, "matches")
    assert _by_id(browser, "notice").text == ""  # the subscriptions view's notice stayed there
    _wait(browser, lambda d: "following" in _by_id(d, "stream-state").text, "the stream followed")
    # The duck is outside the Basic Multilingual Plane: one code point, two UTF-16 units.
    text = f"\U0001f986 a Platypus swims past the console at {time.time()}"
    post = {"publications": [{"id": "console-1", "text": text}]}
    answer = httpx.post(f"{router}/publications", json=post, headers=AUTH, timeout=10)
    assert answer.status_code == 202
    arrived = _wait(
        browser,
        lambda d: [li for li in d.find_elements(By.CSS_SELECTOR, "#matches li") if text in li.text],
        "the match shown",
    )
    assert arrived[0].get_attribute("data-subscription") == sub_id
    assert "platypus swims" in arrived[0].text  # labelled with its query
    marked = [m.text for m in arrived[0].find_elements(By.TAG_NAME, "mark")]
    assert marked == ["Platypus", "swims"]  # highlighted where `matched` says

    _view(browser, "subscriptions")
    row = _wait(
        browser,
        lambda d: d.find_elements(By.CSS_SELECTOR, f"#subscriptions tr[data-id='{sub_id}']"),
        "the subscription listed",
    )[0]
    # Deleting asks first: dismissed, nothing happens; accepted, the subscription goes.
    row.find_element(By.XPATH, ".//button[text()='Delete']").click()
    asked = _wait(browser, alert_is_present(), "the confirmation")
    assert "platypus swims" in asked.text
    asked.dismiss()
    still = httpx.get(f"{router}/subscriptions/{sub_id}", headers=AUTH, timeout=10)
    assert still.status_code == 200
    row.find_element(By.XPATH, ".//button[text()='Delete']").click()
    _wait(browser, alert_is_present(), "the confirmation").accept()
    _wait(
        browser,
        lambda d: not d.find_elements(By.CSS_SELECTOR, f"#subscriptions tr[data-id='{sub_id}']"),
        "the row gone",
    )
    gone = httpx.get(f"{router}/subscriptions/{sub_id}", headers=AUTH, timeout=10)
    assert gone.status_code == 404
    # A query read otherwise than X's rules or Lucene would: stored, and said so beside the form.
    _by_id(browser, "new-text").send_keys("platypus or echidna")
    _by_id(browser, "create-button").click()
    warned = _wait(
        browser,
        lambda d: d.find_elements(By.CSS_SELECTOR, "#create-warnings li"),
        "the warnings beside the form",
    )
    assert "`or` is a word" in warned[0].text
    assert "read otherwise" in _by_id(browser, "notice").text
    made = _by_id(browser, "notice").text.split()[1].rstrip(":")
    assert httpx.delete(f"{router}/subscriptions/{made}", headers=AUTH, timeout=10).is_success
    assert _problems(browser) == []
    assert _other_origins(browser, router) == []


def test_a_tenant_manages_its_webhook_endpoints(cluster: RunningCluster, browser: Any) -> None:
    from selenium.webdriver.support.expected_conditions import alert_is_present

    router = cluster.router_url
    url = f"http://127.0.0.1:{free_port()}/console-hook"
    _log_in(browser, router, DEV_KEY)
    _view(browser, "endpoints")
    _by_id(browser, "endpoint-url").send_keys(url)
    _by_id(browser, "endpoint-description").send_keys("from the console")
    _by_id(browser, "endpoint-description").submit()
    _wait(browser, lambda d: _by_id(d, "secret-dialog").is_displayed(), "the secret's dialog")
    shown_secret = _by_id(browser, "secret-value").text
    assert shown_secret.startswith("whsec_")
    # The next action does not take it away: it stays until dismissed.
    _by_id(browser, "secret-copy").click()
    _wait(browser, lambda d: _by_id(d, "secret-copy").text != "Copy", "copied or selected")
    assert _by_id(browser, "secret-value").text == shown_secret
    _by_id(browser, "secret-close").click()
    _wait(browser, lambda d: not _by_id(d, "secret-dialog").is_displayed(), "dismissed")
    made = next(
        e
        for e in httpx.get(f"{router}/endpoints", headers=AUTH, timeout=10).json()["endpoints"]
        if e["url"] == url
    )

    def row_text() -> str:
        # Read in one script: the table is redrawn after each action, which leaves an element
        # found a moment before stale.
        text: str = browser.execute_script(
            "return [...document.querySelectorAll('#endpoints tr')]"
            ".map((r) => r.innerText).find((t) => t.includes(arguments[0])) || ''",
            url,
        )
        return text

    def click(label: str) -> None:
        browser.execute_script(
            "[...document.querySelectorAll('#endpoints tr')]"
            ".find((r) => r.innerText.includes(arguments[0])).querySelectorAll('button')"
            ".forEach((b) => { if (b.textContent === arguments[1]) b.click(); })",
            url,
            label,
        )

    assert "from the console" in row_text()
    assert "0 delivered" in row_text()
    click("Disable")
    _wait(browser, lambda d: "\tdisabled" in row_text(), "disabled")
    shown = httpx.get(f"{router}/endpoints/{made['id']}", headers=AUTH, timeout=10).json()
    assert not shown["enabled"]
    click("Enable")
    _wait(browser, lambda d: "\tenabled" in row_text(), "enabled again")

    click("Rotate secret")
    _wait(browser, alert_is_present(), "the confirmation").accept()
    _wait(browser, lambda d: _by_id(d, "secret-dialog").is_displayed(), "the new secret shown")
    secret = httpx.get(f"{router}/endpoints/{made['id']}/secret", headers=AUTH, timeout=10)
    assert secret.json()["secret"] != shown_secret
    assert _by_id(browser, "secret-value").text == secret.json()["secret"]
    assert "whsec_" not in _by_id(browser, "notice").text  # a notice is no place for a secret
    _by_id(browser, "secret-close").click()

    click("Delete")
    _wait(browser, alert_is_present(), "the confirmation").accept()
    _wait(browser, lambda d: row_text() == "", "the row gone")
    gone = httpx.get(f"{router}/endpoints/{made['id']}", headers=AUTH, timeout=10)
    assert gone.status_code == 404
    assert _problems(browser) == []


def test_a_wrong_key_is_refused_with_the_routers_reason(
    cluster: RunningCluster, browser: Any
) -> None:
    _open_logged_out(browser, cluster.router_url)
    _by_id(browser, "key").send_keys("wck_not_a_key")
    _by_id(browser, "login-button").click()
    _wait(browser, lambda d: "Not logged in: 401" in _by_id(d, "notice").text, "the refusal")
    assert not _by_id(browser, "nav").is_displayed()


def test_the_admin_sees_the_cluster_the_load_per_matcher_and_replays_a_dead_letter(
    cluster: RunningCluster, browser: Any, redis_url: str
) -> None:
    from selenium.webdriver.common.by import By

    router = cluster.router_url

    # A subscription whose webhook nothing answers, with a message given up on.
    dead_hook = f"http://127.0.0.1:{free_port()}/hook"
    sub = httpx.post(
        f"{router}/subscriptions",
        json={"query": "python web", "callback_url": dead_hook},
        headers=AUTH,
        timeout=10,
    ).json()
    body = {"type": "matches", "matches": [{"subscription_id": sub["id"], "text": "python web"}]}
    given_up = Message(
        (sub["id"],), "dev", dead_hook, "msg_console", json.dumps(body).encode(), 1, time.time()
    )

    # Traffic for the routing view (the log routers sample 1% of), and the dead letter.
    async def prepare() -> str:
        store = Store.connect(redis_url, cluster.namespace)
        try:
            samples = [(time.time(), ("python", "web", f"w{n % 40}")) for n in range(300)]
            await store.publication_log.append(samples, 10_000)
            await store.outbox(0).dead_letter("1-1", given_up, "refused the connection", 8)
            letters = await store.dead_letters.list("dev", "-", 1_000)
            return letters[-1].id
        finally:
            await store.aclose()

    dead_id = asyncio.run(prepare())

    _log_in(browser, router, ADMIN_TOKEN)
    assert _by_id(browser, "cluster-view").is_displayed()
    rows = _wait(
        browser,
        lambda d: d.find_elements(By.CSS_SELECTOR, "#matchers tr"),
        "the matchers listed",
    )
    assert len(rows) == len(cluster.matcher_urls), [row.text for row in rows]
    assert all("ready" in row.text for row in rows)
    mapping = _by_id(browser, "mapping").text
    assert "spread" in mapping
    assert "imbalance" in mapping

    _view(browser, "routing")
    bars = _wait(
        browser,
        lambda d: d.find_elements(By.CSS_SELECTOR, "#load-plot rect.bar-hash[data-mapping]"),
        "the load plot",
    )
    assert len(bars) == len(cluster.matcher_urls)
    assert sum(float(bar.get_attribute("height")) for bar in bars) > 0
    # The cluster view's last 15 minutes: a chart of each rate, and when it was last updated.
    _view(browser, "cluster")
    charts = _wait(
        browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#charts figure svg polyline"), "charts"
    )
    assert len(charts) == 4
    _wait(browser, lambda d: "last updated" in _by_id(d, "history-updated").text, "a stamp")
    _view(browser, "routing")
    axes = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#load-plot text.axis")]
    assert axes == ["matcher (300 sampled publications)", "publications routed"]
    figures = _by_id(browser, "routing-figures").text
    assert figures.startswith("hash")
    words = _by_id(browser, "hot-words").text
    assert "python" in words

    _view(browser, "admin-deadletters")
    _by_id(browser, "admin-deadletters-tenant").send_keys("dev")
    _by_id(browser, "admin-deadletters-tenant").submit()
    row = _wait(
        browser,
        lambda d: [
            r
            for r in d.find_elements(By.CSS_SELECTOR, "#admin-deadletters tr")
            if dead_id in r.text
        ],
        "the dead letter listed",
    )[0]
    row.find_element(By.XPATH, ".//button[text()='Replay']").click()
    _wait(browser, lambda d: f"Replayed {dead_id}" in _by_id(d, "notice").text, "the replay")
    left = httpx.get(f"{router}/deadletters", headers=AUTH, timeout=10).json()
    assert dead_id not in [letter["id"] for letter in left["dead_letters"]]
    assert _problems(browser) == []


def test_live_matches_say_where_matches_come_from_and_start_from_the_oldest_kept(
    cluster: RunningCluster, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    router = cluster.router_url
    made = httpx.post(
        f"{router}/subscriptions", json={"query": "echidna waddles"}, headers=AUTH, timeout=10
    )
    assert made.status_code == 201, made.text
    text = f"an echidna waddles by, before the console opened, at {time.time()}"
    post = {"publications": [{"text": text}]}
    assert httpx.post(f"{router}/publications", json=post, headers=AUTH, timeout=10).is_success
    _log_in(browser, router, DEV_KEY)
    _view(browser, "matches")
    hint = _by_id(browser, "matches-view").find_element(By.CLASS_NAME, "hint").text
    assert "webhook" in hint
    assert "wordcast watch" in hint
    _wait(browser, lambda d: "following" in _by_id(d, "stream-state").text, "the stream followed")
    assert text not in _by_id(browser, "matches").text  # from now: the earlier match is not here
    _by_id(browser, "from-oldest").click()
    _wait(browser, lambda d: text in _by_id(d, "matches").text, "the earlier match shown")
    assert _problems(browser) == []


def test_the_routers_root_leads_to_the_console_and_the_docs(
    cluster: RunningCluster, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    router = cluster.router_url
    page = httpx.get(f"{router}/", timeout=10)
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["content-security-policy"]
    browser.get_log("browser")
    browser.get(f"{router}/")
    links = {a.get_attribute("href") for a in browser.find_elements(By.TAG_NAME, "a")}
    assert {f"{router}/console", f"{router}/docs"} <= links
    browser.find_element(By.LINK_TEXT, "The web console").click()
    _wait(browser, lambda d: d.current_url == f"{router}/console", "the console opened")
    assert _other_origins(browser, router) == []
    assert _problems(browser) == []


def test_the_docs_page_loads_nothing_from_a_cdn_and_keeps_to_its_policy(
    cluster: RunningCluster, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    router = cluster.router_url
    page = httpx.get(f"{router}/docs", timeout=10)
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "cdn" not in page.text.lower()
    browser.get_log("browser")
    browser.get(f"{router}/docs")
    title = _wait(
        browser,
        lambda d: d.find_elements(By.CSS_SELECTOR, ".swagger-ui .info .title"),
        "Swagger UI rendered",
    )[0]
    assert "wordcast router" in title.text
    _wait(
        browser,
        lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock-tag-section"),
        "the operations listed",
    )
    assert _other_origins(browser, router) == []
    assert _problems(browser) == []


def test_the_admin_starts_a_learning_run_and_sees_routing_before_and_after(
    cluster: RunningCluster, browser: Any, redis_url: str
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.expected_conditions import alert_is_present
    from selenium.webdriver.support.ui import WebDriverWait

    async def traffic() -> None:
        store = Store.connect(redis_url, cluster.namespace)
        try:
            words = [f"topic{n}" for n in range(30)]
            samples = [(time.time(), (words[n % 30], words[(n * 7) % 30])) for n in range(600)]
            await store.publication_log.append(samples, 10_000)
        finally:
            await store.aclose()

    asyncio.run(traffic())
    httpx.post(
        f"{cluster.router_url}/subscriptions/batch",
        json={"subscriptions": [{"query": f"topic{n}"} for n in range(30)]},
        headers=AUTH,
        timeout=30,
    ).raise_for_status()
    latest_before = httpx.get(f"{cluster.router_url}/stats", timeout=10).json()["mapping"]["latest"]

    _log_in(browser, cluster.router_url, ADMIN_TOKEN)
    _view(browser, "learning")
    # Publishing a mapping asks first, saying how much traffic it is learned from.
    _by_id(browser, "learn").click()
    asked = _wait(browser, alert_is_present(), "the confirmation")
    admin = {"authorization": f"Bearer {ADMIN_TOKEN}"}
    routing = httpx.get(f"{cluster.router_url}/admin/routing", headers=admin, timeout=30).json()
    logged = routing["publications"]
    assert f"from the {logged} logged publications" in asked.text
    assert f"Only {logged} are logged" in asked.text  # fewer than 1,000
    asked.dismiss()
    assert "state: idle" in _by_id(browser, "learning-state").text  # nothing started
    _by_id(browser, "learn").click()
    _wait(browser, alert_is_present(), "the confirmation").accept()
    WebDriverWait(browser, 300).until(
        lambda d: (
            "state: succeeded" in _by_id(d, "learning-state").text
            or "state: failed" in _by_id(d, "learning-state").text
        ),
        message="the learning run ended",
    )
    assert "state: succeeded" in _by_id(browser, "learning-state").text, _by_id(
        browser, "learning-state"
    ).text
    shown = _by_id(browser, "learning-state").text
    assert not re.search(r"\d\d:\d\d:\d\d (WARN|INFO) ", shown), shown  # Spark's log left out
    rows = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#learning-figures tr")]
    assert any(r.startswith("before hash") for r in rows), rows
    after = [r for r in rows if r.startswith("after learned")]
    assert after, rows
    assert int(after[0].split()[2]) > latest_before  # the version the run published
    assert _problems(browser) == []


def test_the_admin_makes_a_tenant_and_revokes_its_key(
    cluster: RunningCluster, browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.expected_conditions import alert_is_present

    router = cluster.router_url
    _log_in(browser, router, ADMIN_TOKEN)
    _view(browser, "tenants")
    _by_id(browser, "tenant-name").send_keys("console-made")
    _by_id(browser, "tenant-name").submit()
    _wait(browser, lambda d: _by_id(d, "secret-dialog").is_displayed(), "the new key shown")
    key = _by_id(browser, "secret-value").text
    assert _by_id(browser, "secret-title").text == "API key"
    assert _by_id(browser, "notice").text == "Made tenant console-made"
    # The key works, as the tenant's.
    who = httpx.get(f"{router}/whoami", headers={"authorization": f"Bearer {key}"}, timeout=10)
    assert who.json()["tenant"] == "console-made"
    _by_id(browser, "secret-close").click()
    row = _wait(
        browser,
        lambda d: d.find_elements(By.CSS_SELECTOR, "#tenants tr[data-tenant='console-made']"),
        "the tenant listed",
    )[0]
    assert row.text.split()[:3] == ["console-made", "1", "0"]
    key_row = _wait(
        browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#tenant-keys tr[data-key]"), "its key"
    )[0]
    # Revoking asks first; accepted, the key is refused from then on.
    key_row.find_element(By.XPATH, ".//button[text()='Revoke']").click()
    _wait(browser, alert_is_present(), "the confirmation").accept()
    _wait(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, "#tenant-keys tr"), "revoked")
    refused = httpx.get(f"{router}/whoami", headers={"authorization": f"Bearer {key}"}, timeout=10)
    assert refused.status_code == 401
    assert _problems(browser) == []


def test_the_admin_makes_a_shared_stream_grants_and_revokes_rights_and_deletes_it(
    cluster: RunningCluster, browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.expected_conditions import alert_is_present

    router = cluster.router_url
    stream, tenant = f"console-{uuid.uuid4().hex[:6]}", "console-streamer"
    as_tenant = {"authorization": f"Bearer {tenant_key(cluster, tenant)}"}
    shown = f"{router}/admin/streams/{stream}"
    as_admin = {"authorization": f"Bearer {ADMIN_TOKEN}"}

    def grants() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = httpx.get(shown, headers=as_admin, timeout=10).json()[
            "grants"
        ]
        return found

    def listed(d: Any) -> list[Any]:
        return list(d.find_elements(By.CSS_SELECTOR, f"#streams tr[data-stream='{stream}']"))

    def row_of_stream(d: Any) -> list[str] | None:
        # Read in one script: the table is redrawn after every change.
        cells: list[str] | None = d.execute_script(
            "const r = document.querySelector(`#streams tr[data-stream='${arguments[0]}']`);"
            "return r ? [...r.cells].map((c) => c.textContent) : null",
            stream,
        )
        return cells

    _log_in(browser, router, ADMIN_TOKEN)
    _view(browser, "streams")
    _by_id(browser, "stream-name").send_keys(stream)
    _by_id(browser, "stream-name").submit()
    _wait(browser, lambda d: _by_id(d, "grant").is_displayed(), "the grants of the new stream")
    assert httpx.get(shown, headers=as_admin, timeout=10).status_code == 200
    # Granting sets the tenant's rights; the stream's row names who holds each.
    _by_id(browser, "grant-tenant").send_keys(tenant)
    _by_id(browser, "grant-publish").click()
    _by_id(browser, "grant-subscribe").click()
    _by_id(browser, "grant").submit()
    _wait(
        browser,
        lambda d: (row_of_stream(d) or [])[:3] == [stream, tenant, tenant],
        "both rights listed",
    )
    assert grants() == [{"tenant": tenant, "publish": True, "subscribe": True}]
    sub = httpx.post(
        f"{router}/subscriptions", json={"query": "otter", "stream": stream}, headers=as_tenant
    )
    assert sub.status_code == 201, sub.text
    # Dropping "subscribe" would delete the tenant's subscriptions to it: asked first.
    _by_id(browser, "grant-tenant").send_keys(tenant)
    _by_id(browser, "grant-subscribe").click()
    _by_id(browser, "grant").submit()
    _wait(browser, alert_is_present(), "the confirmation").dismiss()
    assert grants()[0]["subscribe"]
    # Revoking asks first; accepted, the rights and the subscription go.
    revoke = _wait(
        browser,
        lambda d: d.find_elements(
            By.XPATH, f"//tr[@data-tenant='{tenant}']//button[text()='Revoke']"
        ),
        "the grant listed",
    )[0]
    revoke.click()
    _wait(browser, alert_is_present(), "the confirmation").accept()
    _wait(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, "#grants tr"), "revoked")
    assert grants() == []
    gone = httpx.get(f"{router}/subscriptions/{sub.json()['id']}", headers=as_tenant, timeout=10)
    assert gone.status_code == 404
    # Deleting the stream asks first.
    listed(browser)[0].find_element(By.XPATH, ".//button[text()='Delete']").click()
    asked = _wait(browser, alert_is_present(), "the confirmation")
    assert stream in asked.text
    asked.accept()
    _wait(browser, lambda d: row_of_stream(d) is None, "the stream gone")
    assert httpx.get(shown, headers=as_admin, timeout=10).status_code == 404
    assert _problems(browser) == []


SCREENSHOTS = Path(__file__).parents[2] / "docs" / "screenshots"
TENANT_VIEWS = ["matches", "subscriptions", "endpoints", "deadletters"]
ADMIN_VIEWS = ["cluster", "tenants", "streams", "routing", "learning", "admin-deadletters"]


def _page_width(driver: Any) -> int:
    width: int = driver.execute_script("return document.documentElement.scrollWidth")
    return width


def test_every_view_holds_at_420_px_and_is_photographed(
    cluster: RunningCluster, browser: Any
) -> None:
    """Each view at a desktop's width and a phone's (420 px): nothing wider than the page (a
    wide table scrolls within itself), and a screenshot of each in docs/screenshots/."""
    router = cluster.router_url
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    try:
        for width in (1280, 420):
            browser.set_window_size(width, 900)
            inner: int = browser.execute_script("return window.innerWidth")
            suffix = "" if width == 1280 else f"-{width}"
            _open_logged_out(browser, router)
            browser.save_screenshot(str(SCREENSHOTS / f"login{suffix}.png"))
            for key, views in ((DEV_KEY, TENANT_VIEWS), (ADMIN_TOKEN, ADMIN_VIEWS)):
                _log_in(browser, router, key)
                for name in views:
                    _view(browser, name)
                    if name == "matches":
                        _by_id(browser, "from-oldest").click()  # what earlier tests made
                    time.sleep(0.5)  # what the view loads, drawn (a picture, not a check)
                    assert _page_width(browser) <= inner, f"{name} is wider than {inner} px"
                    browser.save_screenshot(str(SCREENSHOTS / f"{name}{suffix}.png"))
    finally:
        browser.set_window_size(1280, 900)
    taken = sorted(p.name for p in SCREENSHOTS.glob("*.png"))
    assert len(taken) >= 2 * (1 + len(TENANT_VIEWS) + len(ADMIN_VIEWS)), taken
