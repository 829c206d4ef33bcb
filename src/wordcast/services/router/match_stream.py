"""A tenant's matches as Server-Sent Events (``GET /matches/stream``), resumable by position.

Each event is one message of the tenant's match stream (:mod:`wordcast.storage.match_streams`):
``event: matches``, ``id:`` its position, ``data:`` the JSON body a webhook would have received.
A consumer resumes after the last id it saw (``Last-Event-ID``, which browsers send by
themselves on reconnecting); ``0`` starts from the oldest match still kept, and no id from now. A
position older than what is kept is refused with 410 before the stream starts, and a consumer
that falls that far behind while connected gets ``event: gone`` (the same explanation) and the
end of the stream: it never silently skips a match.

A slow consumer costs a router bounded memory: matches are read from Redis only after the
previous read has been written to the connection (uvicorn waits while its socket buffer is full),
and a read holds at most about ``READ_BYTES``. The consumer falls behind in Redis, not here,
until the retention passes it by. An idle stream sends a comment every ``stream_heartbeat_s``.
How many streams a router serves at once, and a tenant holds, is bounded by settings (429 past
them), since each holds a Redis connection while it waits.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator

import orjson

from wordcast.errors import Gone, InvalidInput, RateLimited, StoreUnavailable
from wordcast.services.router.settings import RouterSettings
from wordcast.storage.dead_letters import is_stream_id
from wordcast.storage.match_streams import MatchStreams
from wordcast.storage.records import event_order

READ_BYTES = 1 << 20  # what one read from Redis may hold, about (a message: up to a few MB)
READ_MOST = 500  # messages a read takes at most
WAIT_MS = 1_000  # a blocking read's longest wait (the Redis client's socket timeout is 5 s)
RETRY_MS = 1_000  # how soon a browser's EventSource reconnects after the stream ends


class MatchStreamServer:
    def __init__(self, settings: RouterSettings, streams: MatchStreams) -> None:
        self._settings = settings
        self._streams = streams
        self._open: Counter[str] = Counter()

    @property
    def open(self) -> int:
        return sum(self._open.values())

    async def start(self, tenant: str, last_event_id: str | None) -> str:
        """The position ``tenant``'s stream starts after; refuses what cannot be served."""
        if self.open >= self._settings.streams_max:
            raise RateLimited(
                f"this router serves {self._settings.streams_max} match streams already "
                "(WORDCAST_ROUTER_STREAMS_MAX); retry, or reach another router",
                retry_after_s=5,
            )
        if self._open[tenant] >= self._settings.streams_per_tenant:
            raise RateLimited(
                f"tenant {tenant!r} holds {self._settings.streams_per_tenant} match streams on "
                "this router already (WORDCAST_ROUTER_STREAMS_PER_TENANT)",
                retry_after_s=5,
            )
        newest = await self._streams.last_id(tenant)
        if last_event_id is None:
            return newest
        lost = await self._streams.lost(tenant)
        if last_event_id == "0":
            return lost.through if lost is not None else "0-0"
        if not is_stream_id(last_event_id):
            raise InvalidInput(
                f"Last-Event-ID {last_event_id!r} is not a match stream position (an event's "
                "id, such as 1764322345123-0; or 0 for the oldest kept)"
            )
        if event_order(last_event_id) > event_order(newest):
            raise Gone(
                f"Last-Event-ID {last_event_id} is past the newest match, {newest}: it is not "
                "from this cluster's stream, or Redis lost the matches since; reconnect without "
                "it to follow from now"
            )
        if lost is not None:
            lost.check(last_event_id)
        return last_event_id

    async def events(self, tenant: str, after: str) -> AsyncIterator[bytes]:
        """The stream's bytes from after ``after`` until the consumer leaves (or is gone)."""
        self._open[tenant] += 1
        try:
            # The position it starts after, at once: a consumer that loses the connection before
            # any match resumes from there, rather than from a later "now".
            yield f"id: {after}\nretry: {RETRY_MS}\n\n".encode()
            count = 1  # until the size of this stream's messages is known
            quiet_since = time.monotonic()
            while True:
                try:
                    entries = await self._streams.read(tenant, after, count)
                except (Gone, StoreUnavailable) as exc:
                    yield _ending(exc)
                    return
                if entries:
                    chunk = "".join(_event("matches", body, entry) for entry, body in entries)
                    after = entries[-1][0]
                    count = max(1, min(READ_MOST, READ_BYTES * len(entries) // len(chunk)))
                    yield chunk.encode()
                    quiet_since = time.monotonic()
                    continue
                try:
                    came = await self._streams.wait(tenant, after, WAIT_MS)
                except StoreUnavailable as exc:
                    yield _event(
                        "unavailable", orjson.dumps({"detail": str(exc)}).decode()
                    ).encode()
                    return
                if not came and time.monotonic() - quiet_since >= self._settings.stream_heartbeat_s:
                    yield b": heartbeat\n\n"
                    quiet_since = time.monotonic()
        finally:
            self._open[tenant] -= 1
            if not self._open[tenant]:
                del self._open[tenant]


def _ending(exc: Gone | StoreUnavailable) -> bytes:
    """The last event of a stream: 'gone' (fell behind what is kept) or 'unavailable'."""
    name = "gone" if isinstance(exc, Gone) else "unavailable"
    return _event(name, orjson.dumps({"detail": str(exc)}).decode()).encode()


def _event(name: str, data: str, entry_id: str | None = None) -> str:
    # A message's JSON has no line breaks (orjson writes none), so it is one data line.
    head = f"id: {entry_id}\n" if entry_id is not None else ""
    return f"{head}event: {name}\ndata: {data}\n\n"
