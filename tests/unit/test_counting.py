"""A matcher's tallies (``services/matcher/counting.py``): one a subscription a flush, of the
incarnation its messages say, whichever matcher holds it. The counters script they go to is
tested on a real Redis (tests/e2e/test_counters.py); here, only what the tallies are."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from wordcast.services.matcher.counting import Counting
from wordcast.storage.counters import Tally
from wordcast.storage.outbox import Message
from wordcast.storage.records import Subscription

MADE = 1_700_000_000.25


class _Counters:
    """What a flush hands the counters (pure logic: the script is not what is tested here)."""

    def __init__(self) -> None:
        self.added: list[tuple[str, Tally]] = []

    async def add(self, tallies: Sequence[tuple[str, Tally]]) -> None:
        self.added.extend(tallies)


def _flushed(counting: Counting, counters: _Counters) -> list[tuple[str, Tally]]:
    asyncio.run(counting.flush())
    added, counters.added = counters.added, []
    return added


def _message(created: float, incarnations: tuple[float, ...] = ()) -> Message:
    return Message(
        ("s1", "s2"), "", "http://x/hook", "msg", b"{}", 3, created, 0, (2, 1), incarnations
    )


def test_deliveries_of_subscriptions_held_elsewhere_are_one_tally_each_of_their_incarnation() -> (
    None
):
    counters = _Counters()
    store: Any = SimpleNamespace(counters=counters)
    counting = Counting(store)  # holds nothing: every subscription is another matcher's
    for tenth in range(12):  # over more than a second of messages
        counting.delivered(_message(MADE + 100 + tenth / 10, (MADE, MADE + 1)))
    added = _flushed(counting, counters)
    assert [(sub_id, t.delivered, t.since, t.incarnation) for sub_id, t in added] == [
        ("s1", 24, MADE, True),
        ("s2", 12, MADE + 1, True),
    ]
    # An entry recorded before messages said their incarnations: by the tenth of a second.
    for tenth in range(12):
        counting.failed(_message(MADE + 100 + tenth / 10))
    added = _flushed(counting, counters)
    assert len(added) == 24
    assert not any(t.incarnation for _, t in added)
    assert sum(t.failed for _, t in added) == 36


def test_matches_count_the_incarnation_the_message_says_and_a_stream_only_for_stream_only() -> None:
    counters = _Counters()
    store: Any = SimpleNamespace(counters=counters)
    held = {
        "s1": Subscription("s1", "a", ("a",), "http://x/hook", 0, created=MADE),
        "s2": Subscription("s2", "a", ("a",), "stream:", 0, created=MADE + 1),
    }
    counting = Counting(store, lambda: held)
    counting.matched([_message(MADE + 5, (MADE, MADE + 1))])
    stream = Message(
        ("s1", "s2"), "", "stream:", "m2", b"{}", 2, MADE + 5, 0, (1, 1), (MADE, MADE + 1)
    )
    counting.matched([stream])  # s1's matches are counted by its webhook's message
    added = _flushed(counting, counters)
    assert [(sub_id, t.matched, t.since) for sub_id, t in added] == [
        ("s1", 2, MADE),
        ("s2", 2, MADE + 1),
    ]
