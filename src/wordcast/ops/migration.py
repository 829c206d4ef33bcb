"""Moving subscriptions to a new mapping version without losing or duplicating a match.

Routers switch mapping versions at slightly different moments, so for a while publications are
routed with two versions. The window ``low high`` (:mod:`wordcast.storage.mappings`) names the versions
that may be in use, and every keyword subscription holds placements serving each of them
(:mod:`wordcast.routing.placement`). Moving to version v takes four steps, run by whichever router holds the
migration lock; each step is safe to repeat, so a router that dies midway leaves work another
finishes:

1. widen the window to ``low v``: from now on a subscription is stored only with placements for
   both (the store refuses placements planned for an older window);
2. re-place, with LASP under v, every subscription whose placement does not serve v: its old
   placement is closed at v and the new one opened at v, in one atomic move. Patterns are routed
   by their anchors, so only those on a matcher v no longer has (a mapping for fewer matchers:
   the cluster is scaled down) move, to the least pattern-loaded matcher, preferring one that
   holds their anchor already; or, when v removes no matcher, whole anchor groups from a matcher
   holding far more than its share of patterns (new matchers hold none) to the least loaded
   (:func:`wordcast.routing.placement.rebalance_patterns`);
3. wait until every matcher has applied every move, then make v the active version: routers
   switch, tagging their batches with v;
4. once every live router reports that nothing older than v is in use (in flight included), narrow
   the window to ``v v`` and drop the placements that served only older versions (marked in
   Redis as under way until done, since the narrowed window no longer shows that work is left).

A version for another number of matchers is how the cluster is scaled: the steps are the same,
over every matcher of either version. After step 4 a removed matcher holds nothing and no router
sends it anything, so it can be stopped.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from wordcast.errors import NotFound
from wordcast.routing.lasp import UNIT_COST
from wordcast.routing.mapping import HashMapping
from wordcast.routing.placement import (
    Placement,
    candidates,
    move_pattern,
    pattern_still_valid,
    place_pattern,
    prune,
    rebalance_patterns,
    reopen,
    still_valid,
)
from wordcast.storage import Store
from wordcast.storage.mappings import MappingStore
from wordcast.storage.records import Subscription

log = logging.getLogger(__name__)

BATCH = 500  # moves per round trip to Redis

Sync = Callable[[str], Awaitable[None]]
KeepAlive = Callable[[], Awaitable[None]]


@dataclass
class Report:
    scanned: int = 0
    moved: int = 0


async def _each_subscription(store: Store, matchers: int) -> list[Subscription]:
    seen: dict[str, Subscription] = {}
    for matcher in range(matchers):
        async for page in store.word_maps.placed_on(matcher):
            for sub in page:
                seen.setdefault(sub.id, sub)
    return list(seen.values())


async def _replace(
    store: Store,
    sub: Subscription,
    change: Callable[[Subscription], tuple[Placement, ...] | None],
) -> tuple[Placement, ...] | None:
    """Apply ``change`` to a subscription's placements, again if it changed meanwhile; returns
    the placements stored, or None when nothing needed moving."""
    for _ in range(5):
        placements = change(sub)
        if placements is None:
            return None
        if await store.subscriptions.move(sub, placements) is not None:
            return placements
        try:
            sub = await store.subscriptions.get(sub.id)
        except NotFound:  # deleted meanwhile: nothing to move
            return None
    raise RuntimeError(f"subscription {sub.id} kept changing during the migration")


async def _replace_all(
    store: Store,
    subs: list[Subscription],
    change: Callable[[Subscription], tuple[Placement, ...] | None],
    keep_alive: KeepAlive,
    what: str,
    batch: int = BATCH,
) -> Report:
    """:func:`_replace` over ``subs``, a batch of moves per round trip: a migration of 10^5
    subscriptions must not wait on 10^5 round trips while routers hold two mapping versions.
    ``change`` runs in order, so LASP sees every earlier decision; the few moves that lose a race
    with a client's change are redone one by one on the fresh record."""
    report = Report()
    for start in range(0, len(subs), batch):
        planned = [(sub, change(sub)) for sub in subs[start : start + batch]]
        moves = [(sub, placements) for sub, placements in planned if placements is not None]
        results = await store.subscriptions.move_many(moves)
        report.scanned += len(planned)
        for (sub, _placements), event_id in zip(moves, results, strict=True):
            if event_id is not None:
                report.moved += 1
                continue
            try:
                fresh = await store.subscriptions.get(sub.id)
            except NotFound:  # deleted meanwhile: nothing to move
                continue
            if await _replace(store, fresh, change) is not None:
                report.moved += 1
        await keep_alive()
        log.info("%s: %d scanned, %d moved", what, report.scanned, report.moved)
    return report


class _Replanner:
    """Where each subscription goes under ``target``: None where its placements still serve it,
    else its new placements. Keyword subscriptions are re-placed with LASP on the word maps as
    they fill up during the move; patterns on a matcher ``target`` no longer has go to the least
    pattern-loaded matcher, and whole anchor groups move to rebalance when growing."""

    def __init__(
        self,
        target: HashMapping,
        word_maps: list[set[str]],
        pattern_loads: dict[int, int],
        anchor_counts: list[dict[str, int]],
        removing: bool,
        cost: Callable[[float], float],
    ) -> None:
        self.target, self.word_maps, self.pattern_loads, self.cost = (
            target,
            word_maps,
            pattern_loads,
            cost,
        )
        self.anchor_owners: dict[str, set[int]] = {}
        for matcher, counts in enumerate(anchor_counts):
            for anchor in counts:
                self.anchor_owners.setdefault(anchor, set()).add(matcher)
        # Rebalancing while matchers are removed would plan around patterns about to move anyway.
        self.rebalanced = {} if removing else rebalance_patterns(anchor_counts)
        self.draw = random.Random(target.version).choice

    @classmethod
    async def read(
        cls, store: Store, target: HashMapping, span: int | None, cost: Callable[[float], float]
    ) -> _Replanner:
        matchers = range(target.matchers)
        return cls(
            target,
            [set(await store.word_maps.word_map(i)) for i in matchers],
            await store.word_maps.pattern_loads(),
            [await store.word_maps.anchor_map(i) for i in matchers],
            (span or 0) > target.matchers,
            cost,
        )

    def change_pattern(self, sub: Subscription) -> tuple[Placement, ...] | None:
        target = self.target
        if pattern_still_valid(sub.placements, sub.matcher, target.matchers):
            moved_to = self.rebalanced.get((sub.matcher, sub.anchor))
            if moved_to is None:
                return None
            return move_pattern(sub.placements, sub.matcher, target.version, moved_to)
        owners = self.anchor_owners.setdefault(sub.anchor, set())
        matcher = place_pattern(owners, self.pattern_loads, target.matchers, self.draw)
        self.pattern_loads[matcher] = self.pattern_loads.get(matcher, 0) + 1
        owners.add(matcher)
        return move_pattern(sub.placements, sub.matcher, target.version, matcher)

    def change(self, sub: Subscription) -> tuple[Placement, ...] | None:
        if sub.is_pattern:
            return self.change_pattern(sub)
        target, word_maps = self.target, self.word_maps
        if still_valid(sub.placements, sub.terms, target):
            return None
        sizes = [len(h) for h in word_maps]
        known = {
            i: sum(1 for t in sub.terms if t in word_maps[i])
            for i in candidates(sub.terms, [target])
        }
        placements = reopen(sub.placements, sub.terms, target, sizes, known, self.cost)
        # Counted as placed now: the next subscription's LASP decision must see this one.
        for placement in placements:
            if placement.first == target.version:
                word_maps[placement.matcher].update(sub.terms)
        return placements


async def move_to(
    store: Store,
    mappings: MappingStore,
    target: HashMapping,
    low: int,
    sync: Sync,
    keep_alive: KeepAlive,
    cost: Callable[[float], float] = UNIT_COST,
    batch: int = BATCH,
    span: int | None = None,
) -> Report:
    """Steps 1-3: every subscription placed for ``target``, which then becomes active.

    ``span``: how many matchers may hold subscriptions now (default: as many as ``target`` has).
    """
    await mappings.set_window(low, target.version)
    planner = await _Replanner.read(store, target, span, cost)
    subs = await _each_subscription(store, max(span or 0, target.matchers))
    report = await _replace_all(
        store, subs, planner.change, keep_alive, f"mapping v{target.version}", batch
    )
    await sync(await store.events.last_event_id())
    await mappings.activate(target.version)
    log.info(
        "mapping v%d active: %d subscriptions, %d moved",
        target.version,
        report.scanned,
        report.moved,
    )
    return report


async def retire(
    store: Store,
    mappings: MappingStore,
    active: int,
    matchers: int,
    sync: Sync,
    keep_alive: KeepAlive,
    batch: int = BATCH,
) -> Report:
    """Step 4 (call only when no router uses a version older than ``active``), over matchers
    0 … ``matchers`` - 1.

    The window is narrowed first, so no placement for an older version is stored from then on,
    and marked as retiring until every older placement is dropped: once narrowed, the window
    alone no longer says that work is left, so a router that stops midway leaves the mark for
    another to finish (:meth:`MappingStore.retiring`).
    """
    await mappings.narrow_window(active)

    def change(sub: Subscription) -> tuple[Placement, ...] | None:
        kept = prune(sub.placements, active)
        return kept if len(kept) < len(sub.placements) else None

    subs = await _each_subscription(store, matchers)
    report = await _replace_all(
        store, subs, change, keep_alive, f"retiring versions < v{active}", batch
    )
    # Done before the catch-up: matchers apply the drops from the event stream in any case, and
    # a matcher that cannot be reached now must not make every router scan everything again.
    await mappings.retired(active)
    await sync(await store.events.last_event_id())
    log.info("mapping window narrowed to v%d: %d placements dropped", active, report.moved)
    return report
