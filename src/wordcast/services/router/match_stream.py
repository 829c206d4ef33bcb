"""A tenant's matches as Server-Sent Events (``GET /matches/stream``), resumable by position.

Each event is one message of the tenant's match stream (:mod:`wordcast.storage.match_streams`):
``event: matches``, ``id:`` its position, ``data:`` the JSON body a webhook would have received.
A consumer resumes after the last id it saw (``Last-Event-ID``, which browsers send by
themselves on reconnecting); ``0`` starts from the oldest match still kept, and no id from now. A
position older than what is kept is refused with 410 before the stream starts, and a consumer
that falls that far behind while connected gets ``event: gone`` (the same explanation) and the
end of the stream: it never silently skips a match.

What a stream costs a router is bounded, whatever its consumer does:

- **No Redis connection while it waits.** One task per router (:meth:`MatchStreamServer.follow`)
  reads the newest position of every followed tenant's stream every ``stream_poll_s``, one small
  pipelined read for all of them, and wakes the streams whose tenant's stream moved; a stream
  then reads what is new without blocking, on a few connections of their own (a quarter of
  ``WORDCAST_REDIS_MAX_CONNECTIONS``, at most 8). A thousand idle streams hold no connection,
  so they cannot starve the router's other requests of them.
- **Bounded memory per connection.** Matches are read from Redis only after the previous read
  was written, a read holds about ``READ_BYTES`` (or one message, when messages are larger), and
  it is written in pieces of ``PIECE_BYTES``: uvicorn holds one piece while the socket is full.
  A consumer that has not taken a piece within ``stream_drain_timeout_s`` is dropped (its
  connection reset, its buffer freed) and resumes with ``Last-Event-ID`` when it reads again.
- **Admission is counted before the first await.** A router serves at most ``streams_max``
  streams and a tenant ``streams_per_tenant`` on it (429 past them), however many arrive at once.
- **A revoked key ends its streams**: each stream checks its key again when the router learns
  of a revocation (every ``key_revocation_poll_s``), and ends with ``event: revoked``.

An idle stream sends a comment every ``stream_heartbeat_s``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import orjson
from prometheus_client import Counter as Counted
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from wordcast.errors import Gone, InvalidInput, RateLimited, StoreUnavailable, Unauthenticated
from wordcast.services.common import ABORT_CONNECTION
from wordcast.services.router.settings import RouterSettings
from wordcast.services.router.tenants import KEY_CACHE_SECONDS, Tenants
from wordcast.storage.dead_letters import is_stream_id
from wordcast.storage.match_streams import MatchStreams
from wordcast.storage.records import event_order
from wordcast.storage.redis import body_readers

log = logging.getLogger(__name__)

READ_BYTES = 256 * 1024  # what one read from Redis holds, about (or one message, if larger)
READ_MOST = 500  # messages a read takes at most
PIECE_BYTES = 64 * 1024  # what is handed to the connection at once
RETRY_MS = 1_000  # how soon a browser's EventSource reconnects after the stream ends
RECHECK_S = 5.0  # a stream reads even without news this often: news may have been missed

SLOW_CONSUMERS = Counted(
    "wordcast_router_stream_slow_consumers",
    "Match streams dropped because their consumer did not read within the drain deadline",
)
REVOKED_STREAMS = Counted(
    "wordcast_router_stream_revoked", "Match streams ended because their API key was revoked"
)


class StreamSlot:
    """One admitted stream's place among a router's streams, given back once."""

    def __init__(self, server: MatchStreamServer, tenant: str) -> None:
        self._server = server
        self.tenant = tenant
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._server._leave(self.tenant)


class MatchStreamServer:
    def __init__(self, settings: RouterSettings, streams: MatchStreams, tenants: Tenants) -> None:
        self._settings = settings
        self._streams = streams
        self._tenants = tenants
        self._open: Counter[str] = Counter()
        self._heads: dict[str, str] = {}  # each followed tenant's newest position, as last read
        self._moved: dict[str, asyncio.Event] = {}  # set (and replaced) when a head moves
        self._reads = asyncio.Semaphore(body_readers(settings.redis_max_connections))

    @property
    def open(self) -> int:
        return sum(self._open.values())

    def _admit(self, tenant: str) -> StreamSlot:
        """A place for one more of ``tenant``'s streams, counted at once (no await between the
        check and the count, so simultaneous opens cannot all pass it)."""
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
        self._open[tenant] += 1
        return StreamSlot(self, tenant)

    def _leave(self, tenant: str) -> None:
        self._open[tenant] -= 1
        if self._open[tenant] <= 0:
            del self._open[tenant]

    async def serve(
        self, tenant: str, api_key: str | None, last_event_id: str | None
    ) -> StreamingResponse:
        """``tenant``'s stream from after ``last_event_id``, for as long as ``api_key`` is
        valid; refuses (before the response starts) what cannot be served."""
        slot = self._admit(tenant)
        try:
            after = await self._start(tenant, last_event_id)
        except BaseException:
            slot.release()
            raise

        async def still_valid() -> bool:
            try:
                return await self._tenants.authenticate(api_key) == tenant
            except Unauthenticated:
                return False
            except StoreUnavailable:
                return True  # cannot tell now; asked again at the next revocation

        events = self.events(tenant, after, still_valid)
        return EventStream(events, slot, self._settings.stream_drain_timeout_s)

    async def _start(self, tenant: str, last_event_id: str | None) -> str:
        """The position ``tenant``'s stream starts after; refuses what cannot be served."""
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

    async def follow(self) -> None:
        """Read the newest position of every followed tenant's stream every ``stream_poll_s``
        and wake the streams of those that moved (run in the background for the router's life)."""
        poll_s = self._settings.stream_poll_s
        while True:
            await asyncio.sleep(poll_s)
            for gone in self._heads.keys() - self._open.keys():
                del self._heads[gone]
            if not self._open:
                continue
            try:
                heads = await self._streams.heads(list(self._open))
            except StoreUnavailable as exc:
                log.warning("could not read the match streams' positions: %s", exc)
                await asyncio.sleep(1.0)
                continue
            # The loop must outlive surprises: without it streams hear of matches only at rechecks.
            except Exception:
                log.exception("reading the match streams' positions failed")
                await asyncio.sleep(1.0)
                continue
            for tenant, head in heads.items():
                if self._heads.get(tenant) != head:
                    self._heads[tenant] = head
                    moved = self._moved.pop(tenant, None)
                    if moved is not None:
                        moved.set()

    def _behind(self, tenant: str, after: str) -> bool:
        head = self._heads.get(tenant)
        return head is None or event_order(head) > event_order(after)

    async def events(
        self, tenant: str, after: str, still_valid: Callable[[], Awaitable[bool]]
    ) -> AsyncGenerator[bytes | memoryview, None]:
        """The stream's bytes from after ``after`` until the consumer leaves, falls behind what
        is kept (``gone``), Redis fails (``unavailable``) or its key is revoked (``revoked``)."""
        # The position it starts after, at once: a consumer that loses the connection before
        # any match resumes from there, rather than from a later "now".
        yield f"id: {after}\nretry: {RETRY_MS}\n\n".encode()
        settings, tenants = self._settings, self._tenants
        count = 1  # until the size of this stream's messages is known
        quiet_since = read_at = checked_at = time.monotonic()
        generation = tenants.generation
        must_read = True
        while True:
            now = time.monotonic()
            if tenants.generation != generation or now - checked_at >= KEY_CACHE_SECONDS:
                generation, checked_at = tenants.generation, now
                if not await still_valid():
                    REVOKED_STREAMS.inc()
                    yield _notice("revoked", "the API key of this stream was revoked")
                    return
            # Taken before reading: a move announced during the read ends the wait below at once.
            moved = self._moved.setdefault(tenant, asyncio.Event())
            if must_read or self._behind(tenant, after) or now - read_at >= RECHECK_S:
                must_read = False
                read_at = now
                try:
                    async with self._reads:
                        entries = await self._streams.read(tenant, after, count)
                except (Gone, StoreUnavailable) as exc:
                    yield _notice("gone" if isinstance(exc, Gone) else "unavailable", str(exc))
                    return
                if entries:
                    must_read = len(entries) >= count  # more may wait behind them
                    size = sum(len(body) for _, body in entries)
                    count = max(1, min(READ_MOST, READ_BYTES * len(entries) // max(1, size)))
                    after = entries[-1][0]
                    # Written before the next read: the socket's pace is the read's.
                    async for piece in _pieces(entries):
                        yield piece
                    del entries
                    quiet_since = time.monotonic()
                    continue
            heartbeat_in = settings.stream_heartbeat_s - (time.monotonic() - quiet_since)
            wait_s = max(0.0, min(heartbeat_in, RECHECK_S, settings.key_revocation_poll_s))
            try:
                async with asyncio.timeout(wait_s):
                    await moved.wait()
            except TimeoutError:
                pass
            if time.monotonic() - quiet_since >= settings.stream_heartbeat_s:
                yield b": heartbeat\n\n"
                quiet_since = time.monotonic()


class EventStream(StreamingResponse):
    """A match stream's response: each piece handed to the connection must be taken within
    ``drain_s`` (uvicorn waits while the socket's buffer is full), else the connection is reset
    and the stream ends; its slot is given back however the response ends."""

    def __init__(
        self, events: AsyncGenerator[bytes | memoryview, None], slot: StreamSlot, drain_s: float
    ) -> None:
        super().__init__(
            events,
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )
        self._events = events
        self._slot = slot
        self._drain_s = drain_s
        self._abort: Callable[[], None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._abort = scope.get(ABORT_CONNECTION)
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._slot.release()
            await self._events.aclose()

    async def stream_response(self, send: Send) -> None:
        start: dict[str, Any] = {
            "type": "http.response.start",
            "status": self.status_code,
            "headers": self.raw_headers,
        }
        await send(start)
        async for piece in self._events:
            try:
                async with asyncio.timeout(self._drain_s):
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
            except TimeoutError:
                SLOW_CONSUMERS.inc()
                log.info(
                    "dropped a match stream of tenant %r: its consumer took nothing for %g s "
                    "(WORDCAST_ROUTER_STREAM_DRAIN_TIMEOUT_S)",
                    self._slot.tenant,
                    self._drain_s,
                )
                if self._abort is not None:
                    self._abort()  # what the socket still holds is dropped with it
                    await asyncio.sleep(0)  # uvicorn hears of it before the app returns
                return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _pieces(entries: list[tuple[str, bytes]]) -> AsyncGenerator[bytes | memoryview, None]:
    """The events of (id, body) ``entries``, in pieces of at most ``PIECE_BYTES``: small events
    gathered into one piece, a large body handed over in slices of itself (no copy)."""
    written = bytearray()
    for entry_id, body in entries:
        written += f"id: {entry_id}\nevent: matches\ndata: ".encode()
        if len(written) + len(body) <= PIECE_BYTES:
            written += body
        else:
            yield bytes(written)
            written.clear()
            view = memoryview(body)
            for start in range(0, len(body), PIECE_BYTES):
                yield view[start : start + PIECE_BYTES]
        written += b"\n\n"
        if len(written) >= PIECE_BYTES:
            yield bytes(written)
            written.clear()
    if written:
        yield bytes(written)


def _notice(name: str, detail: str) -> bytes:
    """The last event of a stream: why it ends (a message's JSON has no line breaks)."""
    return f"event: {name}\ndata: {orjson.dumps({'detail': detail}).decode()}\n\n".encode()
