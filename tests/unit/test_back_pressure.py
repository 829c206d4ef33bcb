"""A matcher's back-pressure in bytes (issue 39): a batch whose messages would take Redis past
its room is refused however few messages it makes, what was recorded since the last measure
counts, and a backfill waiting for room resumes at the first measure that gives it (it used to
wait on a stale backlog for ever)."""

from __future__ import annotations

import asyncio

from wordcast.services.matcher.back_pressure import REDIS_BYTES_PER_MESSAGE_BYTE, BackPressure
from wordcast.storage.outbox import Backlog

MIB = 1 << 20


def test_a_batch_is_judged_by_its_bytes_and_what_was_recorded_since_the_last_measure() -> None:
    pressure = BackPressure()
    pressure.measured(Backlog(messages=10, redis_used=50 * MIB, redis_limit=100 * MIB))
    room = 50 * MIB // REDIS_BYTES_PER_MESSAGE_BYTE
    assert pressure.refusal(outbox_max=1_000) is None
    assert pressure.refusal(outbox_max=1_000, size=room - 1) is None
    refused = pressure.refusal(outbox_max=1_000, size=room + 1)
    assert refused is not None
    assert "would take" in refused
    # Half the room recorded since the measure: the other half is left.
    pressure.recorded(room // 2)
    assert pressure.refusal(outbox_max=1_000, size=room // 2 - 1) is None
    assert pressure.refusal(outbox_max=1_000, size=room // 2 + 1) is not None
    # A new measure counts what was recorded in Redis's own figure.
    pressure.measured(Backlog(messages=10, redis_used=50 * MIB, redis_limit=100 * MIB))
    assert pressure.refusal(outbox_max=1_000, size=room - 1) is None
    assert (
        pressure.refusal(outbox_max=10) == "the outbox is full: webhooks are slower than matching"
    )


def test_a_wait_for_room_ends_at_the_first_measure_that_gives_it() -> None:
    async def scenario() -> list[str]:
        pressure = BackPressure()
        full = Backlog(messages=0, redis_used=99 * MIB, redis_limit=100 * MIB)
        pressure.measured(full)
        steps: list[str] = []

        async def backfill() -> None:
            await pressure.room_for(outbox_max=1_000, size=MIB)
            steps.append("recorded")

        waiting = asyncio.create_task(backfill())
        await asyncio.sleep(0)  # the task runs until it waits for room
        pressure.measured(full)  # still full: it waits on
        await asyncio.sleep(0)
        steps.append("still full")
        pressure.measured(Backlog(messages=0, redis_used=10 * MIB, redis_limit=100 * MIB))
        await asyncio.wait_for(waiting, 1)
        return steps

    assert asyncio.run(scenario()) == ["still full", "recorded"]
