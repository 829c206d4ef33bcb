"""The router's load shedding: :mod:`wordcast.routing.shedding` fed with this router's own buffer.

S³-TM's router pulls publications from a buffer; ours has none of its own, so the buffer is the
publications this router has admitted and not yet answered for (their batches wait on the
matchers). When the matchers fall behind, that number grows with every publisher that keeps
sending, which is the overload §5.2.2 reacts to. A publisher that waits for each answer before the
next batch never fills it: it slows down instead, and nothing is shed.

Shedding applies to the keyword multicast K(P, M) only. Pattern subscriptions are routed by their
anchors, not by the mapping, and are never shed. Each router adapts on its own, as each Router &
SubscriptionPlacer instance does in the paper. Shedding is off unless ``WORDCAST_ROUTER_SHEDDING`` chooses a
strategy, because it trades matches for throughput: the metrics say how many copies were shed.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Collection, Mapping

from prometheus_client import Counter, Gauge

from wordcast.errors import StoreUnavailable
from wordcast.routing.mapping import HashMapping, held_word_votes
from wordcast.routing.shedding import (
    Controller,
    Levels,
    SpreadHistogram,
    consensus_scores,
    keep,
    subscription_scores,
)
from wordcast.services.router.settings import RouterSettings
from wordcast.storage import Store

log = logging.getLogger(__name__)

LEVEL = Gauge("wordcast_router_shedding_level", "Load shedding level (0: nothing is shed)")
THRESHOLD = Gauge(
    "wordcast_router_shedding_threshold", "Most matchers a publication goes to (+Inf: no limit)"
)
FULLNESS = Gauge(
    "wordcast_router_buffer_fullness", "Publications in flight over the shedding buffer size b"
)
SHED_COPIES = Counter(
    "wordcast_router_shed_copies", "Publication copies not sent to a matcher because of shedding"
)
SHED_PUBLICATIONS = Counter(
    "wordcast_router_shed_publications", "Publications sent to fewer matchers than K(P, M)"
)

# The histogram of |K(P, M)| halves every period: L(l) follows the last few seconds of traffic.
HISTOGRAM_DECAY = 0.5


class LoadShedder:
    def __init__(self, settings: RouterSettings, matchers: int, store: Store) -> None:
        self.strategy = settings.shedding
        self.enabled = self.strategy != "off"  # read once per routed publication
        self.settings = settings
        self.store = store
        self.matchers = matchers
        self.levels = Levels(settings.shed_max_matchers, settings.shed_step, matchers)
        self.controller = Controller(self.levels, float(settings.shed_in_flight))
        self.histogram = SpreadHistogram()
        self.in_flight = 0
        self.threshold = math.inf
        self.word_maps: dict[int, dict[str, int]] = {}
        self._random = random.Random()
        self.shed_copies = self.shed_publications = 0
        LEVEL.set(0)
        THRESHOLD.set(math.inf)
        FULLNESS.set_function(lambda: self.in_flight / self.controller.buffer)

    def resize(self, matchers: int) -> None:
        """Start over for a mapping version with another number of matchers (its levels differ)."""
        if matchers == self.matchers:
            return
        self.matchers = matchers
        self.levels = Levels(self.settings.shed_max_matchers, self.settings.shed_step, matchers)
        self.controller = Controller(self.levels, float(self.settings.shed_in_flight))
        self.threshold = math.inf
        THRESHOLD.set(math.inf)
        LEVEL.set(0)

    def cut(
        self,
        targets: set[int],
        terms: Collection[str],
        held: Mapping[str, int],
        mapping: HashMapping,
        drawn: Mapping[str, int],
    ) -> set[int]:
        """The targets a publication keeps at the current level (all of them at level 0);
        ``held`` maps each subscribed word to the matchers holding it, as :func:`route_held`
        reads it."""
        self.histogram.record(len(targets))
        if len(targets) <= self.threshold:
            return targets
        if self.strategy == "subscription":
            scores = subscription_scores(terms, targets, self.word_maps)
        else:
            scores = consensus_scores(held_word_votes(terms, held, mapping, drawn), targets)
        kept = keep(scores, self.threshold, self._random.random)
        if len(kept) < len(targets):
            self.shed_copies += len(targets) - len(kept)
            self.shed_publications += 1
            SHED_COPIES.inc(len(targets) - len(kept))
            SHED_PUBLICATIONS.inc()
        return kept

    def adapt(self) -> int:
        levels = self.levels
        loads = [self.histogram.load(levels.threshold(lv)) for lv in range(levels.max_level + 1)]
        before = self.controller.level
        level = self.controller.adapt(self.in_flight, loads)
        self.histogram.decay(HISTOGRAM_DECAY)
        self.threshold = self.controller.threshold
        if level != before:
            log.warning(
                "load shedding level %d -> %d (at most %g matchers per publication; %d of %d "
                "publications in flight)",
                before,
                level,
                self.threshold,
                self.in_flight,
                self.settings.shed_in_flight,
            )
        LEVEL.set(level)
        THRESHOLD.set(self.threshold)
        return level

    async def run(self) -> None:
        """Adapt every period; subscription shedding also re-reads the word maps H(i)."""
        if not self.enabled:
            return
        period = self.settings.shed_period_s
        every = max(1, round(self.settings.shed_word_maps_s / period))
        tick = 0
        while True:
            if self.strategy == "subscription" and tick % every == 0:
                await self._read_word_maps()
            tick += 1
            await asyncio.sleep(period)
            self.adapt()

    async def _read_word_maps(self) -> None:
        try:
            self.word_maps = {
                m: await self.store.word_maps.word_map(m) for m in range(self.matchers)
            }
        except StoreUnavailable as exc:  # stale counts only make the ranking less apt
            log.warning("word maps for subscription shedding not refreshed: %s", exc)

    def figures(self) -> dict[str, object]:
        return {
            "strategy": self.strategy,
            "level": self.controller.level,
            "max_level": self.levels.max_level,
            "threshold": None if math.isinf(self.threshold) else self.threshold,
            "in_flight": self.in_flight,
            "buffer": self.settings.shed_in_flight,
            "shed_copies": self.shed_copies,
            "shed_publications": self.shed_publications,
        }
