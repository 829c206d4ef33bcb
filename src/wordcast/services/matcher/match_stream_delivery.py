"""Delivers the outbox's messages for tenants' match streams (``GET /matches/stream``).

A subscription delivered to the stream has its matches recorded in the matcher's outbox like any
other (``STREAM_DELIVERY`` as the message's URL), so they are as durable before the router is
answered; the dispatcher then moves them into the tenant's match stream
(:mod:`wordcast.storage.match_streams`), a read's worth at once, one script per tenant, and
acknowledges them. Nothing here can fail but Redis: a failure leaves the entries pending, they are
read again, and the stream's de-duplication by webhook-id keeps them from appearing twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from prometheus_client import Counter, Histogram

from wordcast.services.matcher.counting import Counting
from wordcast.storage.match_streams import MatchStreams
from wordcast.storage.outbox import Message, Outbox
from wordcast.storage.records import STREAM_DELIVERY

STREAMED = Counter("wordcast_matches_streamed", "Matches added to tenants' match streams")
PUBLISH_TO_STREAM = Histogram(
    "wordcast_publish_to_stream_seconds",
    "From the router accepting a publication to its match being in the tenant's match stream",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)

Entry = tuple[Outbox, str, Message]


class MatchStreamDelivery:
    def __init__(
        self, streams: MatchStreams, retention_s: float, most: int, counting: Counting
    ) -> None:
        self._streams = streams
        self._retention_s = retention_s
        self._most = most
        self._counting = counting
        self.streamed = 0

    async def deliver(self, entries: Sequence[Entry]) -> list[Entry]:
        """Deliver the stream messages among ``entries``; returns the others (for webhooks)."""
        streamed: list[Entry] = []
        others: list[Entry] = []
        for entry in entries:
            (streamed if entry[2].callback_url == STREAM_DELIVERY else others).append(entry)
        if not streamed:
            return others
        per_tenant: dict[str, list[tuple[str, bytes]]] = {}
        per_outbox: dict[Outbox, list[str]] = {}
        for outbox, entry_id, message in streamed:
            per_tenant.setdefault(message.tenant, []).append((message.webhook_id, message.body))
            per_outbox.setdefault(outbox, []).append(entry_id)
        await asyncio.gather(
            *(
                self._streams.append(tenant, messages, self._retention_s, self._most)
                for tenant, messages in per_tenant.items()
            )
        )
        await asyncio.gather(*(outbox.ack(ids) for outbox, ids in per_outbox.items()))
        now = time.time()
        for _, _, message in streamed:
            self._counting.delivered(message)
            if message.published:
                PUBLISH_TO_STREAM.observe(max(0.0, now - message.published))
        matches = sum(message.matches for _, _, message in streamed)
        STREAMED.inc(matches)
        self.streamed += matches
        return others
