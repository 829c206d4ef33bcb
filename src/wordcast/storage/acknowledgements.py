"""Outbox entries acknowledged in groups (:class:`Acknowledgements`)."""

from __future__ import annotations

import asyncio

from wordcast.storage.outbox import Outbox


class Acknowledgements:
    """Acknowledges outbox entries in groups, as a database commits transactions in groups.

    Entries acknowledged while a round trip is under way go together in the next one, so a busy
    dispatcher pays one round trip per group instead of one per message, and an idle one still
    acknowledges at once. Each caller waits for its own entry's round trip and sees its error.
    """

    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox
        self._waiting: list[tuple[str, asyncio.Future[None]]] = []
        self._flushing: asyncio.Task[None] | None = None

    async def ack(self, entry_id: str) -> None:
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((entry_id, future))
        if self._flushing is None:
            self._flushing = asyncio.create_task(self._flush())
        await future

    async def _flush(self) -> None:
        try:
            while self._waiting:
                group, self._waiting = self._waiting, []
                try:
                    await self._outbox.ack([entry_id for entry_id, _ in group])
                except Exception as exc:  # every waiter decides what its own error means
                    for _, future in group:
                        if not future.done():
                            future.set_exception(exc)
                else:
                    for _, future in group:
                        if not future.done():
                            future.set_result(None)
        finally:
            self._flushing = None

    async def close(self) -> None:
        """Wait for the round trip under way; entries not acknowledged stay pending in Redis."""
        if self._flushing is not None:
            await asyncio.gather(self._flushing, return_exceptions=True)
