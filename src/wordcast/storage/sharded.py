"""Every shard's subscription records as one store (:mod:`wordcast.storage.shards`): a change goes
to the shard of its subscription, where it is one atomic script; a read of many adds the shards
up. Event ids come back as positions (one id per shard), which :func:`~.shards.latest` merges."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from wordcast.routing.placement import Placement
from wordcast.storage.bulk import over_limit
from wordcast.storage.records import Subscription
from wordcast.storage.redis import NO_REPLICAS, Replication
from wordcast.storage.shards import Shards, latest, position_of
from wordcast.storage.subscriptions import EVENTS_MAX, SubscriptionStore


class ShardedSubscriptions:
    """The subscription records of every shard."""

    def __init__(
        self,
        client: Any,
        shards: Shards,
        events_max: int = EVENTS_MAX,
        replication: Replication = NO_REPLICAS,
    ) -> None:
        self.client = client
        self.shards = shards
        self.events_max = events_max
        self.replication = replication
        self._parts: list[SubscriptionStore] | None = None

    async def parts(self) -> list[SubscriptionStore]:
        if self._parts is None:
            self._parts = [
                SubscriptionStore(self.client, keys, self.events_max, self.replication)
                for keys in await self.shards.keys()
            ]
        return self._parts

    async def _part(self, sub_id: str) -> tuple[int, SubscriptionStore]:
        parts = await self.parts()
        shard = await self.shards.of(sub_id)
        return shard, parts[shard]

    def _position(self, shard: int, event_id: str) -> str:
        return position_of(shard, event_id, len(self._parts or ()))

    async def get(self, sub_id: str) -> Subscription:
        _, part = await self._part(sub_id)
        return await part.get(sub_id)

    async def count(self) -> int:
        """How many subscriptions are stored, over every matcher."""
        return sum(await asyncio.gather(*(part.count() for part in await self.parts())))

    async def tenant_holds(self, tenant: str, sub_ids: Sequence[str]) -> list[bool]:
        """Whether each id is one of the tenant's subscriptions."""
        parts = await self.parts()
        groups = await self.shards.group(enumerate(sub_ids), lambda item: item[1])
        held = [False] * len(sub_ids)
        for shard, items in groups.items():
            found = await parts[shard].tenant_holds(tenant, [sub_id for _, sub_id in items])
            for (index, _), member in zip(items, found, strict=True):
                held[index] = member
        return held

    async def tenant_count(self, tenant: str) -> int:
        """How many records a tenant holds (its limit counts each alternative)."""
        return sum(await self._tenant_counts(tenant))

    async def tenants_holding(self) -> set[str]:
        """The tenants that hold a subscription in some shard."""
        parts = await self.parts()
        return set().union(*await asyncio.gather(*(part.tenants_holding() for part in parts)))

    async def tenant_total(self, tenant: str) -> int:
        """How many subscriptions a tenant holds (not counting alternatives), over every shard."""
        parts = await self.parts()
        return sum(await asyncio.gather(*(part.tenant_total(tenant) for part in parts)))

    async def url_subscriptions(self, tenant: str, url: str) -> int:
        """How many of the tenant's subscriptions deliver to webhook ``url``, over every shard."""
        parts = await self.parts()
        counts = await asyncio.gather(*(part.url_subscriptions(tenant, url) for part in parts))
        return sum(counts)

    async def _tenant_counts(self, tenant: str) -> list[int]:
        parts = await self.parts()
        return list(await asyncio.gather(*(part.tenant_count(tenant) for part in parts)))

    async def tenant_subscriptions(
        self, tenant: str, cursor: int = 0, count: int = 100
    ) -> tuple[int, list[Subscription]]:
        """One page of a tenant's subscriptions and the cursor of the next (0 at the end): the
        shards one after another, the cursor naming the shard (its remainder by their number)
        and the position within it."""
        parts = await self.parts()
        shard, inner = cursor % len(parts), cursor // len(parts)
        subs: list[Subscription] = []
        while True:
            inner, page = await parts[shard].tenant_subscriptions(tenant, inner, count - len(subs))
            subs += page
            if inner == 0:
                shard += 1
                if shard == len(parts):
                    return 0, subs
            if len(subs) >= count:
                return inner * len(parts) + shard, subs

    async def signing_secrets_of(self, sub_ids: Iterable[str]) -> dict[str, list[str] | None]:
        found = await self.signing_secrets_until(sub_ids)
        return {sub_id: None if entry is None else entry[0] for sub_id, entry in found.items()}

    async def signing_secrets_until(
        self, sub_ids: Iterable[str]
    ) -> dict[str, tuple[list[str], float] | None]:
        """:meth:`SubscriptionStore.signing_secrets_until`, each shard's ids from that shard."""
        parts = await self.parts()
        groups = await self.shards.group(dict.fromkeys(sub_ids), lambda sub_id: sub_id)
        found: dict[str, tuple[list[str], float] | None] = {}
        for answer in await asyncio.gather(
            *(parts[shard].signing_secrets_until(ids) for shard, ids in groups.items())
        ):
            found.update(answer)
        return found

    async def secrets_epoch(self) -> str:
        """A value that changes whenever a signing secret is rotated, in any shard."""
        parts = await self.parts()
        return " ".join(await asyncio.gather(*(part.secrets_epoch() for part in parts)))

    async def add(
        self, sub: Subscription, tenant_limit: int = 1_000_000, window: str = "0 0"
    ) -> str:
        """:meth:`SubscriptionStore.add` in the subscription's shard; the tenant's subscriptions
        in the other shards count against its limit."""
        shard, part = await self._part(sub.id)
        others = 0
        if len(self._parts or ()) > 1:
            counts = await self._tenant_counts(sub.tenant)
            others = sum(counts) - counts[shard]
        return self._position(shard, await part.add(sub, tenant_limit, window, others))

    async def add_many(
        self, subs: Sequence[Subscription], tenant_limit: int = 1_000_000, window: str = "0 0"
    ) -> list[str | BaseException]:
        """:meth:`SubscriptionStore.add_many`, each shard's in one round trip to it."""
        parts = await self.parts()
        if len(parts) == 1:
            return await parts[0].add_many(subs, tenant_limit, window)
        tenants = sorted({sub.tenant for sub in subs})
        counts = dict(
            zip(
                tenants,
                await asyncio.gather(*(self._tenant_counts(t) for t in tenants)),
                strict=True,
            )
        )
        # In order, as one Redis would: a subscription past the limit is refused, and each
        # shard's script counts what the batch sends to the others as stored there.
        room = {tenant: tenant_limit - sum(per_shard) for tenant, per_shard in counts.items()}
        answers: list[str | BaseException] = [ValueError("not stored")] * len(subs)
        sent: list[tuple[int, Subscription]] = []
        for index, sub in enumerate(subs):
            if room[sub.tenant] <= 0:
                answers[index] = over_limit(sub.tenant, tenant_limit)
                continue
            room[sub.tenant] -= 1
            sent.append((index, sub))
        sending = Counter(sub.tenant for _, sub in sent)
        groups = await self.shards.group(sent, lambda item: item[1].id)
        for shard, items in groups.items():
            here = Counter(sub.tenant for _, sub in items)
            others = {t: sum(c) - c[shard] + sending[t] - here[t] for t, c in counts.items()}
            replies = await parts[shard].add_many(
                [sub for _, sub in items], tenant_limit, window, others
            )
            for (index, _), reply in zip(items, replies, strict=True):
                answers[index] = (
                    reply if isinstance(reply, BaseException) else self._position(shard, reply)
                )
        return answers

    async def delete(self, sub_id: str) -> tuple[Subscription, str]:
        shard, part = await self._part(sub_id)
        sub, event_id = await part.delete(sub_id)
        return sub, self._position(shard, event_id)

    async def delete_with_alternatives(self, sub_id: str) -> tuple[Subscription, str, set[int]]:
        """:meth:`SubscriptionStore.delete_with_alternatives`: a subscription and its
        alternatives share a shard."""
        shard, part = await self._part(sub_id)
        sub, event_id, matchers = await part.delete_with_alternatives(sub_id)
        return sub, self._position(shard, event_id), matchers

    async def delete_many(self, sub_ids: Sequence[str]) -> tuple[str | None, set[int]]:
        """:meth:`SubscriptionStore.delete_many` in each shard."""
        parts = await self.parts()
        groups = await self.shards.group(dict.fromkeys(sub_ids), lambda sub_id: sub_id)
        positions: list[str | None] = []
        matchers: set[int] = set()
        for shard, ids in groups.items():
            event_id, held = await parts[shard].delete_many(ids)
            positions.append(None if event_id is None else self._position(shard, event_id))
            matchers |= held
        return latest(positions), matchers

    async def move(self, sub: Subscription, placements: Sequence[Placement]) -> str | None:
        shard, part = await self._part(sub.id)
        event_id = await part.move(sub, placements)
        return None if event_id is None else self._position(shard, event_id)

    async def move_many(
        self, moves: Sequence[tuple[Subscription, Sequence[Placement]]]
    ) -> list[str | None]:
        parts = await self.parts()
        groups = await self.shards.group(enumerate(moves), lambda item: item[1][0].id)
        answers: list[str | None] = [None] * len(moves)
        for shard, items in groups.items():
            replies = await parts[shard].move_many([move for _, move in items])
            for (index, _), reply in zip(items, replies, strict=True):
                answers[index] = None if reply is None else self._position(shard, reply)
        return answers

    async def rotate_secret(self, sub_id: str, secret: str, previous_until: float) -> None:
        _, part = await self._part(sub_id)
        await part.rotate_secret(sub_id, secret, previous_until)
