"""Publications: analysed, routed (multicast) and handed to the matchers, one request per matcher.

Routing sends each publication to K_H(P, M) under the active mapping version: the matchers of its
subscribed words (S³-TM Eq. 3.1), each only if its H(i) holds the word
(:func:`wordcast.routing.mapping.route_held`), or to fewer of those matchers while the router sheds
load (:mod:`.overload`); one request per matcher per batch, tagged with that version, the hot-word
copies drawn (§5.1), the publisher and the stream. Pattern subscriptions are routed by their
anchors (:mod:`wordcast.routing.anchors`): a publication also goes to the matchers owning an anchor
that occurs in its normalised text, flagged so that the matcher runs its pattern engine on it.
The held words that are wildcard words (``hous*``, :mod:`wordcast.query.wildcards`) that one of
a publication's tokens instantiates join its terms, routed and carried as any word is.
A sample of the analysed publications goes to the log the routing learner reads, written in the
background: a publication never waits for it (a router cut off from Redis drops samples, counted,
rather than holding publications).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from wordcast import _core
from wordcast.errors import AnswerTooLarge, MappingUnconfirmed, StoreUnavailable, Unavailable
from wordcast.query.filters import Value
from wordcast.query.patterns import normalise
from wordcast.query.wildcards import found_in_texts
from wordcast.routing.anchors import AnchorIndex
from wordcast.routing.mapping import HashMapping, WordHolders, keyed_draw, route_held
from wordcast.services.router.analysing import Analysed, CharsInFlight, PublicationAnalysis
from wordcast.services.router.matchers import MatcherClient, RoutedBatch
from wordcast.services.router.overload import LoadShedder
from wordcast.services.router.settings import RouterSettings
from wordcast.services.router.tenants import Tenants
from wordcast.services.router.versions import MappingVersions
from wordcast.storage import Store

log = logging.getLogger(__name__)

PUBLICATIONS = Counter("wordcast_router_publications", "Publications accepted")
ROUTED = Counter("wordcast_router_routed", "Publication copies sent to matchers")

LOG_FAILURES = Counter("wordcast_router_log_failures", "Batches whose sample was not logged")
LOG_DROPPED = Counter(
    "wordcast_router_log_dropped", "Sampled publications dropped: the log's writer fell behind"
)
YIELD_EVERY_TERMS = 20_000  # routing lets other work run this often (about a millisecond)
SAMPLES_WAITING_MAX = 10_000  # samples held for the log's writer; beyond, new ones are dropped
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


# Per matcher, the publications routed to it (as sent: dicts the JSON encoder takes as they are).
BatchesPerMatcher = dict[int, RoutedBatch]
# What routing a batch answers: the ids, each matcher's batch, the samples for the publication
# log, and what the recent publications keep for backfills.
Routing = tuple[
    list[str],
    BatchesPerMatcher,
    list[tuple[float, tuple[str, ...]]],
    list[tuple[str, str, list[str]]],
]


class Publishing:
    def __init__(
        self,
        settings: RouterSettings,
        store: Store,
        tenants: Tenants,
        versions: MappingVersions,
        matcher_client: MatcherClient,
        shedder: LoadShedder,
        routing_table: Callable[[], tuple[WordHolders, AnchorIndex, _core.WildcardTerms]],
    ) -> None:
        self.settings = settings
        self.store = store
        self.tenants = tenants
        self.versions = versions
        self.matcher_client = matcher_client
        self.shedder = shedder
        # The router's word holders, anchor owners and held wildcard words now.
        self._routing_table = routing_table
        self.analysis = PublicationAnalysis(settings.detect_languages)
        self._random = random.Random()
        self.stats = RoutingStats(settings.initial_matchers, 0)
        self.published = 0  # publications accepted by this process
        self.in_flight = CharsInFlight(settings.tenant_chars_in_flight_max)
        self._samples: deque[tuple[float, tuple[str, ...]]] = deque()
        self._sampled = asyncio.Event()
        self._writing: asyncio.Future[None] | None = None
        # Derived at scrape time, not per batch.
        SPREAD.set_function(lambda: self.stats.figures()["spread"])
        IMBALANCE.set_function(lambda: self.stats.figures()["imbalance"])
        IMBALANCE_CV.set_function(lambda: self.stats.figures()["cv"])

    def switched(self, active: HashMapping) -> None:
        """A new active version: its batches are measured apart."""
        self.stats = RoutingStats(active.matchers, active.version)

    async def check_publish_grant(self, tenant: str, stream: str | None) -> None:
        """Forbidden unless ``tenant`` may publish to ``stream`` (anyone may publish to its own
        subscriptions: no stream)."""
        if stream:
            await self.tenants.check_grant(tenant, stream, publish=True)

    async def publish(
        self,
        publications: Sequence[tuple[str | None, str]],
        publisher: str,
        stream: str = "",
        *,
        attributes: Sequence[Mapping[str, Value] | None] | None = None,
        languages: Sequence[str | None] | None = None,
    ) -> tuple[list[str], int]:
        """Analyse and route a batch of (id or None, text) that tenant ``publisher`` published
        (to shared ``stream``, or to its own subscriptions), ``attributes[k]`` and
        ``languages[k]`` what publication k says of itself (a language not given is detected,
        unless the settings say not to: :mod:`wordcast.query.languages`); returns the ids and
        batches sent.
        Raises Unavailable when a matcher or Redis did not take it: the batch may be sent again
        as it was."""
        if not self.versions.reported:
            raise MappingUnconfirmed(
                "the router has not reported its mapping version to Redis for over "
                f"{self.versions.report_fence_s:g} s, so it stops routing: a migration may retire "
                "that version meanwhile"
            )
        started = time.perf_counter()
        accepted = time.time()
        async with self._routed(publications, publisher, attributes, languages) as routed:
            version, (ids, per_matcher, sampled, recent) = routed
            shedder = self.shedder
            shedder.in_flight += len(ids)
            sends = (
                self.matcher_client.send(m, version, batch, publisher, stream, accepted)
                for m, batch in per_matcher.items()
            )
            try:
                with self.versions.in_use(version):
                    await asyncio.gather(*sends)
            except Unavailable as exc:
                raise Unavailable(f"{exc}; retry the batch (ids make retries safe)") from exc
            finally:
                shedder.in_flight -= len(ids)
        self._keep_samples(sampled)
        settings = self.settings
        if recent:
            await self.store.recent.append(
                publisher, stream, recent, settings.backfill_s, settings.backfill_max_entries
            )
        PUBLICATIONS.inc(len(ids))
        self.published += len(ids)
        ROUTED.inc(sum(len(batch) for batch in per_matcher.values()))
        if self.stats.version == version:
            self.stats.record(len(ids), {m: len(b) for m, b in per_matcher.items()})
        BATCH_SECONDS.observe(time.perf_counter() - started)
        return ids, len(per_matcher)

    async def dry_run(
        self,
        publications: Sequence[tuple[str | None, str]],
        publisher: str,
        stream: str = "",
        *,
        attributes: Sequence[Mapping[str, Value] | None] | None = None,
        languages: Sequence[str | None] | None = None,
        max_bytes: int = 0,
    ) -> tuple[list[str], list[tuple[str, int, str]]]:
        """What :meth:`publish` would deliver to ``publisher``'s own subscriptions: the ids, and
        (subscription id, publication's position, JSON text of ``matched``) for each match, in
        publication order. Analysed and routed as published (never shed), matched by every
        matcher concerned; nothing is logged, kept for backfills, delivered or counted. An
        answer whose matches' JSON would pass ``max_bytes`` is refused
        (:class:`~wordcast.errors.AnswerTooLarge`), each matcher stopping as soon as it passes."""
        async with self._routed(
            publications, publisher, attributes, languages, shed=False
        ) as routed:
            version, (ids, per_matcher, _, _) = routed
            with self.versions.in_use(version):
                answers = await asyncio.gather(
                    *(
                        self.matcher_client.dry_run(m, version, batch, publisher, stream, max_bytes)
                        for m, batch in per_matcher.items()
                    )
                )
        size = sum(len(m[2]) + len(m[0]) + 16 for answer in answers for m in answer or ())
        if any(answer is None for answer in answers) or (max_bytes and size > max_bytes):
            raise AnswerTooLarge(
                f"the dry run's answer would pass its {max_bytes}-byte limit "
                "(WORDCAST_ROUTER_DRY_RUN_MAX_BYTES): dry-run fewer or shorter publications"
            )
        position_of = {pub_id: k for k, pub_id in enumerate(ids)}
        found: dict[tuple[int, str], str] = {}
        for batch, answer in zip(per_matcher.values(), answers, strict=True):
            for sub_id, position, matched in answer or ():
                # A subscription held on two matchers (a migration) is shown once.
                found.setdefault((position_of[batch.ids[position]], sub_id), matched)
        return ids, [(sub_id, k, matched) for (k, sub_id), matched in sorted(found.items())]

    @contextlib.asynccontextmanager
    async def _routed(
        self,
        publications: Sequence[tuple[str | None, str]],
        publisher: str,
        attributes: Sequence[Mapping[str, Value] | None] | None,
        languages: Sequence[str | None] | None,
        *,
        shed: bool = True,
    ) -> AsyncIterator[tuple[int, Routing]]:
        """A batch analysed and routed on the active mapping (its version, and :meth:`_route`'s
        answer), the publisher's characters held in flight for the block: what :meth:`publish`
        and :meth:`dry_run` share."""
        size = sum(len(text) for _, text in publications)
        with self.in_flight.hold(publisher, size):
            analysed = await self.analysis.analyse(publications, attributes, languages, size)
            mapping = self.versions.view.active
            yield mapping.version, await self._route(publications, mapping, analysed, shed=shed)

    async def _route(
        self,
        publications: Sequence[tuple[str | None, str]],
        mapping: HashMapping,
        analysed: Analysed,
        *,
        shed: bool = True,
    ) -> Routing:
        """The ids (given or made), what goes to each matcher, the log's sample and what
        backfills read, from each publication's terms and filter terms (``analysed``). Lets
        other work run every ``YIELD_EVERY_TERMS`` terms routed (long texts take turns)."""
        ids: list[str] = []
        per_matcher: BatchesPerMatcher = {}
        held, anchors, wildcards = self._routing_table()
        has_hot_words = bool(mapping.splits)
        shedder = self.shedder
        rate, sample_draw = self.settings.publication_log_rate, self._random.random
        sampled: list[tuple[float, tuple[str, ...]]] = []
        now = time.time()
        terms_of = _with_wildcards(analysed.terms, publications, wildcards)
        filters, languages = analysed.filters, analysed.languages
        recent: list[tuple[str, str, list[str]]] = []
        keep_recent = self.settings.backfill_s > 0
        routed_terms = 0
        for k, ((pub_id, text), terms) in enumerate(zip(publications, terms_of, strict=True)):
            routed_terms += len(terms)
            if routed_terms >= YIELD_EVERY_TERMS:
                routed_terms = 0
                await asyncio.sleep(0)
            pub_id = pub_id or uuid.uuid4().hex
            ids.append(pub_id)
            # Routed on its words; its filter terms go along, for the matchers to check.
            carried = [*terms, *filters[k]] if filters else list(terms)
            if keep_recent:  # every publication: a new subscription may want any of them
                recent.append((pub_id, text, carried))
            if rate and terms and sample_draw() < rate:
                sampled.append((now, terms))
            copy_draw = keyed_draw(pub_id) if has_hot_words else None
            targets, drawn = route_held(terms, held, mapping, copy_draw)
            if shed and shedder.enabled and targets:
                targets = shedder.cut(targets, terms, held, mapping, drawn)
            # A pattern on its way off a removed matcher is owned there too (and stays so here
            # until the events say otherwise); nothing there serves this version.
            pattern_targets = (
                anchors.targets(normalise(text), mapping.matchers) if len(anchors) else set()
            )
            if not targets and not pattern_targets:
                continue
            for matcher in targets | pattern_targets:
                batch = per_matcher.get(matcher)
                if batch is None:
                    batch = per_matcher[matcher] = RoutedBatch()
                batch.add(pub_id, text, carried, languages[k], drawn, matcher in pattern_targets)
        return ids, per_matcher, sampled, recent

    def _keep_samples(self, sampled: list[tuple[float, tuple[str, ...]]]) -> None:
        room = SAMPLES_WAITING_MAX - len(self._samples)
        if len(sampled) > room:
            LOG_DROPPED.inc(len(sampled) - max(room, 0))
            sampled = sampled[: max(room, 0)]
        if sampled:
            self._samples.extend(sampled)
            self._sampled.set()

    def _take_samples(self) -> list[tuple[float, tuple[str, ...]]]:
        batch = list(self._samples)
        self._samples.clear()
        return batch

    async def write_samples(self) -> None:
        """Write the sampled publications to the log as they come (run in the background): what
        accumulated during one write goes out in the next. A write under way when the router
        stops is finished by :meth:`flush_samples`, not cut short."""
        while True:
            await self._sampled.wait()
            self._sampled.clear()
            self._writing = asyncio.ensure_future(self._log(self._take_samples()))
            await asyncio.shield(self._writing)

    async def flush_samples(self, timeout_s: float = 5.0) -> None:
        """On shutdown: the write under way finished, and what still waits written."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                if self._writing is not None:
                    await self._writing
                if self._samples:
                    await self._log(self._take_samples())

    async def _log(self, sampled: list[tuple[float, tuple[str, ...]]]) -> None:
        """The log is a sample for learning: losing some of it must not fail a publication."""
        try:
            await self.store.publication_log.append(sampled, self.settings.publication_log_max)
        except StoreUnavailable as exc:
            LOG_FAILURES.inc()
            log.warning("publication log not written: %s", exc)


def _with_wildcards(
    terms_of: list[tuple[str, ...]],
    publications: Sequence[tuple[str | None, str]],
    wildcards: _core.WildcardTerms,
) -> list[tuple[str, ...]]:
    """Each publication's terms and the held wildcard words its tokens instantiate."""
    if not len(wildcards):
        return terms_of
    found = found_in_texts(wildcards, [text for _, text in publications])
    return [(*terms, *more) if more else terms for terms, more in zip(terms_of, found, strict=True)]
