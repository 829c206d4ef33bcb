"""A matcher's tallies of each subscription's matches, deliveries and failures, added to the
counters in Redis (:mod:`wordcast.storage.counters`) every ``FLUSH_S``.

Counted from the messages, which say how many matches each subscription has in them
(:attr:`~wordcast.storage.outbox.Message.counts`): no work per match. A match is counted as
matched once, by the message of its subscription's first way of delivery (its webhook, else its
match stream); as delivered by every message that delivered it (a subscription delivered both
ways is delivered twice), and as failed by a message given up on (a dead letter). A tally Redis
would not take is kept for the next flush, and bounded: past ``TALLIES_MAX`` subscriptions a
flush that fails drops what it held (logged), rather than grow without bound while Redis is away.

A tally belongs to one incarnation of its subscription (:mod:`wordcast.storage.counters`): the
one the message says its matches were found in (:attr:`~wordcast.storage.outbox.Message.incarnations`,
its record's ``created``, which the writer knows), so that whichever dispatcher delivers a
message counts it without looking for the record (delivery is shared: half of a matcher's
deliveries are of subscriptions held on another), and a flush carries one tally a subscription.
A message that does not say (an entry recorded before messages said so) is tallied as before:
by the record held here, else by the tenth of a second it was recorded in, which bounds what a
re-creation within that tenth can cost the new incarnation's count. (Tallies sliced so were
once most of them, up to ten a subscription a flush, and each made Redis read the record:
BENCHMARKS.md, issue 52.)
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping

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


Records = Mapping[str, Subscription]  # the subscriptions a matcher holds, by stored id
NONE_HELD: Records = {}


class Counting:
    def __init__(self, store: Store, held: Callable[[], Records] = lambda: NONE_HELD) -> None:
        self._store = store
        self._held = held  # the matcher's records now (its index is replaced on a reload)
        # By subscription and incarnation (its record's ``created``), or, not held here, by
        # the tenth of a second its events were recorded in.
        self._tallies: dict[tuple[str, float | None, int], Tally] = {}
        self._not_held: set[str] = set()  # since the last flush

    def _tally(self, sub_id: str, created: float | None, at: float) -> Tally:
        key = (
            (sub_id, created, 0) if created is not None else (sub_id, None, int(at * SLICES_PER_S))
        )
        tally = self._tallies.get(key)
        if tally is None:
            tally = self._tallies[key] = Tally()
            if created is not None:
                tally.since = created  # counted for this incarnation, and no other
                tally.incarnation = True
        if created is None:
            tally.since = min(tally.since, at)
        return tally

    def matched(self, messages: Iterable[Message]) -> None:
        """Count the matches of freshly recorded ``messages`` (of subscriptions held here)."""
        now = time.time()
        held = self._held()
        tally_of = self._tally
        for message in messages:
            to_stream = message.callback_url == STREAM_DELIVERY
            created = message.created
            for sub_id, count, incarnation in message.per_subscription():
                if to_stream or incarnation is None:
                    record = held.get(sub_id) or _record(sub_id, held)
                    if to_stream and record is not None and record.webhook_url:
                        continue  # counted by its webhook's message
                    incarnation = incarnation or _incarnation(record)
                tally = tally_of(sub_id, incarnation, created)
                tally.matched += count
                tally.last_match = now

    def delivered(self, message: Message) -> None:
        for tally, count in self._tallies_of(message):
            tally.delivered += count

    def failed(self, message: Message) -> None:
        for tally, count in self._tallies_of(message):
            tally.failed += count

    def _tallies_of(self, message: Message) -> Iterable[tuple[Tally, int]]:
        """The tally of each subscription of a delivered (or failed) ``message``, with its
        matches there: of the incarnation the message says they matched in (an entry
        recorded before messages said so says none: then the record held here says)."""
        held, created, tally_of = self._held(), message.created, self._tally
        for sub_id, count, incarnation in message.per_subscription():
            if incarnation is None:
                incarnation = self._created(sub_id, created, held)
            yield tally_of(sub_id, incarnation, created), count

    def _created(self, sub_id: str, created: float, held: Records) -> float | None:
        """The incarnation a delivered message of ``sub_id`` recorded at ``created`` counts
        for, when a record ``held`` here says: the one made before the message (one made after
        it is a later incarnation, whose counters the message is not for: such a tally is
        dropped in Redis). A subscription found held nowhere here is not looked for again until
        the next flush (a look is one per alternative it might have)."""
        record = held.get(sub_id)  # its only or first alternative: most are found at once
        if record is None:
            if sub_id in self._not_held:
                return None
            record = _record(sub_id, held)
            if record is None:
                self._not_held.add(sub_id)
                return None
        if record.created > created:
            return None  # a later incarnation's record
        return _incarnation(record)

    async def flush(self) -> None:
        """Add the tallies to the counters in Redis."""
        tallies, self._tallies = self._tallies, {}
        self._not_held.clear()
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


def _incarnation(record: Subscription | None) -> float | None:
    """The incarnation a record held here says a tally belongs to: its ``created``, unless an
    event written before issue 52 left it unknown (0)."""
    return record.created if record is not None and record.created else None


def _record(sub_id: str, subscriptions: Records) -> Subscription | None:
    """Any of the subscription ``sub_id``'s records held here (a boolean query's alternatives
    share its delivery and its incarnation)."""
    for part in range(MAX_ALTERNATIVES):
        sub = subscriptions.get(part_id(sub_id, part))
        if sub is not None:
            return sub
    return None
