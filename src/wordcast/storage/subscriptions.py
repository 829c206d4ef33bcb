"""One shard's subscription records and every change to them, each one atomic Lua script
(:mod:`wordcast.storage.scripts`) that also keeps the shard's word maps and announces the change
on its event stream (the shards: :mod:`wordcast.storage.shards`; all of them as one store:
:mod:`wordcast.storage.sharded`)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from wordcast.errors import NotFound, StaleMapping, StoreUnavailable
from wordcast.query.boolean import MAX_ALTERNATIVES, PART_SEPARATOR, has_operators, part_id
from wordcast.routing.placement import Placement
from wordcast.storage import bulk, read_scripts, scripts
from wordcast.storage.bulk import over_limit
from wordcast.storage.keys import RECORD_BUCKETS, Keys
from wordcast.storage.pattern_calls import (
    add_pattern_call,
    delete_pattern_call,
    move_pattern_call,
)
from wordcast.storage.records import (
    Subscription,
    event_order,
    pack_record,
    secrets_of_record,
    tenant_of_record,
    unpack_record,
)
from wordcast.storage.redis import NO_REPLICAS, Replication, queue_script, translated

# The event stream is trimmed to about this many events. Followers read it within milliseconds;
# one further behind than this (a matcher restarting under a large import) finds its position
# trimmed away and loads a snapshot again (EventFollower). Each event holds its subscription's
# fields, about 180 bytes in Redis: 200,000 is some 36 MB whatever the number of subscriptions.
EVENTS_MAX = 200_000

# Buckets a listing passes to a call (it scans them until it has a page): a tenant with few
# records among a million is listed a few milliseconds of Redis at a time.
BUCKETS_PER_READ = 32


class SubscriptionReads:
    """Reads of subscription records: one, a tenant's, the secrets to sign with; and the keys
    each record's scripts touch."""

    def __init__(self, client: Any, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._tenant_page = client.register_script(read_scripts.TENANT_PAGE)
        self._records_by_id = client.register_script(read_scripts.RECORDS_BY_ID)
        self._count_urls = client.register_script(scripts.COUNT_URLS)
        self._urls_counted = False

    async def get(self, sub_id: str) -> Subscription:
        with translated("reading a subscription"):
            value = await self.client.hget(self.keys.record_of(sub_id), sub_id)
        if value is None:
            raise NotFound(f"no subscription with id {sub_id!r}")
        return unpack_record(sub_id, value)

    async def packed(self, sub_ids: Sequence[str]) -> list[str | None]:
        """Each record as stored (None for one not there), in one round trip."""
        if not sub_ids:
            return []
        keys = [self.keys.record_of(sub_id) for sub_id in sub_ids]
        values: list[str | None] = await self._records_by_id(
            keys=keys, args=read_scripts.RECORDS_BY_ID.args(ids=sub_ids)
        )
        return values

    async def records_of(self, sub_ids: Sequence[str]) -> list[Subscription | None]:
        """Each subscription (None for one not there), in one round trip."""
        values = await self.packed(sub_ids)
        return [
            None if value is None else unpack_record(sub_id, value)
            for sub_id, value in zip(sub_ids, values, strict=True)
        ]

    async def count(self) -> int:
        """How many records are stored, counted once for every matcher holding one."""
        with translated("counting subscriptions"):
            counts = await self.client.hvals(self.keys.matcher_counts)
        return sum(int(count) for count in counts)

    async def tenant_holds(self, tenant: str, sub_ids: Sequence[str]) -> list[bool]:
        """Whether each id is one of the tenant's subscriptions, in one round trip."""
        with translated("checking a tenant's subscriptions"):
            values = await self.packed(list(sub_ids))
        return [value is not None and tenant_of_record(value) == tenant for value in values]

    async def tenant_count(self, tenant: str) -> int:
        """How many records (subscriptions and their alternatives) a tenant holds."""
        with translated("counting a tenant's subscriptions"):
            return int(await self.client.hget(self.keys.tenant_counts, tenant) or 0)

    async def url_subscriptions(self, tenant: str, url: str) -> int:
        """How many of the tenant's subscriptions deliver to webhook ``url`` (kept by the record
        scripts, ``COUNT_URLS`` counting the records from before that once)."""
        with translated("counting an endpoint's subscriptions"):
            if not self._urls_counted:
                buckets = [self.keys.records(b) for b in range(RECORD_BUCKETS)]
                await self._count_urls(keys=[self.keys.tenant_counts, *buckets], args=[])
                self._urls_counted = True
            field = self.keys.url_field(tenant, url)
            return int(await self.client.hget(self.keys.tenant_counts, field) or 0)

    async def tenants_holding(self) -> set[str]:
        """The tenants that hold a record in this shard (with an API key stored or not: the
        development key's tenant has none)."""
        with translated("listing the tenants that hold subscriptions"):
            counts = await self.client.hgetall(self.keys.tenant_counts)
        return {
            str(field)
            for field, held in counts.items()
            if " " not in str(field) and "\t" not in str(field) and int(held) > 0
        }

    async def tenant_total(self, tenant: str) -> int:
        """How many subscriptions a tenant holds: its records less the later alternatives of its
        boolean queries. Alternatives stored before they were counted apart (November 2026)
        count as subscriptions here until their query is deleted."""
        fields = (tenant, self.keys.alternatives_field(tenant))
        with translated("counting a tenant's subscriptions"):
            records, alternatives = await self.client.hmget(self.keys.tenant_counts, fields)
        return max(0, int(records or 0) - int(alternatives or 0))

    async def tenant_subscriptions(
        self, tenant: str, cursor: int = 0, count: int = 100
    ) -> tuple[int, list[Subscription]]:
        """About ``count`` of a tenant's subscriptions and the cursor of the next page (0 at the
        end): the buckets in order, each scanned in Redis (``TENANT_PAGE``), the cursor naming
        the bucket (its remainder by their number) and the HSCAN cursor within it."""
        bucket, within = cursor % RECORD_BUCKETS, cursor // RECORD_BUCKETS
        flat: list[str] = []
        with translated("listing a tenant's subscriptions"):
            while bucket < RECORD_BUCKETS and len(flat) < 2 * count:
                keys = range(bucket, min(bucket + BUCKETS_PER_READ, RECORD_BUCKETS))
                passed, inner, found = await self._tenant_page(
                    keys=[self.keys.records(b) for b in keys],
                    args=read_scripts.TENANT_PAGE.args(tenant=tenant, wanted=count, cursor=within),
                )
                flat += found
                bucket, within = bucket + int(passed), int(inner)
        # A boolean query's later alternatives are records of their own, not subscriptions.
        subs = [
            unpack_record(i, v)
            for i, v in zip(flat[::2], flat[1::2], strict=True)
            if PART_SEPARATOR not in i
        ]
        return (0 if bucket >= RECORD_BUCKETS else within * RECORD_BUCKETS + bucket), subs

    async def signing_secrets_of(self, sub_ids: Iterable[str]) -> dict[str, list[str] | None]:
        """The secrets to sign each subscription's messages with now, the previous one too during
        its grace period (None: the subscription no longer exists), in one round trip."""
        found = await self.signing_secrets_until(sub_ids)
        return {sub_id: None if entry is None else entry[0] for sub_id, entry in found.items()}

    async def signing_secrets_until(
        self, sub_ids: Iterable[str]
    ) -> dict[str, tuple[list[str], float] | None]:
        """As :meth:`signing_secrets_of`, each with the time (Unix seconds) until which they are
        the ones to sign with: the end of the grace period when a previous secret is among them,
        else never (infinity) unless rotated, which moves :meth:`secrets_epoch`."""
        ids = list(dict.fromkeys(sub_ids))
        with translated("reading signing secrets"):
            values = await self.packed(ids)
        now = time.time()
        found: dict[str, tuple[list[str], float] | None] = {}
        for sub_id, value in zip(ids, values, strict=True):
            if value is None:
                found[sub_id] = None
                continue
            secret, previous, until = secrets_of_record(value)
            secrets = [secret] if secret else []
            valid_until = math.inf
            if previous and until > now:
                secrets.append(previous)
                valid_until = until
            found[sub_id] = (secrets, valid_until)
        return found

    async def secrets_epoch(self) -> str:
        """A value that changes whenever a signing secret is rotated."""
        with translated("reading the secrets epoch"):
            return str(await self.client.get(self.keys.secrets_epoch) or "0")


class SubscriptionStore(SubscriptionReads):
    """Subscription records and their changes, each an atomic script that keeps the word maps."""

    def __init__(
        self,
        client: Any,
        keys: Keys,
        events_max: int = EVENTS_MAX,
        replication: Replication = NO_REPLICAS,
    ) -> None:
        super().__init__(client, keys)
        self.events_max = events_max
        self.replication = replication
        self._add_many = client.register_script(scripts.ADD_MANY)
        self._delete_many = client.register_script(scripts.DELETE_MANY)
        self._move_many = client.register_script(scripts.MOVE_MANY)
        self._add_pattern = client.register_script(scripts.ADD_PATTERN)
        self._rotate = client.register_script(scripts.ROTATE)
        self._delete_pattern = client.register_script(scripts.DELETE_PATTERN)
        self._move_pattern = client.register_script(scripts.MOVE_PATTERN)

    async def add(
        self, sub: Subscription, tenant_limit: int = 1_000_000, window: str = "0 0", others: int = 0
    ) -> str:
        """Store a subscription and announce it; returns the event id.

        A subscription was placed for the mapping ``window``; if the window moved meanwhile, nothing
        is stored and StaleMapping is raised (place it again). Raises
        ValueError on a duplicate id and LimitExceeded when the tenant holds ``tenant_limit``
        subscriptions already (``others`` of them in other shards).
        """
        if not sub.is_pattern:
            [answer] = await self.add_many([sub], tenant_limit, window, {sub.tenant: others})
            if isinstance(answer, BaseException):
                raise answer
            return answer
        keys, args = add_pattern_call(
            self.keys, self.events_max, sub, tenant_limit - others, window
        )
        with translated("storing a subscription"):
            event_id = await self.replication.run_script(
                self.client, self._add_pattern, keys, args, "storing a subscription"
            )
        return _added(sub, event_id, tenant_limit, window)

    async def add_many(
        self,
        subs: Sequence[Subscription],
        tenant_limit: int = 1_000_000,
        window: str = "0 0",
        others: dict[str, int] | None = None,
    ) -> list[str | BaseException]:
        """Store keyword subscriptions in order, in one script (``ADD_MANY``) and one round trip,
        announced by one event for the batch.

        Each one is stored or refused on its own: the answer is, in order, each one's event id
        (the batch's) or the error :meth:`add` would have raised for it (LimitExceeded,
        ValueError for an id that exists), or StaleMapping for every one when the window moved.
        ``others``: how many subscriptions each tenant holds in other shards.
        """
        if not subs:
            return []
        others = others or {}
        if any(sub.is_pattern for sub in subs):
            raise TypeError("patterns are added one by one (each needs the anchors before it)")
        room = {sub.tenant: tenant_limit - others.get(sub.tenant, 0) for sub in subs}
        keys, args = bulk.add_many_call(self.keys, self.events_max, subs, window, room)
        with translated("storing subscriptions"):
            reply = await self.replication.run_script(
                self.client, self._add_many, keys, args, "storing subscriptions"
            )
        return bulk.add_many_answers(reply, subs, tenant_limit, window)

    async def delete(self, sub_id: str) -> tuple[Subscription, str]:
        """Delete a subscription; returns it and the event id. Raises NotFound."""
        for _ in range(5):
            sub = await self.get(sub_id)
            with translated("deleting a subscription"):
                event_id = await self._delete_as_read(sub)
            if event_id:
                return sub, event_id
            # The record changed between the read and the script (deleted or moved): look again.
        raise StoreUnavailable(f"subscription {sub_id} kept changing while being deleted")

    async def _delete_as_read(self, sub: Subscription) -> str | None:
        """Delete ``sub`` if its record's placements are still those read; the event id, or
        None if it changed or went meanwhile."""
        if not sub.is_pattern:
            keys, args = bulk.delete_many_call(self.keys, self.events_max, [sub])
            reply = await self.replication.run_script(
                self.client, self._delete_many, keys, args, "deleting a subscription"
            )
            event_id, [code] = orjson.loads(reply)
            return str(event_id) if code == 1 else None
        keys, args = delete_pattern_call(self.keys, self.events_max, sub)
        event_id = await self.replication.run_script(
            self.client, self._delete_pattern, keys, args, "deleting a subscription"
        )
        return str(event_id) if event_id else None

    async def delete_with_alternatives(self, sub_id: str) -> tuple[Subscription, str, set[int]]:
        """Delete a subscription and, for a boolean query, its other alternatives' records:
        later ones first and its own record last, so that a failure part-way leaves it listed
        and deletable again, never alternatives without it. Returns it, the last event id and
        every matcher that held one of the records. Raises NotFound."""
        others = [part_id(sub_id, k) for k in range(1, MAX_ALTERNATIVES)]
        with translated("looking for a subscription's alternatives"):
            pipe = self.client.pipeline(transaction=False)
            for other in others:
                pipe.hexists(self.keys.record_of(other), other)
            present = [other for other, n in zip(others, await pipe.execute(), strict=True) if n]
        matchers: set[int] = set()
        for other in reversed(present):
            try:
                gone, _ = await self.delete(other)
            except NotFound:  # deleted meanwhile
                continue
            matchers.update(gone.matchers)
        sub, event_id = await self.delete(sub_id)
        matchers.update(sub.matchers)
        return sub, event_id, matchers

    async def delete_many(self, sub_ids: Sequence[str]) -> tuple[str | None, set[int]]:
        """:meth:`delete_with_alternatives` for many subscriptions: their records read in one
        round trip (a boolean query's alternatives in a second), then the alternatives deleted
        in one script (``DELETE_MANY``) and the subscriptions in another, each announced by one
        event: as one at a time, no subscription goes before its alternatives. A pattern is
        deleted by its own script, and so is a record that changed since it was read; an id
        already gone is passed over. Returns the last event id (None if nothing was deleted)
        and every matcher that held one of the records."""
        ids = list(dict.fromkeys(sub_ids))
        with translated("reading subscriptions to delete"):
            found = await self.records_of(ids)
            # A boolean query's alternatives, and those of an id already gone: one deleted alone
            # meanwhile leaves its alternatives, which go now.
            boolean = [
                i
                for i, sub in zip(ids, found, strict=True)
                if sub is None or has_operators(sub.query)
            ]
            others = [part_id(i, k) for i in boolean for k in range(MAX_ALTERNATIVES - 1, 0, -1)]
            alternatives = await self.records_of(others)
        events: list[str] = []
        matchers: set[int] = set()
        for records in (alternatives, found):
            subs = [sub for sub in records if sub is not None]
            keywords = [sub for sub in subs if not sub.is_pattern]
            again = [sub for sub in subs if sub.is_pattern]
            if keywords:
                keys, args = bulk.delete_many_call(self.keys, self.events_max, keywords)
                with translated("deleting subscriptions"):
                    reply = await self.replication.run_script(
                        self.client, self._delete_many, keys, args, "deleting subscriptions"
                    )
                event_id, codes = orjson.loads(reply)
                events += [event_id] if event_id else []
                for sub, code in zip(keywords, codes, strict=True):
                    if code == 1:
                        matchers.update(sub.matchers)
                    elif code == 0:  # moved since it was read
                        again.append(sub)
            for sub in again:
                try:
                    gone, event_id = await self.delete(sub.id)
                except NotFound:
                    continue
                events.append(event_id)
                matchers.update(gone.matchers)
        return max(events, key=event_order, default=None), matchers

    async def move(self, sub: Subscription, placements: Sequence[Placement]) -> str | None:
        """Re-place a subscription; the event id, or None if it changed meanwhile."""
        [event_id] = await self.move_many([(sub, placements)])
        return event_id

    async def move_many(
        self, moves: Sequence[tuple[Subscription, Sequence[Placement]]]
    ) -> list[str | None]:
        """:meth:`move` for many subscriptions: keyword records in one script (``MOVE_MANY``,
        one event for them), patterns by a script each, all in one round trip. Each move stays
        independent: one that changed meanwhile gets None and the others still happen."""
        if not moves:
            return []
        keywords = [k for k, (sub, _) in enumerate(moves) if not sub.is_pattern]
        patterns = [k for k, (sub, _) in enumerate(moves) if sub.is_pattern]
        pipe = self.client.pipeline(transaction=False)
        if keywords:
            keys, args = bulk.move_many_call(
                self.keys, self.events_max, [moves[k] for k in keywords]
            )
            await queue_script(pipe, self._move_many, keys, args)
        for k in patterns:
            keys, args = move_pattern_call(self.keys, self.events_max, *moves[k])
            await queue_script(pipe, self._move_pattern, keys, args)
        with translated("moving subscriptions"):
            results = await self.replication.execute(pipe, self.keys.events, "moving subscriptions")
        answers: list[str | None] = [None] * len(moves)
        if keywords:
            event_id, codes = orjson.loads(results.pop(0))
            for k, code in zip(keywords, codes, strict=True):
                answers[k] = event_id if code == 1 else None
        for k, event_id in zip(patterns, results, strict=True):
            answers[k] = str(event_id) if event_id else None
        return answers

    async def rotate_secret(self, sub_id: str, secret: str, previous_until: float) -> None:
        """Make ``secret`` the signing secret; the old one stays valid until ``previous_until``."""
        for _ in range(5):
            with translated("reading a subscription"):
                [value] = await self.packed([sub_id])
            if value is None:
                break
            sub = unpack_record(sub_id, value)
            rotated = pack_record(sub._replace(secret=secret), sub.secret, previous_until)
            with translated("rotating a signing secret"):
                done = await self._rotate(
                    keys=[self.keys.record_of(sub_id), self.keys.secrets_epoch],
                    args=scripts.ROTATE.args(id=sub_id, value_read=value, new_value=rotated),
                )
            if done is None:
                break
            if done:
                return
        else:
            raise StoreUnavailable(f"subscription {sub_id} kept changing while being rotated")
        raise NotFound(f"no subscription with id {sub_id!r}")


def _added(sub: Subscription, event_id: Any, tenant_limit: int, window: str) -> str:
    """The event id an add script answered, or the error its refusal means."""
    if event_id == -1:
        raise StaleMapping(f"the mapping window is no longer {window!r}")
    if event_id == 0:
        raise over_limit(sub.tenant, tenant_limit)
    if not event_id:
        raise ValueError(f"subscription id {sub.id} already exists")
    return str(event_id)
