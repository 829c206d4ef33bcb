"""Dead letters: the messages given up on, kept per tenant for the owner to read and replay.

``{ns}:dead:{tenant}`` is a stream of them (at most ``DEAD_LETTERS_MAX``, oldest trimmed), each
with the reason and the number of attempts. Replaying one puts the same message (same
``webhook-id``) back into a matcher's outbox (:mod:`.outbox`) and deletes the dead letter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from wordcast.errors import NotFound
from wordcast.storage.outbox import Message, Outbox
from wordcast.storage.redis import on_cluster, translated


@dataclass(frozen=True, slots=True)
class DeadLetter:
    id: str
    message: Message
    reason: str
    attempts: int
    failed_at: float


MAX_STREAM_PART = 2**64 - 1


def is_stream_id(value: str) -> bool:
    """Whether Redis accepts ``value`` as a stream entry id (two 64-bit parts)."""
    millis, _, seq = value.partition("-")
    return (
        millis.isdigit()
        and seq.isdigit()
        and int(millis) <= MAX_STREAM_PART
        and int(seq) <= MAX_STREAM_PART
    )


class DeadLetters:
    """The owner's side of the dead letters: list them, replay them into a matcher's outbox."""

    def __init__(self, client: aioredis.Redis, namespace: str) -> None:
        self.client: Any = client
        self.ns = namespace

    def key(self, tenant: str) -> str:
        return f"{self.ns}:dead:{tenant}"

    async def list(self, tenant: str, after: str = "-", count: int = 100) -> list[DeadLetter]:
        start = after if after == "-" else f"({after}"
        with translated("reading dead letters"):
            entries = await self.client.xrange(self.key(tenant), min=start, count=count)
        return [_dead(entry_id, fields) for entry_id, fields in entries]

    async def get(self, tenant: str, dead_id: str) -> DeadLetter:
        if not is_stream_id(dead_id):
            raise NotFound(f"no dead letter with id {dead_id!r}")
        with translated("reading a dead letter"):
            entries = await self.client.xrange(self.key(tenant), min=dead_id, max=dead_id)
        if not entries:
            raise NotFound(f"no dead letter with id {dead_id!r}")
        return _dead(entries[0][0], entries[0][1])

    async def replay(self, tenant: str, dead_id: str, matcher: int) -> Message:
        """Put a dead letter back in a matcher's outbox (same message, same webhook-id).

        On one Redis both steps are one transaction. On a Redis Cluster the outbox has a slot of
        its own, so they are two, in this order: a crash between them leaves the dead letter in
        place, and replaying it again delivers the message again under the same webhook-id."""
        key = self.key(tenant)
        message = (await self.get(tenant, dead_id)).message
        outbox_key = await Outbox(self.client, self.ns, matcher).locate()
        with translated("replaying a dead letter"):
            if on_cluster(self.client):
                await self.client.xadd(outbox_key, message.fields())
                await self.client.xdel(key, dead_id)
            else:
                pipe = self.client.pipeline(transaction=True)
                pipe.xadd(outbox_key, message.fields())
                pipe.xdel(key, dead_id)
                await pipe.execute()
        return message


def _dead(entry_id: str, fields: dict[str, str]) -> DeadLetter:
    return DeadLetter(
        id=entry_id,
        message=Message.from_fields(fields),
        reason=fields.get("reason", ""),
        attempts=int(fields.get("attempts", "0")),
        failed_at=float(fields.get("failed_at", "0")),
    )
