"""Changing the number of matchers: ``kubectl scale``, ``wordcast scale N``, and what they set off.

The number of matchers is a property of a mapping version (:mod:`wordcast.storage.mappings`), so
scaling the cluster is moving it to a version made for the new number, with the same live
migration as any mapping change (:mod:`wordcast.ops.migration`): nothing is lost or delivered twice
while routers switch. What drives it is one number, the matchers wanted (``{ns}:cluster:matchers``):

1. something sets it: ``wordcast scale N``; or, on Kubernetes, routers that follow the matcher
   StatefulSet (``WORDCAST_ROUTER_FOLLOW_STATEFULSET``) copy its replicas into it, so that
   ``kubectl scale statefulset/matcher --replicas=N`` alone is enough;
2. matchers are started: a local cluster's supervisor (:mod:`wordcast.local.cluster`) follows the number
   as a StatefulSet controller would;
3. routers reconcile (:func:`version_for`): while the versions are settled and the active one
   routes to another number than is wanted, and, when growing, once every matcher below the new
   number answers as ready, the router holding the migration lock writes a version for it (stable
   hashing; on Kubernetes it then starts the learner's CronJob, whose run publishes a learned
   version for that number, else the nightly learner does) and the routers move every
   subscription to it, switch to it, then retire the old version. ``wordcast scale N --algorithm
   salb`` instead holds the migration lock (:func:`holding_migration_lock`) while it asks for N,
   learns a mapping for N and waits for the new matchers, then writes that version and lets go:
   the routers, kept from writing one of their own meanwhile, move to the learned one;
4. the matchers from N on are removable (:func:`removable`) once no version in use routes to them
   and they hold nothing: a local supervisor stops them then; on Kubernetes, where the StatefulSet
   stops the pod at once, its preStop hook (``wordcast drain``) holds the pod up until then.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx

from wordcast.storage import Store
from wordcast.storage.mappings import MappingStore

ProgressReport = Callable[[str], None]
# What a wait checks: None once done, else (what it waits for, the error if time runs out).
Check = Callable[[], Awaitable[tuple[str, str] | None]]


async def wait(
    check: Check, timeout_s: float, progress: ProgressReport, pause_s: float = 0.3
) -> None:
    """Call ``check`` until it says done, telling ``progress`` what it waits for whenever that
    changes (TimeoutError after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    said = ""
    while (waiting := await check()) is not None:
        step, failure = waiting
        if step != said:
            progress(step)
            said = step
        if time.monotonic() > deadline:
            raise TimeoutError(failure)
        await asyncio.sleep(pause_s)


@contextlib.asynccontextmanager
async def holding_migration_lock(
    mappings: MappingStore, owner: str, ttl_s: float, timeout_s: float, progress: ProgressReport
) -> AsyncIterator[None]:
    """Hold the routers' migration lock (renewed every third of ``ttl_s``): meanwhile no router
    writes a version or moves to one. Waits for a migration under way to finish first; if this
    process dies, the lock lapses after ``ttl_s``."""
    ttl_ms = int(ttl_s * 1000)

    async def taken() -> tuple[str, str] | None:
        if await mappings.acquire(owner, ttl_ms):
            return None
        return (
            "waiting for the mapping change under way to finish",
            "a mapping change held the lock",
        )

    await wait(taken, timeout_s, progress)

    async def keep() -> None:
        while True:
            await asyncio.sleep(ttl_s / 3)
            await mappings.renew(owner, ttl_ms)

    keeping = asyncio.create_task(keep())
    try:
        yield
    finally:
        keeping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeping
        await mappings.release(owner)


async def request(store: Store, matchers: int) -> None:
    """Step 1: record the number of matchers wanted (a local supervisor starts or stops them)."""
    await store.membership.want_matchers(matchers)


def version_for(wanted: int | None, routed: int, settled: bool, first_missing: int | None) -> bool:
    """Step 3's rule: whether to write a version for ``wanted`` matchers, given how many the
    active version routes to, whether the versions are settled (the latest is active and the only
    one in use: a migration in progress, or a version someone just wrote, goes first) and the
    first matcher below ``wanted`` that is not ready (None: all are)."""
    if wanted is None or wanted == routed or not settled:
        return False
    return wanted < routed or first_missing is None


async def first_not_ready(
    store: Store, client: httpx.AsyncClient, matchers: int, start: int = 0
) -> int | None:
    """The first matcher from ``start`` below ``matchers`` that is not up, ready and registered."""
    for ordinal in range(start, matchers):
        url = await store.membership.matcher_url(ordinal)
        if url is None or not await _ready_at(client, url, ordinal):
            return ordinal
    return None


async def removable(
    store: Store, mappings: MappingStore, first: int, end: int, initial: int | None
) -> bool:
    """Step 4: whether matchers ``first`` … ``end`` - 1 may be stopped: no version in use routes
    to them (every router uses the active version only, made for at most ``first`` matchers) and
    they hold no subscription. ``initial`` is version 0's number of matchers (None: unknown)."""
    _, active, window = await mappings.state()
    if window != (active, active):
        return False
    if active == 0 and initial is None:
        return False
    if await mappings.matchers_of(active, initial or 0) > first:
        return False
    return not any([await store.membership.held_by(k) for k in range(first, end)])


async def logged_publications(store: Store) -> int:
    return await store.publication_log.length()


async def _ready_at(client: httpx.AsyncClient, url: str, ordinal: int) -> bool:
    try:
        # Short: a router asks this in its mapping step, which must not hang on one matcher.
        response = await client.get(f"{url}/stats", timeout=5)
    except httpx.HTTPError:
        return False
    if response.status_code != 200:
        return False
    stats = response.json()
    return bool(stats.get("ready")) and stats.get("ordinal") == ordinal


async def wait_for_matchers(
    store: Store, matchers: int, timeout_s: float, progress: ProgressReport
) -> None:
    """Step 2: every matcher below ``matchers`` is up, ready and registered (TimeoutError)."""
    async with httpx.AsyncClient(timeout=5) as client:

        async def missing() -> tuple[str, str] | None:
            ordinal = await first_not_ready(store, client, matchers)
            if ordinal is None:
                return None
            return (
                f"waiting for matcher-{ordinal} to start and register…",
                f"matcher-{ordinal} did not become ready within {timeout_s:g} s (on "
                f"Kubernetes, first: kubectl scale statefulset/matcher --replicas={matchers})",
            )

        await wait(missing, timeout_s, progress, pause_s=0.5)


async def write_hash_version(mappings: MappingStore, matchers: int) -> int:
    """Step 3 without learning: stable hashing over ``matchers`` (every word falls back to it)."""
    return await mappings.write(matchers, {}, meta={"algorithm": "hash", "reason": "scale"})


async def wait_settled(
    mappings: MappingStore, version: int, timeout_s: float, progress: ProgressReport
) -> None:
    """Step 4: ``version`` is active, the only one in use, and no placement for an older one is
    left (TimeoutError)."""

    async def unsettled() -> tuple[str, str] | None:
        latest, active, window = await mappings.state()
        if latest > version:
            raise RuntimeError(
                f"mapping version {latest} was written meanwhile; the cluster moves to it instead"
            )
        retiring = await mappings.retiring()
        if active == version and window == (version, version):
            if retiring is None or retiring > version:
                return None
            step = "active; the placements older versions needed are being dropped"
        else:
            step = (
                "routers are moving the subscriptions to it"
                if active != version
                else "active; waiting for every router to stop using older versions"
            )
        problem = await mappings.problem()
        if problem and active != version:
            step = f"not yet: {problem} (the routers retry)"
        return (
            f"mapping v{version}: {step}…",
            f"mapping v{version} did not settle within {timeout_s:g} s (active v{active}, "
            f"versions in use {window[0]}..{window[1]}); the routers keep at it",
        )

    await wait(unsettled, timeout_s, progress)


async def wait_for_version(
    mappings: MappingStore, matchers: int, initial: int, timeout_s: float, progress: ProgressReport
) -> int:
    """Step 3 from outside: a version for ``matchers`` is the latest; returns its number."""
    found: list[int] = []

    async def unwritten() -> tuple[str, str] | None:
        latest = (await mappings.state())[0]
        if await mappings.matchers_of(latest, initial) == matchers:
            found.append(latest)
            return None
        return (
            f"waiting for a router to write a mapping version for {matchers} matchers…",
            f"no router wrote a mapping version for {matchers} matchers within {timeout_s:g} s "
            "(is a migration still running?)",
        )

    await wait(unwritten, timeout_s, progress)
    return found[0]


async def wait_removable(
    store: Store,
    mappings: MappingStore,
    first: int,
    end: int,
    timeout_s: float,
    progress: ProgressReport,
) -> None:
    """Step 4 when shrinking: matchers ``first`` … ``end`` - 1 may be stopped (TimeoutError)."""
    initial = await mappings.initial()
    one = end - first == 1
    which = f"matcher {first}" if one else f"matchers {first} to {end - 1}"

    async def still_used() -> tuple[str, str] | None:
        if await removable(store, mappings, first, end, initial):
            return None
        left = sum([await store.membership.held_by(m) for m in range(first, end)])
        return (
            f"dropping the old placements on {which}…",
            f"{which} {'is' if one else 'are'} still in use ({left} subscriptions held) after "
            f"{timeout_s:g} s; do not remove {'it' if one else 'them'} yet",
        )

    await wait(still_used, timeout_s, progress)
