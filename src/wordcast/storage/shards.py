"""Where the subscription records live: one shard on one Redis, one per master on a Redis Cluster.

A shard is a whole subscription keyspace under a prefix of its own (:class:`~.keys.Keys`): the
records whose ids it owns, with their share of every matcher's placement set and word map H(i),
of s(W), of the anchor maps and pattern loads, of each tenant's set of ids, its own event stream,
its own copy of the mapping window and its own secrets epoch. A subscription belongs to the shard
its id hashes to (a boolean query's alternatives to their subscription's), so that every change
stays one atomic script in one slot, exactly as on one Redis: the record and the partial word maps
it changes are never apart, and no change needs a sequence of steps a crash could cut in two.

What is shared is read by adding the shards up: H(i) and s(W) are the union of the shards' partial
maps (a word is held wherever any shard holds it), the loads their sums, and followers read every
shard's event stream, each in its own order (changes to different subscriptions commute). An event
position is then one event id per shard, written with spaces between them (one id on one Redis, as
before). Two things a shard cannot decide alone: a tenant's subscription limit (checked against
the other shards' counts just before the shard's script, so concurrent requests in other shards
may pass it by as many as they are), and the mapping window (written to every shard's copy, the
namespace's first and read from there; a shard whose copy is behind refuses a placement as stale
until the writer's next step or its retry brings it level).

On one Redis the only shard is the namespace itself: every key is where it always was. On a Redis
Cluster the number of shards is the number of masters when the namespace is first used, shard 0
is the namespace's own slot and every other shard's prefix is a hash tag chosen to fall on a
master holding no shard yet; the list is kept in ``{ns}:record-shards`` (set once, even if two
processes race) and never changes, so that an id's shard stays where it is if slots move later.
A namespace that already held subscriptions before its records were sharded (an event stream in
its slot) keeps one shard, its own slot, as it was.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Any, TypeVar

import orjson

from wordcast.query.boolean import PART_SEPARATOR
from wordcast.storage.keys import Keys
from wordcast.storage.layout import pack_records
from wordcast.storage.records import event_order
from wordcast.storage.redis import on_cluster, translated

T = TypeVar("T")


def shard_of(sub_id: str, shards: int) -> int:
    """The shard a subscription's record (or one of its alternatives') lives in."""
    if shards == 1:
        return 0
    base = sub_id.split(PART_SEPARATOR, 1)[0]
    return zlib.crc32(base.encode("utf-8")) % shards


class Shards:
    """The shards' keys of one namespace, settled on first use."""

    def __init__(self, client: Any, namespace: str) -> None:
        self.client = client
        self.ns = namespace
        self._keys: list[Keys] | None = None if on_cluster(client) else [Keys(namespace)]
        self._packed = False

    async def keys(self) -> list[Keys]:
        """Every shard's keys; on first use, once the shards' records are in the packed layout
        (:mod:`.layout`)."""
        if self._keys is None:
            with translated("locating the subscription shards"):
                prefixes = await _cluster_prefixes(self.client, self.ns)
            self._keys = [Keys(prefix) for prefix in prefixes]
        if not self._packed:
            # Callers meanwhile look too: a look at a packed shard is one GET, and moving a
            # record twice is harmless (its script moves it once).
            await self._pack(self._keys)
            self._packed = True
        return self._keys

    async def _pack(self, shards: list[Keys]) -> None:
        with translated("migrating records to the packed layout"):
            for keys in shards:
                await pack_records(self.client, keys)

    async def count(self) -> int:
        return len(await self.keys())

    async def of(self, sub_id: str) -> int:
        return shard_of(sub_id, await self.count())

    async def group(self, items: Iterable[T], sub_id_of: Any) -> dict[int, list[T]]:
        """``items`` by the shard of their subscription id, each group in the order given."""
        shards = await self.count()
        groups: dict[int, list[T]] = {}
        for item in items:
            groups.setdefault(shard_of(sub_id_of(item), shards), []).append(item)
        return groups


async def _cluster_prefixes(client: Any, namespace: str) -> list[str]:
    registry = f"{namespace}:record-shards"
    known = await client.get(registry)
    if known is None:
        # A namespace that holds subscriptions from before the records were sharded keeps them
        # where they are, in its own slot: one shard.
        older = await client.exists(f"{namespace}:events")
        prefixes = [namespace] if older else await _choose(client, namespace)
        if await client.set(registry, orjson.dumps(prefixes), nx=True):
            window = await client.get(f"{namespace}:mapping:window")
            for prefix in prefixes[1:] if window is not None else ():
                await client.set(Keys(prefix).window, window)
        known = await client.get(registry)
    return [str(prefix) for prefix in orjson.loads(known)]


async def _choose(client: Any, namespace: str) -> list[str]:
    """The namespace, then a tag on each master that holds none of the shards yet."""
    await client.initialize()
    masters = [node.name for node in client.get_primaries()]
    taken = {client.get_node_from_key(namespace).name}
    prefixes = [namespace]
    inner = namespace.strip("{}")
    for shard in range(1, len(masters)):
        for salt in range(100_000):
            prefix = "{" + f"{inner}/records-{shard}.{salt}" + "}"
            node = client.get_node_from_key(prefix).name
            if node not in taken:
                break
        taken.add(node)
        prefixes.append(prefix)
    return prefixes


def position_of(shard: int, event_id: str, shards: int) -> str:
    """The position of one shard's event: its id, and "0-0" for every other shard."""
    if shards == 1:
        return event_id
    ids = ["0-0"] * shards
    ids[shard] = event_id
    return " ".join(ids)


def latest(positions: Iterable[str | None]) -> str | None:
    """The position past all of ``positions``: for each shard the latest of their ids (None if
    there are none)."""
    merged: list[str] | None = None
    for position in positions:
        if position is None:
            continue
        ids = position.split()
        if merged is None:
            merged = ids
        else:
            merged = [max(a, b, key=event_order) for a, b in zip(merged, ids, strict=True)]
    return None if merged is None else " ".join(merged)
