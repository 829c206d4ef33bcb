"""Messages backing off between delivery attempts: their entry ids and when each is due.

A failed attempt gives up its delivery slot; the message stays in its outbox (pending, so a crash
hands it on as any other) and only its entry id waits here, in a heap, soonest due first. The
pause is exponential backoff with full jitter, at least what the receiver's ``Retry-After``
asked for.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from wordcast.backoff import Backoff
from wordcast.storage.outbox import Outbox


@dataclass(order=True, slots=True)
class Waiting:
    """A message backing off until ``due`` (monotonic), after ``attempts`` attempts, to the
    ``endpoint`` (its tenant and URL)."""

    due: float
    order: int  # first come, first retried among equals
    outbox: Outbox = field(compare=False)
    entry_id: str = field(compare=False)
    attempts: int = field(compare=False)
    endpoint: tuple[str, str] = field(compare=False)


class Retries:
    def __init__(self, backoff_s: float, max_backoff_s: float) -> None:
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._heap: list[Waiting] = []
        self._order = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def clear(self) -> None:
        self._heap.clear()

    def wait(
        self,
        outbox: Outbox,
        entry_id: str,
        attempts: int,
        asked_s: float | None,
        endpoint: tuple[str, str],
    ) -> None:
        """Back a message off after its ``attempts``-th failed attempt."""
        backoff = Backoff(self._backoff_s, self._max_backoff_s)
        backoff.failures = attempts - 1
        pause = random.uniform(0, backoff.delay_s)  # full jitter
        if asked_s is not None:
            pause = max(pause, min(asked_s, self._max_backoff_s))
        due = time.monotonic() + pause
        waiting = Waiting(due, next(self._order), outbox, entry_id, attempts, endpoint)
        heapq.heappush(self._heap, waiting)

    def due(
        self, most: int, may_start: Callable[[str, str], bool], defer_s: float
    ) -> dict[Outbox, list[Waiting]]:
        """Up to ``most`` of the messages due now whose endpoint ``may_start`` an attempt,
        taken out, by outbox; those due whose endpoint may not are deferred by ``defer_s``
        (without a read of their message: a failing endpoint's backlog costs no round trips)."""
        found: dict[Outbox, list[Waiting]] = {}
        deferred: list[Waiting] = []
        now = time.monotonic()
        taken = 0
        while taken < most and self._heap and self._heap[0].due <= now:
            retry = heapq.heappop(self._heap)
            if may_start(*retry.endpoint):
                found.setdefault(retry.outbox, []).append(retry)
                taken += 1
            else:
                retry.due = now + defer_s
                deferred.append(retry)
        self.put_back(deferred)
        return found

    def put_back(self, retries: Iterable[Waiting]) -> None:
        for retry in retries:
            heapq.heappush(self._heap, retry)

    def until_due(self) -> float | None:
        """Seconds until the next is due (0 if one is), None if none waits."""
        return max(0.0, self._heap[0].due - time.monotonic()) if self._heap else None

    def block_ms(self) -> int | None:
        """How long a read may wait for new entries: a second, or until the next retry is due
        (``None``: not at all; Redis reads a block of 0 as for ever)."""
        until = self.until_due()
        if until is None:
            return 1_000
        return min(1_000, math.ceil(until * 1_000)) or None
