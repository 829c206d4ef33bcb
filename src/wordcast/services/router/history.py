"""The last 15 minutes of the cluster's rates, for the console's charts: a ring buffer each
router keeps, sampled every ``history_every_s`` (no external service).

A sample is this router's publications accepted so far, the matchers' matches and deliveries so
far and their backlog (what their ``/stats`` say, asked afresh each round); the rates are the
differences between consecutive samples. A
matcher that restarted counts from zero again: a drop is shown as no traffic, not as a negative
rate. With several routers each shows its own publications (the matchers' figures are the
cluster's).
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

WINDOW_S = 15 * 60


@dataclass(frozen=True, slots=True)
class Sample:
    at: float  # Unix time
    publications: int  # this router's, so far
    matches: int  # every matcher's, so far
    delivered: int
    backlog: int  # deliveries pending in the outboxes now


class History:
    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self._samples: deque[Sample] = deque(maxlen=math.ceil(WINDOW_S / every_s) + 1)

    def add(self, sample: Sample) -> None:
        self._samples.append(sample)

    def shown(self) -> dict[str, Any]:
        """The rates between consecutive samples, oldest first, and when the last was taken."""
        samples = list(self._samples)
        points = [
            {
                "at": after.at,
                "publications_per_s": _rate(before, after, "publications"),
                "matches_per_s": _rate(before, after, "matches"),
                "deliveries_per_s": _rate(before, after, "delivered"),
                "backlog": after.backlog,
            }
            for before, after in itertools.pairwise(samples)
        ]
        return {
            "every_s": self.every_s,
            "window_s": WINDOW_S,
            "updated": samples[-1].at if samples else None,
            "points": points,
        }

    async def keep(
        self, published: Callable[[], int], matchers: Callable[[], Awaitable[list[dict[str, Any]]]]
    ) -> None:
        """Sample every ``every_s`` until cancelled; a round a matcher does not answer counts
        what the others say."""
        while True:
            stats = [s for s in await matchers() if s.get("reachable")]
            self.add(
                Sample(
                    time.time(),
                    published(),
                    sum(int(s.get("matches", 0)) for s in stats),
                    sum(int(s.get("delivered", 0)) + int(s.get("streamed", 0)) for s in stats),
                    sum(int(s.get("deliveries_pending") or 0) for s in stats),
                )
            )
            await asyncio.sleep(self.every_s)


def _rate(before: Sample, after: Sample, field: str) -> float:
    """Per second between two samples; a count that fell (a matcher restarted) is no traffic."""
    grown = max(0, getattr(after, field) - getattr(before, field))
    return round(grown / max(after.at - before.at, 1e-9), 3)
