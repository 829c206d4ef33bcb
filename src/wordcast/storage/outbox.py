"""The durable outbox: matches are recorded in Redis before anyone is told they exist.

Keys (under the namespace):

``{ns}:outbox:{i}``     stream of the messages matcher i found, read through the consumer group
                        ``dispatch`` by every matcher's dispatcher (consumer ``matcher-{j}``), so
                        delivery work is shared whichever matcher found the matches. An entry is
                        acknowledged and deleted only after a 2xx (or once it is dead-lettered), so
                        a matcher that crashes leaves the entries it took, from any outbox, pending
                        for the consumer of the same name, its successor, which delivers them first;
                        entries left pending far longer than any delivery takes (a matcher removed
                        for good) are taken over by another consumer.
``{ns}:outboxes``       set of the matcher ordinals whose outbox exists, for the dispatchers to read.
``{ns}:dead:{tenant}``  stream of the messages given up on (:mod:`.dead_letters`).

On a Redis Cluster, where the outboxes carry most of the traffic, each outbox has a hash tag of its
own, so that they spread over the masters instead of sharing the namespace's slot: matcher i's
outbox is ``{<namespace>/outbox-<i>.<salt>}:outbox``, the salt chosen when the outbox is first
made so that its slot is on the master holding the fewest outboxes then (hashing alone would put
three outboxes on three masters only two times in nine), and kept in ``{ns}:outbox-keys`` (hash
ordinal -> key), which every reader follows; the outboxes stay where they are if slots move later.
A dispatcher then reads each outbox apart (a multi-stream read must stay in one slot), and moving
an entry to the dead letters is two steps instead of one transaction: dead letter written, then
the entry acknowledged; a crash between them dead-letters the message a second time.

A message holds the matches of one routed batch for one callback URL of one tenant, from at most
``MAX_SIGNERS`` subscriptions: it is signed with each of their secrets (a receiver holding any one
of them can verify it) and keeps its ``webhook-id`` for every attempt and redelivery.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from wordcast.storage.lua import LuaScript
from wordcast.storage.redis import NO_REPLICAS, Replication, node_of, on_cluster, translated

GROUP = "dispatch"
MAX_SIGNERS = 64  # subscriptions per message: 3 KB of signature header (6 KB while all rotate)
DEAD_LETTERS_MAX = 100_000
NAMESPACE_WEIGHT = 0.5  # the namespace's slot's traffic, in outboxes (routing, events, rate limits)
POLL_S = 0.05  # on a Redis Cluster, how long a dispatcher waits between reads that found nothing


@dataclass(frozen=True, slots=True)
class Message:
    subscription_ids: tuple[str, ...]
    tenant: str
    callback_url: str
    webhook_id: str
    body: bytes  # the JSON payload as the core wrote it: recorded, signed and sent as it is
    matches: int
    created: float
    published: float = 0.0  # when the router accepted the publications (0: not known)
    # How many of its matches each of ``subscription_ids`` has (empty: not said, one each).
    counts: tuple[int, ...] = ()
    # The incarnation each of ``subscription_ids`` matched in: its record's ``created``, which
    # its counters are kept for, so that whichever dispatcher delivers the message counts it
    # without looking the record up (empty, or 0 for one: not known).
    incarnations: tuple[float, ...] = ()

    def per_subscription(self) -> Iterable[tuple[str, int, float | None]]:
        """(subscription id, its matches here, the incarnation they matched in or None where
        not said) for each subscription the message is for."""
        ids = self.subscription_ids
        counts = self.counts or [1] * len(ids)
        incarnations = [i or None for i in self.incarnations] or [None] * len(ids)
        # An entry whose columns do not line up was not written by a matcher: what does counts.
        return zip(ids, counts, incarnations, strict=False)

    def fields(self) -> dict[str, str | bytes]:
        return {
            "sub": " ".join(self.subscription_ids),
            "tenant": self.tenant,
            "url": self.callback_url,
            "id": self.webhook_id,
            "body": self.body,
            "matches": str(self.matches),
            "created": repr(self.created),
            "published": repr(self.published),
            "counts": " ".join(map(str, self.counts)),
            "incarnations": " ".join(map(repr, self.incarnations)),
        }

    @classmethod
    def from_fields(cls, stored: Mapping[Any, Any]) -> Message:
        """The message of an entry's fields as Redis returns them: as stored (bytes, from a
        client that does not decode: the body is taken as it is), or decoded (str)."""
        if stored and isinstance(next(iter(stored)), bytes):
            body = stored[b"body"]
            fields = {k.decode(): v.decode() for k, v in stored.items() if k != b"body"}
        else:
            fields, body = dict(stored), stored["body"].encode()
        return cls(
            subscription_ids=tuple(fields["sub"].split()),
            tenant=fields.get("tenant", ""),
            callback_url=fields["url"],
            webhook_id=fields["id"],
            body=body,
            matches=int(fields.get("matches", "1")),
            created=float(fields.get("created", "0")),
            published=float(fields.get("published", "0")),
            counts=tuple(int(n) for n in fields.get("counts", "").split()),
            incarnations=tuple(float(n) for n in fields.get("incarnations", "").split()),
        )


def webhook_id(pairs: Iterable[tuple[str, str]], publisher: str = "", stream: str = "") -> str:
    """Stable for a set of (subscription, publication) matches of one publisher's publications
    to one stream, whoever computes it.

    A publication id is its publisher's: the same id from two tenants names two publications,
    so the publisher and the stream are part of what is hashed, and the whole is hashed as JSON,
    which no id can make ambiguous (ids once went in between NUL and newline separators, which
    an id holding them could imitate)."""
    encoded = orjson.dumps([publisher, stream, sorted(pairs)])
    return "msg_" + hashlib.sha256(encoded).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Backlog:
    """What a matcher weighs before it takes a routed batch: its back-pressure."""

    messages: int  # in this matcher's outbox
    redis_used: int  # bytes Redis holds: every outbox, and everything else
    redis_limit: int  # bytes it may hold before the matchers refuse batches; 0: no limit known

    @property
    def memory_full(self) -> bool:
        return 0 < self.redis_limit <= self.redis_used

    def memory_text(self) -> str:
        """Redis's memory against the limit, as a refused batch and ``wordcast status`` say it."""
        return (
            f"Redis holds {_size(self.redis_used)} of the {_size(self.redis_limit)} the matchers "
            "allow (WORDCAST_MATCHER_REDIS_MEMORY_MAX)"
        )


def _size(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB" if n >= 2**20 else f"{n:,} bytes"


def redis_memory_limit(memory_info: Mapping[str, Any], configured: int) -> int:
    """How much Redis may hold before the matchers refuse routed batches (``INFO memory``).

    ``configured`` if set. Otherwise 90% of Redis's ``maxmemory``: past it Redis refuses every
    write, and the margin leaves room for the batches in flight, for deliveries to be recorded
    as done and for subscriptions to be changed. A Redis without ``maxmemory`` (the embedded one,
    by default) would grow until the machine runs out, so then half of the machine's memory as
    Redis reports it. 0 when Redis reports neither.
    """
    if configured:
        return configured
    maxmemory = int(memory_info.get("maxmemory", 0))
    if maxmemory:
        return maxmemory * 9 // 10
    return int(memory_info.get("total_system_memory", 0)) // 2


# Entries acknowledged and deleted in one step (KEYS: the outbox). A script rather than MULTI:
# redis-py's async cluster transactions run each queued command through asyncio.run in a thread
# of its own, slowly (a delivery was acknowledged well after it was received).
ACK_MOST = 1_000
_ACK = """
redis.call('XACK', KEYS[1], group, unpack(ids))
return redis.call('XDEL', KEYS[1], unpack(ids))
"""
ACK = LuaScript("group", _ACK, rest="ids")


class Outbox:
    """Matcher ``matcher``'s outbox, read by the dispatcher of matcher ``reader`` (by default its
    own)."""

    def __init__(
        self,
        client: aioredis.Redis,
        namespace: str,
        matcher: int,
        reader: int | None = None,
        replication: Replication = NO_REPLICAS,
        key: str | None = None,
        raw: Any = None,
    ) -> None:
        self.client: Any = client
        # A client answering bytes, which the dispatcher's reads go through: a message's body
        # then stays the bytes the core wrote, never decoded (the decoding client without one).
        self.raw: Any = raw if raw is not None else client
        self.replication = replication
        self.ns = namespace
        self.matcher = matcher
        self.on_cluster = on_cluster(client)
        self._key = key or (None if self.on_cluster else f"{namespace}:outbox:{matcher}")
        self.reader = matcher if reader is None else reader
        self.consumer = f"matcher-{self.reader}"
        self._ack = self.client.register_script(ACK)

    @property
    def key(self) -> str:
        if self._key is None:
            raise RuntimeError(f"matcher {self.matcher}'s outbox is used before locate()")
        return self._key

    async def locate(self) -> str:
        """The outbox's key: fixed on one Redis; on a Redis Cluster read from (or, for a new
        outbox, chosen and kept in) the namespace's registry of outbox keys."""
        if self._key is None:
            with translated("locating the outbox"):
                self._key = await _cluster_outbox_key(self.client, self.ns, self.matcher)
        return self._key

    async def every_outbox(self) -> list[Outbox]:
        """This outbox first, then every other registered one, all read by our consumer."""
        await self.locate()
        with translated("looking for outboxes"):
            if self.on_cluster:
                keys = await self.client.hgetall(f"{self.ns}:outbox-keys")
            else:
                keys = {m: "" for m in await self.client.smembers(f"{self.ns}:outboxes")}
        others = sorted(int(m) for m in keys if m.isdigit() and int(m) != self.matcher)
        return [
            self,
            *(
                Outbox(
                    self.client,
                    self.ns,
                    j,
                    self.reader,
                    self.replication,
                    keys[str(j)] or None,
                    self.raw,
                )
                for j in others
            ),
        ]

    def dead_key(self, tenant: str) -> str:
        return f"{self.ns}:dead:{tenant}"

    async def ensure_group(self) -> None:
        """Create the stream and its consumer group, and register the outbox for every matcher's
        dispatcher to read (a set of ordinals: no scan of the keyspace)."""
        await self.locate()
        with translated("creating the outbox consumer group"):
            await self.client.sadd(f"{self.ns}:outboxes", str(self.matcher))
            try:
                await self.client.xgroup_create(self.key, GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    async def put(self, messages: list[Message]) -> None:
        """Record messages durably, in one round trip."""
        if not messages:
            return
        await self.locate()
        pipe = self.client.pipeline(transaction=False)
        for message in messages:
            pipe.xadd(self.key, message.fields())
        with translated("recording matches in the outbox"):
            await self.replication.execute(pipe, self.key, "recording matches in the outbox")

    async def depth(self) -> int:
        """Messages recorded and not yet acknowledged or dead-lettered."""
        await self.locate()
        with translated("measuring the outbox"):
            return int(await self.client.xlen(self.key))

    async def backlog(self, redis_memory_max: int = 0) -> Backlog:
        """This outbox's depth and Redis's memory, in one round trip."""
        await self.locate()
        with translated("measuring the outbox"):
            if self.on_cluster:
                # A cluster's pipelines refuse INFO: the memory that counts is the node's
                # holding this outbox's slot.
                node = await node_of(self.client, self.key)
                depth = await self.client.xlen(self.key)
                memory = await self.client.info("memory", target_nodes=node)
            else:
                pipe = self.client.pipeline(transaction=False)
                pipe.xlen(self.key)
                pipe.info("memory")
                depth, memory = await pipe.execute()
        return Backlog(
            int(depth), int(memory["used_memory"]), redis_memory_limit(memory, redis_memory_max)
        )

    async def read(self, after: str, count: int, block_ms: int | None) -> list[tuple[str, Message]]:
        """Our pending entries after ``after`` (an id), or new ones (``after`` = ">").

        An entry deleted while still pending comes back without its fields. It has nothing left
        to deliver, so it is acknowledged here: left pending, a page of such entries would read
        as the end of our pending entries, and the live ones after it would wait for a restart.
        """
        await self.locate()
        while True:
            with translated("reading the outbox"):
                reply = await self.raw.xreadgroup(
                    GROUP, self.consumer, {self.key: after}, count=count, block=block_ms
                )
            if not reply:
                return []
            entries = reply[0][1]
            live = _live(entries)
            gone = [_text(entry_id) for entry_id, fields in entries if not fields]
            if not gone:
                return live
            with translated("acknowledging deleted entries"):
                await self.client.xack(self.key, GROUP, *gone)
            if live:
                return live
            # A page of deleted entries only: they are no longer pending, so the same cursor
            # now reads the ones after them.

    async def take_over_stale(self, idle_s: float, count: int) -> list[tuple[str, Message]]:
        """Up to ``count`` entries that some consumer took ``idle_s`` seconds ago or more and
        never finished, now ours: a matcher removed for good (or hung) leaves them pending.

        The oldest come first, as the pending list is in entry order, and orphans are older than
        the entries live consumers are working on.
        """
        await self.locate()
        with translated("taking over stale outbox entries"):
            reply = await self.client.xautoclaim(
                self.key, GROUP, self.consumer, int(idle_s * 1000), "0-0", count=count
            )
        # Entries deleted meanwhile come back empty (Redis 6.2) or apart (7.0, which lets them go).
        return _live(reply[1])

    async def release(self, consumer: str, stale_after_s: float) -> int:
        """Mark the entries ``consumer`` left pending here as stale, so that the next take-over
        pass of any dispatcher delivers them; returns how many. Only for a consumer that is gone
        for good (a matcher removed by scaling down, its process ended): one still delivering
        them would deliver them twice."""
        await self.locate()
        released = 0
        with translated("releasing a removed matcher's outbox entries"):
            while True:
                pending = await self.client.xpending_range(
                    self.key, GROUP, min="-", max="+", count=1_000, consumername=consumer
                )
                ids = [entry["message_id"] for entry in pending]
                if not ids:
                    return released
                # Claimed by the same consumer, but with an idle time past any take-over bound.
                idle_ms = int(stale_after_s * 1000) + 1
                await self.client.xclaim(
                    self.key, GROUP, consumer, 0, ids, idle=idle_ms, justid=True
                )
                released += len(ids)
                if len(ids) < 1_000:
                    return released

    async def release_everywhere(self, consumer: str, stale_after_s: float) -> int:
        """:meth:`release` in every registered outbox; returns how many in all."""
        return sum([await o.release(consumer, stale_after_s) for o in await self.every_outbox()])

    async def fetch(self, entry_ids: Sequence[str]) -> dict[str, Message]:
        """The messages of these entries, in one round trip; an entry deleted meanwhile (given
        up on, or delivered by a consumer that took it over) is left out."""
        await self.locate()
        pipe = self.client.pipeline(transaction=False)
        for entry_id in entry_ids:
            pipe.xrange(self.key, entry_id, entry_id, count=1)
        with translated("reading messages to retry"):
            replies = await pipe.execute()
        return dict(message for reply in replies for message in _live(reply))

    @staticmethod
    async def read_new(
        outboxes: Sequence[Outbox], count: int, block_ms: int | None
    ) -> list[tuple[Outbox, str, Message]]:
        """New entries from any of ``outboxes`` (one consumer's), at most ``count`` from each."""
        if outboxes[0].on_cluster:
            await asyncio.gather(*(outbox.locate() for outbox in outboxes))
            return await _read_new_apart(outboxes, count, block_ms)
        by_key = {outbox.key: outbox for outbox in outboxes}
        client, consumer = outboxes[0].raw, outboxes[0].consumer
        with translated("reading the outboxes"):
            reply = await client.xreadgroup(
                GROUP, consumer, dict.fromkeys(by_key, ">"), count=count, block=block_ms
            )
        return [
            (by_key[_text(key)], entry_id, message)
            for key, entries in reply or []
            for entry_id, message in _live(entries)
        ]

    async def ack(self, entry_ids: Sequence[str]) -> None:
        """Acknowledge and delete entries delivered (or given up on), in one round trip."""
        await self.locate()
        with translated("acknowledging deliveries"):
            for start in range(0, len(entry_ids), ACK_MOST):  # Lua unpacks a few thousand
                chunk = entry_ids[start : start + ACK_MOST]
                await self._ack(keys=[self.key], args=ACK.args(group=GROUP, ids=chunk))

    async def dead_letter(self, entry_id: str, message: Message, reason: str, attempts: int) -> str:
        """Move a message to its tenant's dead letters, atomically with acknowledging it (on a
        Redis Cluster in two ordered steps: see the module's docstring); returns the dead
        letter's id, the one ``wordcast replay`` and the API take."""
        await self.locate()
        fields = message.fields() | {
            "reason": reason[:500],
            "attempts": str(attempts),
            "failed_at": repr(time.time()),
        }
        dead = self.dead_key(message.tenant)
        with translated("dead-lettering a delivery"):
            if self.on_cluster:  # two slots: the dead letter first, then the entry let go
                dead_id = await self.client.xadd(
                    dead, fields, maxlen=DEAD_LETTERS_MAX, approximate=True
                )
                pipe = self.client.pipeline(transaction=True)
            else:
                pipe = self.client.pipeline(transaction=True)
                pipe.xadd(dead, fields, maxlen=DEAD_LETTERS_MAX, approximate=True)
            pipe.xack(self.key, GROUP, entry_id)
            pipe.xdel(self.key, entry_id)
            done = await pipe.execute()
        return str(dead_id if self.on_cluster else done[0])


def _live(entries: Sequence[tuple[Any, Mapping[Any, Any] | None]]) -> list[tuple[str, Message]]:
    """The messages of stream entries as Redis returns them (decoded or not), without the
    deleted ones (no fields)."""
    return [
        (_text(entry_id), Message.from_fields(fields)) for entry_id, fields in entries if fields
    ]


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def _read_new_apart(
    outboxes: Sequence[Outbox], count: int, block_ms: int | None
) -> list[tuple[Outbox, str, Message]]:
    """:meth:`Outbox.read_new` on a Redis Cluster: one read per outbox, all at once, none
    blocking (a read that blocked on one outbox would hold back the others); when all come back
    empty, a pause of ``POLL_S`` (or ``block_ms``, if shorter) before the caller reads again."""

    async def one(outbox: Outbox) -> list[tuple[Outbox, str, Message]]:
        reply = await outbox.raw.xreadgroup(GROUP, outbox.consumer, {outbox.key: ">"}, count=count)
        return [
            (outbox, entry_id, message)
            for _, entries in reply or []
            for entry_id, message in _live(entries)
        ]

    with translated("reading the outboxes"):
        found = [entry for part in await asyncio.gather(*map(one, outboxes)) for entry in part]
    if not found and block_ms:
        await asyncio.sleep(min(POLL_S, block_ms / 1000))
    return found


async def _cluster_outbox_key(client: Any, namespace: str, matcher: int) -> str:
    """Matcher ``matcher``'s outbox key on a Redis Cluster, as registered; a new outbox gets a
    tag whose slot is on the master holding the fewest outboxes (the namespace's own slot counted
    as half of one: three matchers on three masters get one each), registered once even if two
    processes race to make it."""
    registry = f"{namespace}:outbox-keys"
    known: dict[str, str] = await client.hgetall(registry)
    if str(matcher) in known:
        return known[str(matcher)]
    await client.initialize()
    load = {node.name: 0.0 for node in client.get_primaries()}
    load[client.get_node_from_key(registry).name] += NAMESPACE_WEIGHT
    for key in known.values():
        load[client.get_node_from_key(key).name] += 1
    fewest = min(load.values())
    inner = namespace.strip("{}")
    for salt in range(100_000):
        key = "{" + f"{inner}/outbox-{matcher}.{salt}" + "}:outbox"
        if load[client.get_node_from_key(key).name] == fewest:
            break
    if await client.hsetnx(registry, str(matcher), key):
        return key
    return str(await client.hget(registry, str(matcher)))
