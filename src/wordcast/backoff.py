"""Waiting between tries: the one exponential backoff every retrying loop uses (a service's
loops through a Redis outage, the client's and the importer's refused batches, the local
supervisor's restarts).

Foundation: imports nothing of wordcast."""

from __future__ import annotations

import asyncio


class Backoff:
    """Waits that double after each failure, from ``first_s`` up to ``most_s``, and start over
    after a success."""

    def __init__(self, first_s: float = 0.1, most_s: float = 5.0) -> None:
        self.first_s = first_s
        self.most_s = most_s
        self.failures = 0

    @property
    def delay_s(self) -> float:
        """The wait before the next try, after the failures so far."""
        return min(self.first_s * 2 ** min(self.failures, 32), self.most_s)

    def failed(self) -> float:
        """Count a failure; the wait it calls for."""
        delay = self.delay_s
        self.failures += 1
        return delay

    def succeeded(self) -> None:
        self.failures = 0

    async def wait(self, asked_s: float | None = None) -> float:
        """Count a failure and wait before the next try: what the other side asked for (a
        ``Retry-After``) when it did, else the backoff's delay. Returns the wait."""
        delay = self.failed()
        if asked_s is not None:
            delay = asked_s
        await asyncio.sleep(delay)
        return delay
