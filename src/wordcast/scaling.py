"""Changing the number of matchers (``wordcast scale N``).

The number of matchers is a property of a mapping version (:mod:`wordcast.mapping_store`), so
scaling the cluster is moving it to a version made for the new number, with the same live
migration as any mapping change (:mod:`wordcast.migration`): nothing is lost or delivered twice
while routers switch. The steps:

1. ask for N matchers: ``{ns}:cluster:matchers``, which a local cluster's supervisor
   (:mod:`wordcast.cluster`) follows as a StatefulSet controller would; on Kubernetes,
   ``kubectl scale statefulset/matcher --replicas=N`` is this step (before scaling up only);
2. wait until matchers 0 … N-1 answer, each at the URL it registered, as ready;
3. write a mapping version for N (learned from the publication log, or stable hashing); the
   routers move every subscription to it, switch to it, then retire the old version;
4. wait until it is the only version in use and, when shrinking, until the matchers from N on
   hold nothing (the old placements are dropped after the switch). No router sends them anything
   then: a local cluster stops them; on Kubernetes, scale the StatefulSet down now.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import httpx

from .mapping_store import MappingStore
from .store import SubscriptionStore, translated

Progress = Callable[[str], None]
# What a wait checks: None once done, else (what it waits for, the error if time runs out).
Check = Callable[[], Awaitable[tuple[str, str] | None]]


async def _wait(check: Check, timeout_s: float, progress: Progress, pause_s: float = 0.3) -> None:
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


async def request(store: SubscriptionStore, matchers: int) -> None:
    """Step 1: record the number of matchers wanted (a local supervisor starts or stops them)."""
    await store.want_matchers(matchers)


async def logged_publications(store: SubscriptionStore) -> int:
    with translated("reading the publication log"):
        return int(await store.client.xlen(store.publications_key))


async def _ready_at(client: httpx.AsyncClient, url: str, ordinal: int) -> bool:
    try:
        response = await client.get(f"{url}/stats")
    except httpx.HTTPError:
        return False
    if response.status_code != 200:
        return False
    stats = response.json()
    return bool(stats.get("ready")) and stats.get("ordinal") == ordinal


async def wait_for_matchers(
    store: SubscriptionStore, matchers: int, timeout_s: float, progress: Progress
) -> None:
    """Step 2: every matcher below ``matchers`` is up, ready and registered (TimeoutError)."""
    async with httpx.AsyncClient(timeout=5) as client:

        async def first_not_ready() -> tuple[str, str] | None:
            for ordinal in range(matchers):
                url = await store.matcher_url(ordinal)
                if url is None or not await _ready_at(client, url, ordinal):
                    return (
                        f"waiting for matcher-{ordinal} to start and register…",
                        f"matcher-{ordinal} did not become ready within {timeout_s:g} s (on "
                        f"Kubernetes, first: kubectl scale statefulset/matcher --replicas={matchers})",
                    )
            return None

        await _wait(first_not_ready, timeout_s, progress, pause_s=0.5)


async def write_hash_version(mappings: MappingStore, matchers: int) -> int:
    """Step 3 without learning: stable hashing over ``matchers`` (every word falls back to it)."""
    return await mappings.write(matchers, {}, meta={"algorithm": "hash", "reason": "scale"})


async def wait_settled(
    mappings: MappingStore, version: int, timeout_s: float, progress: Progress
) -> None:
    """Step 4: ``version`` is active and the only one in use (TimeoutError)."""

    async def unsettled() -> tuple[str, str] | None:
        latest, active, window = await mappings.state()
        if latest > version:
            raise RuntimeError(
                f"mapping version {latest} was written meanwhile; the cluster moves to it instead"
            )
        if active == version and window == (version, version):
            return None
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

    await _wait(unsettled, timeout_s, progress)


async def wait_emptied(
    store: SubscriptionStore, first: int, end: int, timeout_s: float, progress: Progress
) -> None:
    """Step 4 when shrinking: matchers ``first`` … ``end`` - 1 hold no subscription (TimeoutError)."""

    async def still_held() -> tuple[str, str] | None:
        left = sum([await store.held_by(m) for m in range(first, end)])
        if not left:
            return None
        return (
            f"dropping the old placements on matchers {first} to {end - 1}…",
            f"matchers {first} to {end - 1} still hold {left} subscriptions after "
            f"{timeout_s:g} s; do not remove them yet",
        )

    await _wait(still_held, timeout_s, progress)
