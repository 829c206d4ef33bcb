"""The router's logic: analyse, place subscriptions (any-cast), route publications (multicast).

Keyword subscriptions are placed with LASP (S³-TM Alg. 2) among the eligible matchers B(S, M) of
every mapping version in use (:mod:`wordcast.placement`); routing sends each publication to
K(P, M) (Eq. 3.1) under the active mapping version (or to fewer of those matchers while the router
sheds load, :mod:`.overload`), one request per matcher per batch, tagged with that version and the
hot-word copies drawn (§5.1). A background task follows the mapping versions
(announcements, plus a periodic check) and, when a new version appears, moves the subscriptions to
it (:mod:`wordcast.migration`) if no other router is doing so. Another reports, every few seconds,
the oldest version this router may still route with; a migration retires a version only once no
live report names it, so a router that cannot renew its report (cut off from Redis, or stalled)
stops routing well before the report expires: it answers 503 and turns unready rather than route
with a version that may already be retired.
Pattern subscriptions are routed by their anchors (:mod:`wordcast.anchors`): a publication also
goes to the matchers owning an anchor that occurs in its normalised text, in the same request,
flagged so that the matcher runs its pattern engine on it. The router keeps only state it can
rebuild from Redis: the subscribed words s(W), the owners of each anchor, and the mapping versions.
A boolean query (:mod:`wordcast.boolean`) is stored as one keyword subscription per alternative,
each placed with LASP on its own required words; routing does not know the difference.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import logging
import random
import secrets
import time
import uuid
from collections import Counter as Tally
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from prometheus_client import Counter, Gauge, Histogram
from redis.exceptions import RedisError

from ...analysis import Analyzer
from ...anchors import AnchorIndex
from ...boolean import BooleanQuery, parse_query, part_id, split_part_id
from ...errors import (
    InvalidInput,
    LimitExceeded,
    MappingError,
    MappingUnconfirmed,
    MatcherUnavailable,
    NotFound,
    StaleMapping,
    StoreUnavailable,
    Unauthenticated,
)
from ...lasp import LinearCost
from ...mapping_store import MappingStore
from ...migration import move_to, retire
from ...netguard import resolve
from ...outbox import DeadLetters, Message
from ...patterns import normalise, parse
from ...placement import candidates, place_pattern, plan
from ...ratelimit import RateLimiter
from ...routing import HashMapping, route
from ...store import EventFollower, Subscription, SubscriptionEvent, SubscriptionStore
from .overload import LoadShedder
from .scale import ScaleFollower
from .settings import DEVELOPMENT_API_KEY, RouterSettings

log = logging.getLogger(__name__)

PUBLICATIONS = Counter("wordcast_router_publications", "Publications accepted")
ROUTED = Counter("wordcast_router_routed", "Publication copies sent to matchers")
KEY_CACHE_SECONDS = 30.0

LOG_FAILURES = Counter("wordcast_router_log_failures", "Batches whose sample was not logged")
BATCH_SECONDS = Histogram("wordcast_router_batch_seconds", "Time to analyse and route one batch")
MAPPING_VERSION = Gauge("wordcast_router_mapping_version", "Mapping version new batches use")
MIGRATIONS = Counter("wordcast_router_migrations", "Mapping migrations run here", ["step"])
# S³-TM §3.1's measures of the traffic this router routed under the active mapping version.
SPREAD = Gauge("wordcast_router_spread", "Mean matchers per publication (Eq. 3.2)")
IMBALANCE = Gauge("wordcast_router_imbalance", "Max over mean matcher load (Eq. 3.4)")
IMBALANCE_CV = Gauge("wordcast_router_imbalance_cv", "Coefficient of variation of matcher loads")
MATCHER_LOAD = Gauge(
    "wordcast_router_matcher_load", "Publications routed to each matcher", ["matcher"]
)


class RoutingStats:
    """Spread and imbalance of the publications routed under one mapping version."""

    def __init__(self, matchers: int, version: int) -> None:
        self.version = version
        self.publications = 0
        self.loads = [0] * matchers
        for matcher in range(matchers):
            MATCHER_LOAD.labels(str(matcher)).set(0)

    def record(self, publications: int, per_matcher: dict[int, int]) -> None:
        """Count a routed batch (cheap: the derived figures are computed when read)."""
        self.publications += publications
        for matcher, count in per_matcher.items():
            self.loads[matcher] += count
            MATCHER_LOAD.labels(str(matcher)).inc(count)

    def figures(self) -> dict[str, Any]:
        total, n = sum(self.loads), len(self.loads)
        mean = total / n
        variance = sum((load - mean) ** 2 for load in self.loads) / n
        return {
            "version": self.version,
            "publications": self.publications,
            "spread": total / self.publications if self.publications else 0.0,
            "imbalance": max(self.loads) / mean if mean else 0.0,
            "cv": variance**0.5 / mean if mean else 0.0,
            "loads": list(self.loads),
        }


@dataclass(frozen=True)
class MappingView:
    """The mapping versions as this router last read them: one immutable snapshot per batch."""

    active: HashMapping
    window: tuple[int, int]
    planning: tuple[HashMapping, ...]  # the window's versions: placements must serve each

    @property
    def window_text(self) -> str:
        return f"{self.window[0]} {self.window[1]}"

    @property
    def span(self) -> int:
        """Matchers that may hold subscriptions: every ordinal of any version in use."""
        return max(m.matchers for m in (self.active, *self.planning))

    @property
    def common(self) -> int:
        """Matchers that every version in use routes to (a new pattern goes to one of them)."""
        return min(m.matchers for m in (self.active, *self.planning))


class RouterState:
    def __init__(self, settings: RouterSettings, store: SubscriptionStore) -> None:
        self.settings = settings
        self.store = store
        self.analyzer = Analyzer()
        template = settings.url_template
        self.matcher_urls = [] if template else list(settings.matcher_urls)
        self._registered_urls: dict[int, str] = {}  # matchers the configuration does not name
        hashing = HashMapping(settings.initial_matchers)
        self.view = MappingView(hashing, (0, 0), (hashing,))
        self.mappings = MappingStore(store.client, store.ns)
        self._mapping_cache: dict[int, HashMapping] = {}
        self.latest = 0
        self.router_id = uuid.uuid4().hex
        self._in_flight: Tally[int] = Tally()
        # Routing stops once the last report is older than the fence; the report lives long enough
        # for every batch sent before the fence to finish (a matcher answers within its timeout).
        self._reported_at: float | None = None
        self.report_fence_s = 3 * settings.mapping_poll_s
        self.report_ttl_s = self.report_fence_s + 2 * settings.mapping_poll_s
        self.report_ttl_s += settings.matcher_timeout_s
        self.cost = LinearCost(settings.lasp_cost_slope, settings.lasp_cost_intercept)
        self.routing_stats = RoutingStats(hashing.matchers, 0)
        # Derived at scrape time, not per batch.
        SPREAD.set_function(lambda: self.routing_stats.figures()["spread"])
        IMBALANCE.set_function(lambda: self.routing_stats.figures()["imbalance"])
        IMBALANCE_CV.set_function(lambda: self.routing_stats.figures()["cv"])
        self.subscribed: set[str] = set()
        self.anchors = AnchorIndex()
        self.follower = EventFollower(store, self._load_snapshot, self._apply)
        self.client = httpx.AsyncClient(
            timeout=settings.matcher_timeout_s,
            limits=httpx.Limits(max_keepalive_connections=4 * max(hashing.matchers, 8)),
        )
        self.scale = ScaleFollower(settings, store, self.mappings, self.client)
        self._random = random.Random()
        self.address_policy = settings.address_policy
        self._known_keys: dict[str, tuple[str, float]] = {}  # key hash -> (tenant, checked at)
        self.dead_letters = DeadLetters(store.client, store.ns)
        self.shedder = LoadShedder(settings, hashing.matchers, store)
        self.rate_limiter = RateLimiter(
            store.client, store.ns, settings.publications_per_second, settings.publication_burst
        )

    @property
    def ready(self) -> bool:
        return self.follower.ready.is_set() and self.reported

    @property
    def reported(self) -> bool:
        """Whether the versions this router uses were reported recently enough to route."""
        last = self._reported_at
        return last is not None and time.monotonic() - last <= self.report_fence_s

    async def close(self) -> None:
        await self.client.aclose()
        await self.scale.aclose()

    # -- replica of s(W) ----------------------------------------------------------------------
    async def _load_snapshot(self) -> None:
        # The nightly learner learns for the number recorded (wordcast scale changes it).
        await self.store.want_matchers(self.settings.initial_matchers, only_if_unset=True)
        await self.mappings.record_initial(self.settings.initial_matchers)
        await self.refresh_mappings()
        subscribed = await self.store.subscribed_words()
        anchors = AnchorIndex()
        for matcher in range(self.view.span):
            for anchor in await self.store.anchor_map(matcher):
                anchors.add(anchor, matcher)
        self.subscribed, self.anchors = subscribed, anchors

    def _apply(self, events: Iterable[SubscriptionEvent]) -> None:
        for event in events:
            sub = event.subscription
            if sub.is_pattern:
                for matcher in event.anchor_joined:
                    self.anchors.add(sub.anchor, matcher)
                for matcher in event.anchor_left:
                    self.anchors.discard(sub.anchor, matcher)
            elif event.op == "add":
                self.subscribed.update(event.words)
            elif event.op == "del":
                self.subscribed.difference_update(event.words)

    # -- tenants ------------------------------------------------------------------------------
    async def authenticate(self, api_key: str | None) -> str:
        """The tenant an API key belongs to; raises Unauthenticated."""
        if not api_key:
            raise Unauthenticated("no API key: send Authorization: Bearer <key>")
        if self.settings.environment == "development" and api_key == DEVELOPMENT_API_KEY:
            return "dev"
        key_hash = hashlib.sha256(api_key.encode()).hexdigest()
        known = self._known_keys.get(key_hash)
        if known is not None and time.monotonic() - known[1] < KEY_CACHE_SECONDS:
            return known[0]
        tenant = await self.store.tenant_for(key_hash)
        if tenant is None:
            raise Unauthenticated("unknown API key")
        self._known_keys[key_hash] = (tenant, time.monotonic())
        return tenant

    def check_admin(self, token: str | None) -> None:
        expected = self.settings.admin_token.get_secret_value().encode()
        if not token or not hmac.compare_digest(token.encode(), expected):
            raise Unauthenticated("admin operations need the admin token as a Bearer token")

    async def create_api_key(self, tenant: str) -> str:
        """A new API key for a tenant; only its hash is stored, so it is shown once."""
        api_key = "wck_" + secrets.token_urlsafe(32)
        await self.store.add_api_key(hashlib.sha256(api_key.encode()).hexdigest(), tenant)
        return api_key

    async def replay(self, tenant: str, dead_id: str) -> Message:
        """Send a dead letter again: back into the outbox of its subscription's matcher."""
        letter = await self.dead_letters.get(tenant, dead_id)
        for sub_id in letter.message.subscription_ids:
            try:
                sub = await self.owned(sub_id, tenant)
            except NotFound:
                continue
            return await self.dead_letters.replay(tenant, dead_id, sub.matcher)
        raise NotFound(f"the subscriptions of dead letter {dead_id!r} were deleted")

    async def owned(self, sub_id: str, tenant: str) -> Subscription:
        """A tenant's subscription; another tenant's is NotFound, like one that does not exist."""
        sub = await self.store.get(sub_id)
        if sub.tenant != tenant:
            raise NotFound(f"no subscription with id {sub_id!r}")
        return sub

    # -- subscriptions ------------------------------------------------------------------------
    def analyse_query(self, query: str) -> BooleanQuery:
        """The query's alternatives (:mod:`wordcast.boolean`); one without operators is a
        single conjunction of its terms. Raises InvalidInput naming the problem."""
        return parse_query(query, self.analyzer)

    @staticmethod
    def new_secret() -> str:
        """A Standard Webhooks signing secret: whsec_ and 24 random bytes in base64."""
        return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()

    async def rotate_secret(self, sub_id: str, tenant: str) -> str:
        """A new signing secret; the old one keeps working for the grace period."""
        await self.owned(sub_id, tenant)
        secret = self.new_secret()
        grace_until = time.time() + self.settings.secret_grace_s
        await self.store.rotate_secret(sub_id, secret, grace_until)
        return secret

    async def subscribe(self, query: str, callback_url: str, tenant: str) -> Subscription:
        analysed = self.analyse_query(query)
        if not analysed.is_plain:  # several records: the batch path withdraws a partial one
            return (await self.subscribe_batch([("query", query, callback_url)], tenant))[0]
        await resolve(callback_url, self.address_policy)
        terms = analysed.clauses[0].words
        sub, event_id = await self._add_keywords(query, terms, callback_url, tenant)
        await self._announce(event_id, sub.matchers)
        return sub

    async def _add_query(
        self,
        query: str,
        analysed: BooleanQuery,
        callback_url: str,
        tenant: str,
        added: list[tuple[Subscription, str]],
    ) -> None:
        """Place and store every alternative of a checked query, in order, appending each to
        ``added`` as it is stored (so that a failure part-way leaves what to withdraw).

        Alternative k is a keyword subscription of its required words under ``part_id(id, k)``,
        with the query's text: the matcher holding it rebuilds the alternatives from that text,
        and delivers under the subscription's id (the first alternative's record, which alone
        carries the signing secret). Earlier alternatives are stored first, so that a later one
        never delivers a match that an earlier one, not yet stored, would have had to."""
        if analysed.is_plain:
            terms = analysed.clauses[0].words
            added.append(await self._add_keywords(query, terms, callback_url, tenant))
            return
        first = uuid.uuid4().hex
        secret = self.new_secret()
        for part, clause in enumerate(analysed.clauses):
            stored = await self._add_keywords(
                query,
                clause.words,
                callback_url,
                tenant,
                sub_id=part_id(first, part),
                secret=secret if part == 0 else "",
            )
            added.append(stored)

    async def _add_keywords(
        self,
        query: str,
        terms: tuple[str, ...],
        callback_url: str,
        tenant: str,
        sub_id: str | None = None,
        secret: str | None = None,
    ) -> tuple[Subscription, str]:
        """Place a checked keyword subscription with LASP and store it (not yet announced)."""
        for _ in range(5):
            view = self.view
            placements = await self._plan(terms, view)
            opened = [p.matcher for p in placements if p.is_open]
            try:
                return await self._store(
                    sub_id,
                    secret,
                    query=query,
                    terms=terms,
                    callback_url=callback_url,
                    matcher=opened[0],
                    tenant=tenant,
                    placements=placements,
                    window=view.window_text,
                )
            except StaleMapping:
                await self.refresh_mappings()  # the window moved: plan for the new one
        raise StoreUnavailable("the mapping window kept moving while placing a subscription")

    async def _plan(self, terms: Sequence[str], view: MappingView) -> Any:
        """LASP over every version in the window, with H(i) as Redis holds it now."""
        wanted = candidates(terms, view.planning)
        sizes, known = await self.store.word_map_view(view.span, wanted, terms)
        return plan(terms, view.planning, sizes, known, self.cost)

    async def subscribe_pattern(self, source: str, callback_url: str, tenant: str) -> Subscription:
        pattern = parse(source)
        await resolve(callback_url, self.address_policy)
        sub, event_id = await self._add_pattern(source, pattern.anchor, callback_url, tenant)
        await self._announce(event_id, sub.matchers)
        return sub

    async def _add_pattern(
        self, source: str, anchor: str, callback_url: str, tenant: str
    ) -> tuple[Subscription, str]:
        """Place a checked pattern on a matcher every version in use routes to, and store it."""
        for _ in range(5):
            view = self.view
            matcher = place_pattern(
                self.anchors.owners(anchor),
                await self.store.pattern_loads(),
                view.common,
                self._random.choice,
            )
            try:
                return await self._store(
                    window=view.window_text,
                    query="",
                    terms=(),
                    callback_url=callback_url,
                    matcher=matcher,
                    tenant=tenant,
                    pattern=source,
                    anchor=anchor,
                )
            except StaleMapping:
                await self.refresh_mappings()
        raise StoreUnavailable("the mapping window kept moving while placing a subscription")

    async def subscribe_batch(
        self, items: Sequence[tuple[str, str, str]], tenant: str
    ) -> list[Subscription]:
        """Register (kind, query or pattern, callback URL) items, kind "query" or "pattern".

        Every item is analysed and every callback checked before any is stored, so bad input
        changes nothing. The items are then placed one after another (LASP sees the ones before)
        and stored, and the matchers concerned catch up once, for the whole batch: a request
        round trip and a catch-up per subscription were most of the cost of registering many.
        """
        terms_or_anchors: list[BooleanQuery | str] = []
        first_use: dict[str, int] = {}
        for index, (kind, text, callback_url) in enumerate(items):
            try:
                terms_or_anchors.append(
                    self.analyse_query(text) if kind == "query" else parse(text).anchor
                )
            except InvalidInput as exc:
                raise InvalidInput(f"subscription {index}: {exc}") from exc
            first_use.setdefault(callback_url, index)
        for callback_url, index in first_use.items():
            try:
                await resolve(callback_url, self.address_policy)
            except InvalidInput as exc:
                raise InvalidInput(f"subscription {index}: {exc}") from exc
        limit = self.settings.max_subscriptions_per_tenant
        held = await self.store.tenant_count(tenant)
        # Each alternative of a boolean query is a stored record and counts.
        records = sum(
            len(c.clauses) if isinstance(c, BooleanQuery) else 1 for c in terms_or_anchors
        )
        if held + records > limit:
            more = f"{len(items)} more" if records == len(items) else f"{records} more records"
            raise LimitExceeded(
                f"tenant {tenant!r} holds {held} subscriptions and the limit is {limit}: "
                f"{more} do not fit; nothing was stored"
            )
        added: list[tuple[Subscription, str]] = []
        done = 0
        try:
            for (kind, text, callback_url), checked in zip(items, terms_or_anchors, strict=True):
                if kind == "query":
                    assert isinstance(checked, BooleanQuery)
                    await self._add_query(text, checked, callback_url, tenant, added)
                else:
                    assert isinstance(checked, str)
                    added.append(await self._add_pattern(text, checked, callback_url, tenant))
                    # The next pattern with this anchor should see which matcher now owns it.
                    await self.follower.catch_up(until=added[-1][1])
                done += 1
        except (StoreUnavailable, LimitExceeded) as exc:
            kept = [sub for sub, _ in added]
            withdrawn = await self._withdraw(kept)
            fate = (
                f"the {len(kept)} stored before it were withdrawn"
                if withdrawn
                else f"{len(kept)} were stored before it and could not be withdrawn: "
                "list your subscriptions"
            )
            failure = StoreUnavailable if isinstance(exc, StoreUnavailable) else LimitExceeded
            raise failure(f"subscription {done}: {exc}; {fate}") from exc
        matchers = sorted({m for sub, _ in added for m in sub.matchers})
        try:
            await self._announce(added[-1][1], matchers)
        except StoreUnavailable as exc:  # as for one subscription: stored, not yet in effect here
            raise StoreUnavailable(
                f"all {len(added)} subscriptions were stored, but {exc}; they take effect as "
                "the services catch up (list your subscriptions for their ids)"
            ) from exc
        return [sub for sub, _ in added if split_part_id(sub.id)[1] == 0]

    async def _withdraw(self, subs: Sequence[Subscription]) -> bool:
        """Delete what a failed batch stored; False if Redis would not let us."""
        try:
            # Later alternatives first: one never outlives the records before it.
            events = [(await self.store.delete(sub.id))[1] for sub in reversed(subs)]
        except StoreUnavailable as exc:
            log.error("could not withdraw a failed batch's subscriptions: %s", exc)
            return False
        if events:
            await self._announce(events[-1], sorted({m for s in subs for m in s.matchers}))
        return True

    async def _store(
        self,
        sub_id: str | None = None,
        secret: str | None = None,
        window: str = "0 0",
        **fields: Any,
    ) -> tuple[Subscription, str]:
        """Store a validated, placed subscription (under a fresh id and secret unless given);
        the caller announces it (once, for a whole batch)."""
        sub = Subscription(
            id=sub_id or uuid.uuid4().hex,
            created=time.time(),
            secret=self.new_secret() if secret is None else secret,
            **fields,
        )
        event_id = await self.store.add(sub, self.settings.max_subscriptions_per_tenant, window)
        return sub, event_id

    async def unsubscribe(self, sub_id: str, tenant: str) -> Subscription:
        await self.owned(sub_id, tenant)
        sub, event_id, matchers = await self.store.delete_with_alternatives(sub_id)
        await self._announce(event_id, sorted(matchers))
        return sub

    async def _announce(self, event_id: str, matchers: Sequence[int]) -> None:
        """Make the change effective here and on its matchers before answering the client.

        The change is already durable; if a matcher cannot be told now, it reads the event
        from the stream on its own, so a failure here only delays the change.
        """
        await self.follower.catch_up(until=event_id)
        await self._sync_those_answering(matchers, event_id, "it will catch up")

    async def _sync_those_answering(
        self, matchers: Sequence[int], event_id: str, meanwhile: str
    ) -> None:
        results = await asyncio.gather(
            *(self._sync(m, event_id) for m in matchers), return_exceptions=True
        )
        for matcher, result in zip(matchers, results, strict=True):
            if isinstance(result, Exception):
                log.warning(
                    "matcher %d not told of event %s now (%s); %s",
                    matcher,
                    event_id,
                    result,
                    meanwhile,
                )

    async def _sync(self, matcher: int, event_id: str) -> None:
        response = await self.client.post(
            f"{self.matcher_url(matcher)}/internal/sync",
            json={"until": event_id},
            timeout=self.settings.sync_timeout_s,
        )
        response.raise_for_status()

    async def _sync_all(self, event_id: str, matchers: int) -> None:
        """Matchers 0 … ``matchers`` - 1 have applied every event up to ``event_id`` (raises if
        one cannot)."""
        try:
            await asyncio.gather(*(self._sync(m, event_id) for m in range(matchers)))
        except httpx.HTTPError as exc:
            raise MatcherUnavailable(-1, f"a matcher could not catch up: {exc}") from exc

    # -- matchers -----------------------------------------------------------------------------
    def matcher_url(self, matcher: int) -> str:
        template = self.settings.url_template
        if template:
            return template.format(ordinal=matcher)
        if matcher < len(self.matcher_urls):
            return self.matcher_urls[matcher]
        return self._registered_urls[matcher]

    async def _reach(self, matchers: int) -> None:
        """Know the URL of every matcher below ``matchers``: those the configuration does not
        name (added by scaling) registered theirs in Redis when they started. Read again for
        every new mapping version: a matcher removed and added again may answer elsewhere."""
        if self.settings.url_template:
            return
        for matcher in range(len(self.matcher_urls), matchers):
            url = await self.store.matcher_url(matcher)
            if url is None:
                raise MappingError(
                    f"matcher {matcher} has not registered its URL in Redis: start it (a mapping "
                    f"version for {matchers} matchers needs matchers 0 to {matchers - 1})"
                )
            self._registered_urls[matcher] = url

    # -- mapping versions ---------------------------------------------------------------------
    async def _mapping(self, version: int) -> HashMapping:
        mapping = self._mapping_cache.get(version)
        if mapping is None:
            mapping = await self.mappings.load(version, self.settings.initial_matchers)
            await self._reach(mapping.matchers)
            self._mapping_cache[version] = mapping
        return mapping

    async def refresh_mappings(self) -> None:
        """Read the active version and the window from Redis and switch to them."""
        latest, active, (low, high) = await self.mappings.state()
        planning = tuple([await self._mapping(low)] + ([await self._mapping(high)] * (high != low)))
        view = MappingView(await self._mapping(active), (low, high), planning)
        if active != self.view.active.version and self.follower.ready.is_set():
            # A migration moved patterns before it activated this version: their anchors' new
            # owners must be known here before a batch is tagged with it.
            await self.follower.catch_up()
        self.view = view
        self.latest = latest
        if self.routing_stats.version != active:
            self.routing_stats = RoutingStats(view.active.matchers, active)
            self.shedder.resize(view.active.matchers)
        MAPPING_VERSION.set(active)

    def oldest_in_use(self) -> int:
        """The oldest version this router may still route a batch with (in flight included)."""
        in_flight = [version for version, count in self._in_flight.items() if count > 0]
        return min([self.view.active.version, *in_flight])

    async def watch_mappings(self) -> None:
        """Follow announcements (and check every few seconds, in case one was missed)."""
        poll = self.settings.mapping_poll_s
        while True:
            try:
                pubsub = self.store.client.pubsub()
                await pubsub.subscribe(self.mappings.channel)
                try:
                    while True:
                        await self._mapping_step()
                        await pubsub.get_message(ignore_subscribe_messages=True, timeout=poll)
                finally:
                    await pubsub.aclose()
            except (StoreUnavailable, RedisError) as exc:  # pub/sub errors come untranslated
                log.warning("mapping watch interrupted (%s); retrying", exc)
            # The loop must outlive surprises: without it the router never changes mappings again.
            except Exception:
                log.exception("following the mapping versions failed; retrying")
            await asyncio.sleep(poll)

    async def _mapping_step(self) -> None:
        try:
            await self.refresh_mappings()
        except MappingError as exc:
            log.error("mapping not usable: %s", exc)
        latest, (low, _) = self.latest, self.view.window
        active = self.view.active.version
        if latest > active:
            await self._locked(self._move_to, latest, low)
        elif low < active:
            oldest = await self.mappings.oldest_in_use()
            if oldest is not None and oldest >= active:
                await self._locked(self._retire, active)
        else:
            await self.scale.step(self.view.active.matchers, self._locked)

    async def report_versions(self) -> None:
        """Report the oldest version in use every poll interval, apart from the mapping watch (a
        migration it runs can take longer than the report lives)."""
        while True:
            started = time.monotonic()
            try:
                await self.mappings.heartbeat(
                    self.router_id, self.oldest_in_use(), self.report_ttl_s
                )
                self._reported_at = started  # the value written was true at the start
            except StoreUnavailable as exc:
                log.warning("could not report the mapping versions in use: %s", exc)
            # The loop must outlive surprises: without it the router stops routing for good.
            except Exception:
                log.exception("reporting the mapping versions in use failed")
            await asyncio.sleep(self.settings.mapping_poll_s)

    async def _locked(self, work: Any, *args: Any) -> None:
        ttl_ms = int(self.settings.mapping_lock_ttl_s * 1000)
        if not await self.mappings.acquire(self.router_id, ttl_ms):
            return  # another router is at it

        async def keep_alive() -> None:
            await self.mappings.renew(self.router_id, ttl_ms)

        try:
            await work(*args, keep_alive)
            await self.mappings.clear_problem()
        except (MappingError, MatcherUnavailable) as exc:
            log.error("mapping change stopped, will retry: %s", exc)
            with contextlib.suppress(StoreUnavailable):  # for wordcast scale to show
                await self.mappings.report_problem(str(exc), self.settings.mapping_lock_ttl_s)
        finally:
            await self.mappings.release(self.router_id)
        await self.refresh_mappings()

    async def _move_to(self, version: int, low: int, keep_alive: Any) -> None:
        target = await self._mapping(version)
        span = max(self.view.span, target.matchers)

        async def sync(event_id: str) -> None:
            await self._sync_all(event_id, target.matchers)
            # No batch tagged with the new version reaches a matcher it does not have, so whether
            # such a one applied its moves cannot change a match: one that is gone (a pod stopped
            # before its subscriptions moved) must not hold the cluster on the old version.
            await self._sync_those_answering(
                range(target.matchers, span), event_id, f"v{version} removes it: going on"
            )

        await move_to(
            self.store, self.mappings, target, low, sync, keep_alive, self.cost, span=span
        )
        MIGRATIONS.labels("activate").inc()

    async def _retire(self, active: int, keep_alive: Any) -> None:
        span, staying = self.view.span, self.view.active.matchers

        async def sync(event_id: str) -> None:
            # Matchers the active version no longer has may be stopped already.
            await self._sync_all(event_id, staying)

        await retire(self.store, self.mappings, active, span, sync, keep_alive)
        MIGRATIONS.labels("retire").inc()

    # -- publications -------------------------------------------------------------------------
    async def publish(
        self, publications: Sequence[tuple[str | None, str]]
    ) -> tuple[list[str], int]:
        """Analyse and route a batch of (id or None, text); returns the ids and batches sent."""
        if not self.reported:
            raise MappingUnconfirmed(
                "the router has not reported its mapping version to Redis for over "
                f"{self.report_fence_s:g} s, so it stops routing: a migration may retire that "
                "version meanwhile"
            )
        started = time.perf_counter()
        ids: list[str] = []
        per_matcher: dict[int, list[dict[str, object]]] = {}
        subscribed = self.subscribed
        view = self.view
        mapping = view.active
        version = mapping.version
        randrange = self._random.randrange
        anchors = self.anchors
        shedder = self.shedder
        terms_of = self.analyzer.terms
        rate, draw = self.settings.publication_log_rate, self._random.random
        sampled: list[tuple[float, frozenset[str]]] = []
        now = time.time()
        for pub_id, text in publications:
            pub_id = pub_id or uuid.uuid4().hex
            ids.append(pub_id)
            terms = terms_of(text)
            if rate and terms and draw() < rate:
                sampled.append((now, terms))
            targets, drawn = route(terms, subscribed, mapping, randrange)
            if shedder.enabled and targets:
                targets = shedder.cut(targets, terms, subscribed, mapping, drawn)
            # A pattern on its way off a removed matcher is owned there too (and stays so here
            # until the events say otherwise); nothing there serves this version.
            pattern_targets = (
                anchors.targets(normalise(text), mapping.matchers) if len(anchors) else set()
            )
            if not targets and not pattern_targets:
                continue
            routed: dict[str, object] = {"id": pub_id, "text": text, "terms": list(terms)}
            if drawn:
                routed["hot"] = drawn
            for matcher in targets - pattern_targets:
                per_matcher.setdefault(matcher, []).append(routed)
            if pattern_targets:
                flagged = {**routed, "patterns": True}
                for matcher in pattern_targets:
                    per_matcher.setdefault(matcher, []).append(flagged)
        self._in_flight[version] += 1
        shedder.in_flight += len(ids)
        try:
            await asyncio.gather(
                *(self._send(m, version, batch) for m, batch in per_matcher.items()),
                self._log(sampled),
            )
        finally:
            self._in_flight[version] -= 1
            shedder.in_flight -= len(ids)
        PUBLICATIONS.inc(len(ids))
        ROUTED.inc(sum(len(batch) for batch in per_matcher.values()))
        if self.routing_stats.version == version:
            self.routing_stats.record(len(ids), {m: len(b) for m, b in per_matcher.items()})
        BATCH_SECONDS.observe(time.perf_counter() - started)
        return ids, len(per_matcher)

    async def _log(self, sampled: list[tuple[float, frozenset[str]]]) -> None:
        """The log is a sample for learning: losing some of it must not fail a publication."""
        try:
            await self.store.log_publications(sampled, self.settings.publication_log_max)
        except StoreUnavailable as exc:
            LOG_FAILURES.inc()
            log.warning("publication log not written: %s", exc)

    async def _send(self, matcher: int, version: int, batch: list[dict[str, object]]) -> None:
        try:
            response = await self.client.post(
                f"{self.matcher_url(matcher)}/internal/match",
                content=orjson.dumps({"version": version, "publications": batch}),
                headers={"content-type": "application/json"},
            )
        except httpx.HTTPError as exc:
            raise MatcherUnavailable(matcher, f"{type(exc).__name__}: {exc}") from exc
        if not response.is_success:
            raise MatcherUnavailable(matcher, f"HTTP {response.status_code}: {response.text[:200]}")
