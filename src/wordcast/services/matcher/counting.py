"""A matcher's tallies of each subscription's matches, deliveries and failures, added to the
counters in Redis (:mod:`wordcast.storage.counters`) every ``FLUSH_S``.

Counted from the messages, which say how many matches each subscription has in them
(:attr:`~wordcast.storage.outbox.Message.counts`): no work per match. A match is counted as
matched once, by the message of its subscription's first way of delivery (its webhook, else its
match stream); as delivered by every message that delivered it (a subscription delivered both
ways is delivered twice), and as failed by a message given up on (a dead letter). A tally Redis
would not take is kept for the next flush, and bounded: past ``TALLIES_MAX`` subscriptions a
flush that fails drops what it held (logged), rather than grow without bound while Redis is away.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping

from wordcast.errors import StoreUnavailable
from wordcast.query.boolean import MAX_ALTERNATIVES, part_id
from wordcast.storage import Store
from wordcast.storage.counters import Tally
from wordcast.storage.outbox import Message
from wordcast.storage.records import STREAM_DELIVERY, Subscription

log = logging.getLogger(__name__)

FLUSH_S = 1.0
SLICES_PER_S = 10
TALLIES_MAX = 200_000


class Counting:
    def __init__(self, store: Store) -> None:
        self._store = store
        # By subscription and tenth of a second of when its events were recorded: a tally
        # spans no re-creation of its subscription by more than that (storage.counters).
        self._tallies: dict[tuple[str, int], Tally] = {}

    def _tally(self, sub_id: str, at: float) -> Tally:
        key = (sub_id, int(at * SLICES_PER_S))
        tally = self._tallies.get(key)
        if tally is None:
            tally = self._tallies[key] = Tally()
        tally.since = min(tally.since, at)
        return tally

    def matched(
        self, messages: Iterable[Message], subscriptions: Mapping[str, Subscription]
    ) -> None:
        """Count the matches of freshly recorded ``messages`` (``subscriptions``: the records
        this matcher holds, by stored id)."""
        now = time.time()
        for message in messages:
            to_stream = message.callback_url == STREAM_DELIVERY
            for sub_id, count in message.per_subscription():
                if to_stream and _has_webhook(sub_id, subscriptions):
                    continue  # counted by its webhook's message
                tally = self._tally(sub_id, message.created)
                tally.matched += count
                tally.last_match = now

    def delivered(self, message: Message) -> None:
        for sub_id, count in message.per_subscription():
            self._tally(sub_id, message.created).delivered += count

    def failed(self, message: Message) -> None:
        for sub_id, count in message.per_subscription():
            self._tally(sub_id, message.created).failed += count

    async def flush(self) -> None:
        """Add the tallies to the counters in Redis."""
        tallies, self._tallies = self._tallies, {}
        if not tallies:
            return
        try:
            await self._store.counters.add([(key[0], tally) for key, tally in tallies.items()])
        except StoreUnavailable as exc:
            if len(tallies) + len(self._tallies) > TALLIES_MAX:
                log.warning("dropped the counts of %d subscriptions: %s", len(tallies), exc)
                return
            for key, tally in tallies.items():  # kept for the next flush
                kept = self._tallies.setdefault(key, Tally())
                kept.add(tally)

    async def keep(self) -> None:
        """Flush every ``FLUSH_S`` until cancelled (and once more then)."""
        try:
            while True:
                await asyncio.sleep(FLUSH_S)
                await self.flush()
        finally:
            await self.flush()


def _has_webhook(sub_id: str, subscriptions: Mapping[str, Subscription]) -> bool:
    """Whether the subscription ``sub_id`` delivers to a webhook, known from any of its
    records held here (a boolean query's alternatives share its delivery)."""
    for part in range(MAX_ALTERNATIVES):
        sub = subscriptions.get(part_id(sub_id, part))
        if sub is not None:
            return bool(sub.webhook_url)
    return False
