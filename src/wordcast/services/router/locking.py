"""Waiting for a lock in Redis (:mod:`wordcast.storage.locks`) and giving it back.

A request that needs a lock another request holds waits for it, polling, and is refused with a
Conflict (409) naming what it waited for once ``LOCK_WAIT_S`` pass: nothing of it was done. A
lock lapses ``LOCK_TTL_MS`` after it was taken, so a router killed while holding one cannot hold
it for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from wordcast.errors import Conflict, StoreUnavailable

log = logging.getLogger(__name__)

LOCK_WAIT_S = 30.0
LOCK_POLL_S = 0.02
LOCK_TTL_MS = 60_000


@contextlib.asynccontextmanager
async def locked(
    take: Callable[[str, int], Awaitable[bool]],
    give_back: Callable[[str], Awaitable[None]],
    busy: str,
) -> AsyncIterator[None]:
    """Hold a lock for the block: ``take(token, ttl_ms)`` until it answers True, ``give_back
    (token)`` after; Conflict ``busy`` (what held it) after ``LOCK_WAIT_S`` of waiting."""
    token = secrets.token_hex(16)
    waited = time.monotonic() + LOCK_WAIT_S
    while not await take(token, LOCK_TTL_MS):
        if time.monotonic() >= waited:
            raise Conflict(
                f"{busy} for over {LOCK_WAIT_S:g} s; nothing was done: send this request again"
            )
        await asyncio.sleep(LOCK_POLL_S)
    try:
        yield
    finally:
        try:
            await give_back(token)
        except StoreUnavailable as exc:  # it lapses by itself
            log.warning("could not give a lock back: %s", exc)
