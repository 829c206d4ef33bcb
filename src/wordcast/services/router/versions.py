"""The mapping versions one router follows, and the migrations it runs (S³-TM ch. 3, live swap).

A background task follows the mapping versions (announcements, plus a periodic check) and, when a
new version appears, moves the subscriptions to it (:mod:`wordcast.ops.migration`) if no other router
is doing so, under the migration lock; once the versions are settled it follows the number of
matchers wanted (:mod:`.scale_follower`). Another task reports, every few seconds, the oldest version this
router may still route with; a migration retires a version only once no live report names it, so
a router that cannot renew its report (cut off from Redis, or stalled) stops routing well before
the report expires: it answers 503 and turns unready rather than route with a version that may
already be retired.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import Counter as Tally
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter, Gauge
from redis.exceptions import RedisError

from wordcast.errors import MappingError, MatcherUnavailable, StoreUnavailable
from wordcast.ops.migration import move_to, retire
from wordcast.routing.lasp import LinearCost
from wordcast.routing.mapping import HashMapping
from wordcast.services.router.matchers import MatcherClient
from wordcast.services.router.scale_follower import ScaleFollower
from wordcast.services.router.settings import RouterSettings
from wordcast.storage import Store
from wordcast.storage.events import EventFollower

log = logging.getLogger(__name__)

MAPPING_VERSION = Gauge("wordcast_router_mapping_version", "Mapping version new batches use")
MIGRATIONS = Counter("wordcast_router_migrations", "Mapping migrations run here", ["step"])


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


class MappingVersions:
    """``view`` is what new work uses; ``on_switch`` hears of each new active version."""

    def __init__(
        self,
        settings: RouterSettings,
        store: Store,
        matcher_client: MatcherClient,
        follower: EventFollower,
        cost: LinearCost,
        on_switch: Callable[[HashMapping], None],
    ) -> None:
        self.settings = settings
        self.matcher_client = matcher_client
        self.follower = follower
        self.store = store
        self.cost = cost
        self._on_switch = on_switch
        hashing = HashMapping(settings.initial_matchers)
        self.view = MappingView(hashing, (0, 0), (hashing,))
        self.mappings = store.mappings
        self.scale = ScaleFollower(settings, store, self.mappings, matcher_client.client)
        self._cache: dict[int, HashMapping] = {}
        self.latest = 0
        self.router_id = uuid.uuid4().hex
        self._in_flight: Tally[int] = Tally()
        # Routing stops once the last report is older than the fence; the report lives long enough
        # for every batch sent before the fence to finish (a matcher answers within its timeout).
        self._reported_at: float | None = None
        self.report_fence_s = 3 * settings.mapping_poll_s
        self.report_ttl_s = self.report_fence_s + 2 * settings.mapping_poll_s
        self.report_ttl_s += settings.matcher_timeout_s

    async def aclose(self) -> None:
        await self.scale.aclose()

    @property
    def reported(self) -> bool:
        """Whether the versions this router uses were reported recently enough to route."""
        last = self._reported_at
        return last is not None and time.monotonic() - last <= self.report_fence_s

    @contextlib.contextmanager
    def in_use(self, version: int) -> Iterator[None]:
        """A batch tagged with ``version`` is on its way: reports name it until it is done."""
        self._in_flight[version] += 1
        try:
            yield
        finally:
            self._in_flight[version] -= 1

    def oldest_in_use(self) -> int:
        """The oldest version this router may still route a batch with (in flight included)."""
        in_flight = [version for version, count in self._in_flight.items() if count > 0]
        return min([self.view.active.version, *in_flight])

    async def mapping(self, version: int) -> HashMapping:
        mapping = self._cache.get(version)
        if mapping is None:
            mapping = await self.mappings.load(version, self.settings.initial_matchers)
            await self.matcher_client.reach(mapping.matchers)
            self._cache[version] = mapping
        return mapping

    async def refresh(self) -> None:
        """Read the active version and the window from Redis and switch to them."""
        latest, active, (low, high) = await self.mappings.state()
        planning = tuple([await self.mapping(low)] + ([await self.mapping(high)] * (high != low)))
        view = MappingView(await self.mapping(active), (low, high), planning)
        switching = active != self.view.active.version
        if switching and self.follower.ready.is_set():
            # A migration moved subscriptions before it activated this version: the matchers
            # whose H(i) now holds their words, and their anchors' new owners, must be known here
            # before a batch is tagged with it (routing skips a matcher not known to hold a word).
            await self.follower.catch_up()
        self.view = view
        self.latest = latest
        if switching:
            self._on_switch(view.active)
        MAPPING_VERSION.set(active)

    async def watch(self) -> None:
        """Follow announcements (and check every few seconds, in case one was missed)."""
        poll = self.settings.mapping_poll_s
        while True:
            try:
                pubsub = await self.mappings.announcements()
                await pubsub.subscribe(self.mappings.channel)
                try:
                    while True:
                        await self.step()
                        await pubsub.get_message(ignore_subscribe_messages=True, timeout=poll)
                finally:
                    await pubsub.aclose()
            except (StoreUnavailable, RedisError) as exc:  # pub/sub errors come untranslated
                log.warning("mapping watch interrupted (%s); retrying", exc)
            # The loop must outlive surprises: without it the router never changes mappings again.
            except Exception:
                log.exception("following the mapping versions failed; retrying")
            await asyncio.sleep(poll)

    async def step(self) -> None:
        """One look at the versions: move to a newer one, retire an older one, or follow the
        number of matchers wanted once they are settled."""
        try:
            await self.refresh()
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
            # Settled, though a retirement may have stopped midway (the window is narrowed
            # first): finish it. Placements left for older versions route nothing, so the
            # cluster may follow the number of matchers wanted meanwhile.
            if await self._retirement_left(active):
                await self._locked(self._retire, active)
            await self.scale.step(self.view.active.matchers, self._locked)

    async def _retirement_left(self, active: int) -> bool:
        """A retirement of the active version or an older one was begun and not finished."""
        retiring = await self.mappings.retiring()
        return retiring is not None and retiring <= active

    async def report(self) -> None:
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
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # Cancelled during the write: redis-py may turn that into a connection error,
                # caught above; the loop must still end.
                raise asyncio.CancelledError
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
        await self.refresh()

    async def _move_to(self, version: int, low: int, keep_alive: Any) -> None:
        target = await self.mapping(version)
        span = max(self.view.span, target.matchers)

        async def sync(event_id: str) -> None:
            await self.matcher_client.sync_all(event_id, target.matchers)
            # No batch tagged with the new version reaches a matcher it does not have, so whether
            # such a one applied its moves cannot change a match: one that is gone (a pod stopped
            # before its subscriptions moved) must not hold the cluster on the old version.
            await self.matcher_client.sync_those_answering(
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
            await self.matcher_client.sync_all(event_id, staying)

        await retire(self.store, self.mappings, active, span, sync, keep_alive)
        MIGRATIONS.labels("retire").inc()
