"""A matcher's back-pressure: it refuses routed batches while webhooks and match streams lag.

The dispatcher measures the backlog (its outbox's messages, Redis's memory against the limit)
every ``BACKLOG_EVERY_SECONDS``; a batch's messages are weighed against the last measure and what
was recorded since, in bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from prometheus_client import Gauge

from wordcast.errors import StoreUnavailable
from wordcast.storage.outbox import Backlog, Outbox

OUTBOX_DEPTH = Gauge("wordcast_outbox_depth", "Messages recorded and not yet acknowledged")
REDIS_MEMORY = Gauge("wordcast_redis_memory_bytes", "Bytes Redis holds (INFO used_memory)")
REDIS_MEMORY_LIMIT = Gauge(
    "wordcast_redis_memory_limit_bytes", "Bytes Redis may hold before matchers refuse batches"
)
# A message's bytes cost Redis about twice: its outbox entry and, for a stream delivery, its copy
# in the tenant's match stream (with the stream's and the entry's own overhead).
REDIS_BYTES_PER_MESSAGE_BYTE = 2
BACKLOG_EVERY_SECONDS = 0.2  # how stale the backlog (the routers' back-pressure) may be


class BackPressure:
    """What a matcher weighs before it records messages: the backlog the dispatcher measures
    every ``BACKLOG_EVERY_SECONDS``, and what was recorded since."""

    def __init__(self) -> None:
        self.backlog = Backlog(messages=0, redis_used=0, redis_limit=0)
        self._recorded = 0  # bytes of messages recorded since the backlog was last measured
        self._measured = asyncio.Event()  # set at each measure

    def measured(self, backlog: Backlog) -> None:
        """A new measure, which counts what was recorded before it."""
        self.backlog = backlog
        self._recorded = 0
        self._measured.set()

    def refusal(self, outbox_max: int, size: int = 0) -> str | None:
        """Why messages of ``size`` bytes may not be recorded now (None: they may): the outbox
        is full, or Redis is, or would be once they are, counting what was recorded since the
        last measure. Judged in bytes, so that one batch of large matches cannot overshoot
        Redis's memory however few messages it makes."""
        backlog = self.backlog
        if backlog.messages >= outbox_max:
            return "the outbox is full: webhooks are slower than matching"
        if backlog.memory_full:
            return f"{backlog.memory_text()}: webhooks are slower than matching"
        needed = (self._recorded + size) * REDIS_BYTES_PER_MESSAGE_BYTE
        if backlog.redis_limit and backlog.redis_used + needed > backlog.redis_limit:
            return (
                f"{backlog.memory_text()}, and these matches would take "
                f"{size / 2**20:,.1f} MiB more: send fewer publications a request, or retry "
                "once the webhooks and streams have caught up"
            )
        return None

    def recorded(self, size: int) -> None:
        """``size`` bytes of messages were recorded: counted against Redis's room until the next
        measure sees them."""
        self._recorded += size

    async def measure_forever(
        self, outbox: Outbox, redis_memory_max: int, also: Callable[[], Awaitable[None]]
    ) -> None:
        """The routers' back-pressure, measured on its own clock (and ``also`` done each time):
        the delivery loop can wait on its slots for as long as a slow webhook takes, while
        matches keep coming in."""
        while True:
            try:
                self.measured(await outbox.backlog(redis_memory_max))
            except StoreUnavailable:
                pass  # the delivery loop says so; the routers' batches fail to be recorded anyway
            else:
                OUTBOX_DEPTH.set(self.backlog.messages)
                REDIS_MEMORY.set(self.backlog.redis_used)
                REDIS_MEMORY_LIMIT.set(self.backlog.redis_limit)
            await also()
            await asyncio.sleep(BACKLOG_EVERY_SECONDS)

    async def room_for(self, outbox_max: int, size: int) -> None:
        """Wait until :meth:`refusal` lets ``size`` bytes be recorded (judged at each measure)."""
        while self.refusal(outbox_max, size) is not None:
            self._measured.clear()
            await self._measured.wait()
