"""The one backoff every retrying loop waits with (pure logic, and one real wait)."""

from __future__ import annotations

import asyncio
import time

from wordcast.backoff import Backoff


def test_waits_double_to_their_bound_and_start_over_after_a_success() -> None:
    backoff = Backoff(first_s=0.1, most_s=1.0)
    assert [backoff.failed() for _ in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    backoff.succeeded()
    assert backoff.delay_s == 0.1
    backoff.failures = 10_000  # a loop failing for days: no overflow, still the bound
    assert backoff.delay_s == 1.0


def test_a_wait_asked_for_is_taken_and_still_counts_as_a_failure() -> None:
    backoff = Backoff(first_s=0.01, most_s=1.0)

    async def both() -> tuple[float, float]:
        return await backoff.wait(asked_s=0.0), await backoff.wait()

    started = time.monotonic()
    assert asyncio.run(both()) == (0.0, 0.02)
    assert time.monotonic() - started >= 0.02
    assert backoff.failures == 2
