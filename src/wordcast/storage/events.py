"""The subscription event stream, and the follower that keeps an in-memory replica in step with it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from wordcast.errors import StoreUnavailable
from wordcast.storage.keys import Keys
from wordcast.storage.records import SubscriptionEvent, event_from_fields, event_order
from wordcast.storage.redis import translated

log = logging.getLogger(__name__)


class EventLog:
    def __init__(self, client: Any, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    async def last_event_id(self) -> str:
        with translated("reading the event stream"):
            last = await self.client.xrevrange(self.keys.events, count=1)
        return str(last[0][0]) if last else "0-0"

    async def first_event_id(self) -> str | None:
        with translated("reading the event stream"):
            first = await self.client.xrange(self.keys.events, count=1)
        return str(first[0][0]) if first else None

    async def events_after(
        self, event_id: str, count: int = 1_000, block_ms: int | None = None
    ) -> list[SubscriptionEvent]:
        with translated("reading the event stream"):
            if block_ms is None:
                entries = await self.client.xrange(
                    self.keys.events, min=f"({event_id}", count=count
                )
            else:
                reply = await self.client.xread(
                    {self.keys.events: event_id}, count=count, block=block_ms
                )
                entries = reply[0][1] if reply else []
        return [event_from_fields(entry_id, fields) for entry_id, fields in entries]


class EventFollower:
    """Keeps an in-memory replica (a router's s(W), a matcher's index) in step with Redis.

    ``start`` records the stream position, loads a snapshot, then replays what came after; ``run``
    then tails the stream. Applying an event must be idempotent per subscription (last event wins),
    which makes replaying events the snapshot already reflects harmless. ``catch_up`` lets a request
    handler apply everything up to a given event before it answers (read-your-writes).
    """

    def __init__(
        self,
        events: EventLog,
        load_snapshot: Callable[[], Awaitable[None]],
        apply: Callable[[Iterable[SubscriptionEvent]], None],
        block_ms: int = 1_000,
    ) -> None:
        self._events = events
        self._load_snapshot = load_snapshot
        self._apply = apply
        self._block_ms = block_ms
        self.position = "0-0"
        self.ready = asyncio.Event()
        self._reading = asyncio.Lock()

    async def start(self) -> None:
        position = await self._events.last_event_id()
        await self._load_snapshot()
        self.position = position
        await self.catch_up()
        self.ready.set()

    def _take(self, events: list[SubscriptionEvent]) -> None:
        fresh = [e for e in events if event_order(e.id) > event_order(self.position)]
        if fresh:
            self._apply(fresh)
            self.position = fresh[-1].id

    async def catch_up(self, until: str | None = None) -> None:
        """Apply every event after the current position (at least up to ``until``)."""
        if until is not None and event_order(until) <= event_order(self.position):
            return
        # Concurrent callers share one reader: whoever waited usually finds its event applied
        # already, instead of every request rereading the same tail of the stream.
        async with self._reading:
            while until is None or event_order(until) > event_order(self.position):
                events = await self._events.events_after(self.position)
                self._take(events)
                if len(events) < 1_000:
                    return

    async def _gap(self) -> bool:
        """True when events after our position were trimmed away before we read them."""
        first = await self._events.first_event_id()
        return first is not None and event_order(first) > event_order(self.position) > (0, 0)

    async def run(self) -> None:
        delay = 0.1
        while True:
            try:
                if not self.ready.is_set():
                    await self.start()
                events = await self._events.events_after(self.position, block_ms=self._block_ms)
                if events and await self._gap():
                    log.warning("subscription events were trimmed before we read them; resyncing")
                    self.ready.clear()
                    continue
                self._take(events)
                delay = 0.1
            except StoreUnavailable as exc:
                log.warning("event stream unavailable, retrying in %.1fs: %s", delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
