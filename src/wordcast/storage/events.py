"""The subscription event streams (one per shard), and the follower that keeps an in-memory replica
in step with them."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from wordcast.backoff import Backoff
from wordcast.errors import StoreUnavailable
from wordcast.storage import scripts
from wordcast.storage.records import BatchRows, SubscriptionEvent, event_order, events_from_entry
from wordcast.storage.redis import queue_script, translated
from wordcast.storage.shards import Shards

log = logging.getLogger(__name__)

POLL_MS = 50  # with several shards, how often a follower with nothing to do reads them again
PROGRESS_EVERY_S = 2.0  # how often a reading follower records its progress (and trims)

Entry = tuple[str, dict[str, str]]  # an event stream's entry: its id and its fields


class EventLog:
    """Every shard's event stream (:mod:`wordcast.storage.shards`). A position is one event id
    per shard, space-separated: one id on one Redis."""

    def __init__(self, client: Any, shards: Shards) -> None:
        self.client = client
        self.shards = shards
        self._trim = client.register_script(scripts.TRIM_EVENTS)

    async def record_progress(self, reader: str, position: str, forget_after_s: float) -> int:
        """Note that ``reader`` has read every shard's stream up to ``position``, and trim each
        to what every reader heard from within ``forget_after_s`` has read; entries trimmed."""
        shards = await self.shards.keys()
        pipe = self.client.pipeline(transaction=False)
        for keys, at in zip(shards, ids_of(position, len(shards)), strict=True):
            await queue_script(
                pipe,
                self._trim,
                [keys.events, keys.event_readers],
                scripts.TRIM_EVENTS.args(
                    reader=reader, read_up_to=at, forget_after_s=forget_after_s
                ),
            )
        with translated("recording progress through the event stream"):
            return sum(int(trimmed) for trimmed in await pipe.execute())

    async def streams(self) -> list[str]:
        return [keys.events for keys in await self.shards.keys()]

    async def last_event_id(self) -> str:
        """The position of the last event of every shard."""
        streams = await self.streams()
        pipe = self.client.pipeline(transaction=False)
        for stream in streams:
            pipe.xrevrange(stream, count=1)
        with translated("reading the event stream"):
            replies = await pipe.execute()
        return " ".join(str(last[0][0]) if last else "0-0" for last in replies)

    async def first_event_ids(self) -> list[str | None]:
        """Each shard's first event still in its stream (None: the stream is empty)."""
        streams = await self.streams()
        pipe = self.client.pipeline(transaction=False)
        for stream in streams:
            pipe.xrange(stream, count=1)
        with translated("reading the event stream"):
            replies = await pipe.execute()
        return [str(first[0][0]) if first else None for first in replies]

    async def kept_after(self, position: str) -> bool:
        """Whether every event after ``position`` is still in the streams: none was trimmed
        away before it was read (a position from an older stream, reset since, is not)."""
        streams = await self.streams()
        pipe = self.client.pipeline(transaction=False)
        for stream in streams:
            pipe.xinfo_stream(stream)
        with translated("reading the event stream"):
            infos = await pipe.execute(raise_on_error=False)
        for at, info in zip(ids_of(position, len(streams)), infos, strict=True):
            if isinstance(info, Exception):  # "no such key": a stream never written
                if event_order(at) != (0, 0):
                    return False
                continue
            last = event_order(str(info["last-generated-id"]))
            first = info.get("first-entry")
            if event_order(at) > last:
                return False  # ahead of the stream: it was deleted and begun again
            if event_order(at) < last and (
                not first or event_order(str(first[0])) > event_order(at)
            ):
                return False  # the entries after it may have been trimmed
        return True

    async def events_after(
        self, position: str, count: int = 1_000, block_ms: int | None = None
    ) -> list[list[SubscriptionEvent]]:
        """For each shard, its events in up to ``count`` entries after ``position``'s id for it
        (:meth:`entries_after`)."""
        return [
            [event for entry in entries for event in events_from_entry(*entry, shard)]
            for shard, entries in enumerate(await self.entries_after(position, count, block_ms))
        ]

    async def entries_after(
        self, position: str, count: int = 1_000, block_ms: int | None = None
    ) -> list[list[Entry]]:
        """For each shard, up to ``count`` of its entries after ``position``'s id for it, as
        read (:func:`~.records.events_from_entry` reads their events).

        ``block_ms`` waits that long for one when there is none: on one stream with a blocking
        read; with several, which a cluster cannot read in one command, by reading them all
        again every ``POLL_MS`` until one has an event or the time is up."""
        streams = await self.streams()
        after = ids_of(position, len(streams))
        with translated("reading the event stream"):
            if block_ms is not None and len(streams) == 1:
                reply = await self.client.xread({streams[0]: after[0]}, count=count, block=block_ms)
                return [reply[0][1] if reply else []]
            waited = 0
            while True:
                pipe = self.client.pipeline(transaction=False)
                for stream, event_id in zip(streams, after, strict=True):
                    pipe.xrange(stream, min=f"({event_id}", count=count)
                entries: list[list[Entry]] = await pipe.execute()
                if block_ms is None or waited >= block_ms or any(entries):
                    return entries
                await asyncio.sleep(POLL_MS / 1000)
                waited += POLL_MS


def ids_of(position: str, shards: int) -> list[str]:
    """A position's id for each of ``shards`` shards ("0-0", before any event, where it has none)."""
    ids = position.split()
    return ids + ["0-0"] * (shards - len(ids))


def reached(position: str, until: str) -> bool:
    """Whether ``position`` is at or past ``until`` in every shard."""
    shards = max(len(position.split()), len(until.split()))
    return all(
        event_order(at) >= event_order(wanted)
        for at, wanted in zip(ids_of(position, shards), ids_of(until, shards), strict=True)
    )


class EventFollower:
    """Keeps an in-memory replica (a router's s(W), a matcher's index) in step with Redis.

    ``start`` records the stream position, loads a snapshot (which may name an earlier position
    it reflects instead), then replays what came after; ``run``
    then tails the stream. Applying an event must be idempotent per subscription (last event wins),
    which makes replaying events the snapshot already reflects harmless. ``catch_up`` lets a request
    handler apply everything up to a given position before it answers (read-your-writes). With
    several shards each is followed in its own order; ``position`` has an id for each.
    """

    def __init__(
        self,
        events: EventLog,
        load_snapshot: Callable[[], Awaitable[str | None]],
        apply: Callable[[Iterable[SubscriptionEvent]], None],
        block_ms: int = 1_000,
        reader: str = "",
        forget_after_s: float = 600.0,
        kept_from: Callable[[], str] | None = None,
        rows: BatchRows | None = None,
    ) -> None:
        self._events = events
        self._rows = rows  # of a batch, those it applies (:data:`~.records.BatchRows`)
        self._load_snapshot = load_snapshot
        self._apply = apply
        self._block_ms = block_ms
        # Named, it records its progress, and the stream is trimmed to what every reader has read.
        # What it records is its position, or ``kept_from()``: an earlier one it may restart
        # from (a matcher's checkpoint), whose events must stay.
        self.reader = reader
        self.forget_after_s = forget_after_s
        self._kept_from = kept_from
        self._reported = ("", -math.inf)  # the position last recorded, and when
        self.position = "0-0"
        self.ready = asyncio.Event()
        self._reading = asyncio.Lock()

    async def start(self) -> None:
        position = await self._events.last_event_id()
        # A snapshot from elsewhere (a matcher's checkpoint) says which position it reflects.
        self.position = await self._load_snapshot() or position
        await self.catch_up()
        self.ready.set()

    def _take(self, entries: list[list[Entry]]) -> None:
        """Apply the entries past the position (only those are read: concurrent readers often
        fetch the same tail) and move past them."""
        ids = ids_of(self.position, len(entries))
        fresh = []
        for shard, shard_entries in enumerate(entries):
            at = event_order(ids[shard])
            new = [entry for entry in shard_entries if event_order(entry[0]) > at]
            for entry_id, fields in new:
                fresh += events_from_entry(entry_id, fields, shard, self._rows)
            if new:
                ids[shard] = new[-1][0]
        if fresh:
            self._apply(fresh)
        self.position = " ".join(ids)

    async def catch_up(self, until: str | None = None) -> None:
        """Apply every event after the current position (at least up to ``until``)."""
        if until is not None and reached(self.position, until):
            return
        # Concurrent callers share one reader: whoever waited usually finds its event applied
        # already, instead of every request rereading the same tail of the stream.
        async with self._reading:
            while until is None or not reached(self.position, until):
                entries = await self._events.entries_after(self.position)
                self._take(entries)
                if all(len(shard) < 1_000 for shard in entries):
                    return

    async def _gap(self) -> bool:
        """True when events after our position were trimmed away before we read them."""
        firsts = await self._events.first_event_ids()
        return any(
            first is not None and event_order(first) > event_order(at) > (0, 0)
            for first, at in zip(firsts, ids_of(self.position, len(firsts)), strict=True)
        )

    async def _record_progress(self) -> None:
        """Record the position needed now and then: every PROGRESS_EVERY_S while it moves, and
        often enough while it does not that the stream keeps what this reader still needs."""
        if not self.reader:
            return
        needed = (self._kept_from() if self._kept_from else "") or self.position
        reported, at = self._reported
        since = time.monotonic() - at
        if since < PROGRESS_EVERY_S or (needed == reported and since < self.forget_after_s / 4):
            return
        self._reported = (needed, time.monotonic())
        await self._events.record_progress(self.reader, needed, self.forget_after_s)

    async def run(self) -> None:
        backoff = Backoff()
        while True:
            try:
                if not self.ready.is_set():
                    await self.start()
                entries = await self._events.entries_after(self.position, block_ms=self._block_ms)
                if any(entries) and await self._gap():
                    log.warning("subscription events were trimmed before we read them; resyncing")
                    self.ready.clear()
                    continue
                self._take(entries)
                await self._record_progress()
                backoff.succeeded()
            except StoreUnavailable as exc:
                log.warning("event stream unavailable, retrying in %.1fs: %s", backoff.delay_s, exc)
                await backoff.wait()
