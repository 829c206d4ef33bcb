"""The router's logic: analyse, place subscriptions (any-cast), route publications (multicast).

Keyword subscriptions are placed with LASP (S³-TM Alg. 2) among the eligible matchers B(S, M) of
every mapping version in use (:mod:`wordcast.routing.placement`); routing sends each publication to
K_H(P, M) under the active mapping version: the matchers of its subscribed words (Eq. 3.1), each
only if its H(i) holds the word (:func:`wordcast.routing.mapping.route_held`), or to fewer of those
matchers while the router sheds load (:mod:`.overload`); one request per matcher per batch, tagged
with that version and the hot-word copies drawn (§5.1). Which versions are in use, and moving
the subscriptions when a new one appears, is :mod:`.versions`; the requests to matchers are
:mod:`.matchers`; API keys are :mod:`.tenants`.
Pattern subscriptions are routed by their anchors (:mod:`wordcast.routing.anchors`): a publication also
goes to the matchers owning an anchor that occurs in its normalised text, in the same request,
flagged so that the matcher runs its pattern engine on it. The router keeps only state it can
rebuild from Redis: which matchers' H(i) hold each subscribed word, the owners of each anchor, and
the mapping versions.
A boolean query (:mod:`wordcast.query.boolean`) is stored as one keyword subscription per alternative,
each placed with LASP on its own required words; routing does not know the difference.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import random
import secrets
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from wordcast.errors import (
    Forbidden,
    InvalidInput,
    LimitExceeded,
    MappingUnconfirmed,
    NotFound,
    StaleMapping,
    StoreUnavailable,
    Unavailable,
)
from wordcast.query.analysis import Analyzer
from wordcast.query.boolean import BooleanQuery, parse_query, part_id, split_part_id
from wordcast.query.patterns import normalise, parse
from wordcast.routing.anchors import AnchorIndex
from wordcast.routing.lasp import LinearCost
from wordcast.routing.mapping import HashMapping, WordHolders, keyed_draw, route_held
from wordcast.routing.placement import candidates, place_pattern, plan
from wordcast.services.router.matchers import MatcherLinks
from wordcast.services.router.overload import LoadShedder
from wordcast.services.router.settings import RouterSettings
from wordcast.services.router.streams import SharedStreams
from wordcast.services.router.tenants import Tenants
from wordcast.services.router.versions import MappingVersions, MappingView
from wordcast.storage import Store
from wordcast.storage.events import EventFollower
from wordcast.storage.outbox import Message
from wordcast.storage.records import Subscription, SubscriptionEvent
from wordcast.webhooks.netguard import resolve

log = logging.getLogger(__name__)

PUBLICATIONS = Counter("wordcast_router_publications", "Publications accepted")
ROUTED = Counter("wordcast_router_routed", "Publication copies sent to matchers")

LOG_FAILURES = Counter("wordcast_router_log_failures", "Batches whose sample was not logged")
BATCH_SECONDS = Histogram("wordcast_router_batch_seconds", "Time to analyse and route one batch")
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


class RouterState:
    def __init__(self, settings: RouterSettings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self.analyzer = Analyzer()
        self.tenants = Tenants(settings, store)
        self.streams = SharedStreams(store, self.tenants, self.delete_subscriptions)
        self.links = MatcherLinks(settings, store)
        self.follower = EventFollower(store.events, self._load_snapshot, self._apply)
        self.cost = LinearCost(settings.lasp_cost_slope, settings.lasp_cost_intercept)
        self.versions = MappingVersions(
            settings, store, self.links, self.follower, self.cost, self._switched
        )
        self.routing_stats = RoutingStats(settings.initial_matchers, 0)
        # Derived at scrape time, not per batch.
        SPREAD.set_function(lambda: self.routing_stats.figures()["spread"])
        IMBALANCE.set_function(lambda: self.routing_stats.figures()["imbalance"])
        IMBALANCE_CV.set_function(lambda: self.routing_stats.figures()["cv"])
        self.held = WordHolders()
        self.anchors = AnchorIndex()
        self._random = random.Random()
        self.address_policy = settings.address_policy
        self.dead_letters = store.dead_letters
        self.shedder = LoadShedder(settings, settings.initial_matchers, store)
        self.rate_limiter = store.rate_limiter(
            settings.publications_per_second, settings.publication_burst
        )

    @property
    def view(self) -> MappingView:
        return self.versions.view

    @property
    def ready(self) -> bool:
        return self.follower.ready.is_set() and self.versions.reported

    async def close(self) -> None:
        await self.links.aclose()
        await self.versions.aclose()

    def _switched(self, active: HashMapping) -> None:
        """A new active version: new batches route with it, and are measured apart."""
        self.routing_stats = RoutingStats(active.matchers, active.version)
        self.shedder.resize(active.matchers)

    # -- replica of s(W) ----------------------------------------------------------------------
    async def _load_snapshot(self) -> None:
        self.links.authorize(await self.store.cluster.internal_token())
        # The nightly learner learns for the number recorded (wordcast scale changes it).
        await self.store.cluster.want_matchers(self.settings.initial_matchers, only_if_unset=True)
        await self.versions.mappings.record_initial(self.settings.initial_matchers)
        await self.versions.refresh()
        held = WordHolders()
        for matcher, words in (await self.store.word_maps.held_words(self.view.span)).items():
            held.hold(matcher, words)
        anchors = AnchorIndex()
        for matcher in range(self.view.span):
            for anchor in await self.store.word_maps.anchor_map(matcher):
                anchors.add(anchor, matcher)
        self.held, self.anchors = held, anchors

    def _apply(self, events: Iterable[SubscriptionEvent]) -> None:
        for event in events:
            sub = event.subscription
            if sub.is_pattern:
                for matcher in event.anchor_joined:
                    self.anchors.add(sub.anchor, matcher)
                for matcher in event.anchor_left:
                    self.anchors.discard(sub.anchor, matcher)
            else:
                for matcher, words in event.held:
                    self.held.hold(matcher, words)
                for matcher, words in event.dropped:
                    self.held.drop(matcher, words)

    # -- tenants' subscriptions -----------------------------------------------------------------
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
        sub = await self.store.subscriptions.get(sub_id)
        if sub.tenant != tenant:
            raise NotFound(f"no subscription with id {sub_id!r}")
        return sub

    # -- subscriptions ------------------------------------------------------------------------
    def analyse_query(self, query: str) -> BooleanQuery:
        """The query's alternatives (:mod:`wordcast.query.boolean`); one without operators is a
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
        await self.store.subscriptions.rotate_secret(sub_id, secret, grace_until)
        return secret

    async def subscribe(
        self, query: str, callback_url: str, tenant: str, stream: str = ""
    ) -> Subscription:
        analysed = self.analyse_query(query)
        await resolve(callback_url, self.address_policy)
        await self._may_subscribe(tenant, [stream])
        if not analysed.is_plain:  # several records: the batch path withdraws a partial one
            item = ("query", query, callback_url, stream)
            return (await self._register([item], [analysed], tenant))[0]
        terms = analysed.clauses[0].words
        sub, event_id = await self._add_keywords(query, terms, callback_url, tenant, stream=stream)
        await self._still_granted(tenant, [sub])
        await self._announce(event_id, sub.matchers)
        return sub

    async def _may_subscribe(self, tenant: str, streams: Iterable[str]) -> None:
        """Forbidden unless the tenant may subscribe to each shared stream named."""
        for stream in sorted({stream for stream in streams if stream}):
            await self.tenants.check_grant(tenant, stream, publish=False)

    async def _still_granted(self, tenant: str, stored: Sequence[Subscription]) -> None:
        """Withdraw what was just stored if a subscribe grant it needed was revoked meanwhile.

        Revoking takes the grant away first and then deletes the tenant's subscriptions to the
        stream; storing comes first here and reading the grant (afresh) after. Whichever order
        the two interleave in, one of them sees the other: no subscription outlives its grant.
        """
        for stream in sorted({sub.stream for sub in stored if sub.stream}):
            if not (await self.store.tenants.grant(stream, tenant))[1]:
                await self._withdraw(stored)
                raise Forbidden(
                    f"tenant {tenant!r} lost its grant to subscribe to stream {stream!r} while "
                    "subscribing; nothing was stored"
                )

    async def _add_query(
        self,
        query: str,
        analysed: BooleanQuery,
        callback_url: str,
        tenant: str,
        added: list[tuple[Subscription, str]],
        stream: str = "",
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
            added.append(
                await self._add_keywords(query, terms, callback_url, tenant, stream=stream)
            )
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
                stream=stream,
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
        stream: str = "",
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
                    stream=stream,
                )
            except StaleMapping:
                await self.versions.refresh()  # the window moved: plan for the new one
        raise StoreUnavailable("the mapping window kept moving while placing a subscription")

    async def _plan(self, terms: Sequence[str], view: MappingView) -> Any:
        """LASP over every version in the window, with H(i) as Redis holds it now."""
        wanted = candidates(terms, view.planning)
        sizes, known = await self.store.word_maps.word_map_view(view.span, wanted, terms)
        return plan(terms, view.planning, sizes, known, self.cost)

    async def subscribe_pattern(
        self, source: str, callback_url: str, tenant: str, stream: str = ""
    ) -> Subscription:
        pattern = parse(source)
        await resolve(callback_url, self.address_policy)
        await self._may_subscribe(tenant, [stream])
        sub, event_id = await self._add_pattern(
            source, pattern.anchor, callback_url, tenant, stream
        )
        await self._still_granted(tenant, [sub])
        await self._announce(event_id, sub.matchers)
        return sub

    async def _add_pattern(
        self, source: str, anchor: str, callback_url: str, tenant: str, stream: str = ""
    ) -> tuple[Subscription, str]:
        """Place a checked pattern on a matcher every version in use routes to, and store it."""
        for _ in range(5):
            view = self.view
            matcher = place_pattern(
                self.anchors.owners(anchor),
                await self.store.word_maps.pattern_loads(),
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
                    stream=stream,
                )
            except StaleMapping:
                await self.versions.refresh()
        raise StoreUnavailable("the mapping window kept moving while placing a subscription")

    async def subscribe_batch(
        self, items: Sequence[tuple[str, str, str, str]], tenant: str
    ) -> list[Subscription]:
        """Register (kind, query or pattern, callback URL, shared stream or "") items, kind
        "query" or "pattern".

        Every item is analysed and every callback checked before any is stored, so bad input
        changes nothing. The items are then placed one after another (LASP sees the ones before)
        and stored, and the matchers concerned catch up once, for the whole batch: a request
        round trip and a catch-up per subscription were most of the cost of registering many.
        """
        terms_or_anchors: list[BooleanQuery | str] = []
        first_use: dict[str, int] = {}
        for index, (kind, text, callback_url, _) in enumerate(items):
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
        await self._may_subscribe(tenant, [item[3] for item in items])
        return await self._register(items, terms_or_anchors, tenant)

    async def _register(
        self,
        items: Sequence[tuple[str, str, str, str]],
        terms_or_anchors: Sequence[BooleanQuery | str],
        tenant: str,
    ) -> list[Subscription]:
        """Place, store and announce checked items (:meth:`subscribe_batch`), within the
        tenant's quota; a failure part-way withdraws what was stored."""
        limit = self.settings.max_subscriptions_per_tenant
        held = await self.store.subscriptions.tenant_count(tenant)
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
            for (kind, text, url, stream), checked in zip(items, terms_or_anchors, strict=True):
                if kind == "query":
                    assert isinstance(checked, BooleanQuery)
                    await self._add_query(text, checked, url, tenant, added, stream)
                else:
                    assert isinstance(checked, str)
                    added.append(await self._add_pattern(text, checked, url, tenant, stream))
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
        await self._still_granted(tenant, [sub for sub, _ in added])
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
            events = [(await self.store.subscriptions.delete(sub.id))[1] for sub in reversed(subs)]
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
        event_id = await self.store.subscriptions.add(
            sub, self.settings.max_subscriptions_per_tenant, window
        )
        return sub, event_id

    async def unsubscribe(self, sub_id: str, tenant: str) -> Subscription:
        await self.owned(sub_id, tenant)
        sub, event_id, matchers = await self.store.subscriptions.delete_with_alternatives(sub_id)
        await self._announce(event_id, sorted(matchers))
        return sub

    async def unsubscribe_batch(self, sub_ids: Sequence[str], tenant: str) -> list[str]:
        """Delete several of a tenant's subscriptions; the matchers concerned catch up once.

        Every id is checked first: if the tenant has no subscription with one of them, NotFound
        names them and nothing is deleted. One deleted meanwhile (another request) counts as
        deleted."""
        ids = list(dict.fromkeys(sub_ids))
        held = await self.store.subscriptions.tenant_holds(tenant, ids)
        unknown = [sub_id for sub_id, mine in zip(ids, held, strict=True) if not mine]
        if unknown:
            named = ", ".join(map(repr, unknown[:5])) + (" …" if len(unknown) > 5 else "")
            raise NotFound(
                f"{len(unknown)} of the ids are not subscriptions of yours ({named}); "
                "nothing was deleted"
            )
        await self.delete_subscriptions(ids)
        return ids

    async def delete_subscriptions(self, ids: Sequence[str]) -> None:
        """Delete subscriptions whoever they belong to (one gone already is passed over), and
        make it effective before returning."""
        last_event, matchers = await self.store.subscriptions.delete_many(ids)
        if last_event is not None:
            await self._announce(last_event, sorted(matchers))

    async def _announce(self, event_id: str, matchers: Sequence[int]) -> None:
        """Make the change effective here and on its matchers before answering the client.

        The change is already durable; if a matcher cannot be told now, it reads the event
        from the stream on its own, so a failure here only delays the change.
        """
        await self.follower.catch_up(until=event_id)
        await self.links.sync_those_answering(matchers, event_id, "it will catch up")

    # -- publications -------------------------------------------------------------------------
    async def check_publish_grant(self, tenant: str, stream: str | None) -> None:
        """Forbidden unless ``tenant`` may publish to ``stream`` (anyone may publish to its own
        subscriptions: no stream)."""
        if stream:
            await self.tenants.check_grant(tenant, stream, publish=True)

    async def publish(
        self, publications: Sequence[tuple[str | None, str]], publisher: str, stream: str = ""
    ) -> tuple[list[str], int]:
        """Analyse and route a batch of (id or None, text) that tenant ``publisher`` published
        (to shared ``stream``, or to its own subscriptions); returns the ids and batches sent.
        Raises Unavailable when a matcher or Redis did not take it: the batch may be sent again
        as it was."""
        if not self.versions.reported:
            raise MappingUnconfirmed(
                "the router has not reported its mapping version to Redis for over "
                f"{self.versions.report_fence_s:g} s, so it stops routing: a migration may retire "
                "that version meanwhile"
            )
        started = time.perf_counter()
        ids: list[str] = []
        per_matcher: dict[int, list[dict[str, object]]] = {}
        held = self.held
        view = self.view
        mapping = view.active
        version = mapping.version
        has_hot_words = bool(mapping.splits)
        anchors = self.anchors
        shedder = self.shedder
        terms_of = self.analyzer.terms
        rate, sample_draw = self.settings.publication_log_rate, self._random.random
        sampled: list[tuple[float, frozenset[str]]] = []
        now = time.time()
        for pub_id, text in publications:
            pub_id = pub_id or uuid.uuid4().hex
            ids.append(pub_id)
            terms = terms_of(text)
            if rate and terms and sample_draw() < rate:
                sampled.append((now, terms))
            copy_draw = keyed_draw(pub_id) if has_hot_words else None
            targets, drawn = route_held(terms, held, mapping, copy_draw)
            if shedder.enabled and targets:
                targets = shedder.cut(targets, terms, held, mapping, drawn)
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
        shedder.in_flight += len(ids)
        sends = (
            self.links.send(m, version, batch, publisher, stream)
            for m, batch in per_matcher.items()
        )
        try:
            with self.versions.in_use(version):
                await asyncio.gather(*sends, self._log(sampled))
        except Unavailable as exc:
            raise Unavailable(f"{exc}; retry the batch (ids make retries safe)") from exc
        finally:
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
            await self.store.publication_log.append(sampled, self.settings.publication_log_max)
        except StoreUnavailable as exc:
            LOG_FAILURES.inc()
            log.warning("publication log not written: %s", exc)
