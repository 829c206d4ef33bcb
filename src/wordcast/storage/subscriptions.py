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
from wordcast.routing.placement import Placement, encode, matchers_of
from wordcast.storage import bulk, scripts
from wordcast.storage.bulk import over_limit
from wordcast.storage.keys import Keys
from wordcast.storage.records import Subscription, event_order, subscription_from_fields
from wordcast.storage.redis import NO_REPLICAS, Replication, queue_script, translated

# The event stream is trimmed to about this many events. Followers read it within milliseconds;
# one further behind than this (a matcher restarting under a large import) finds its position
# trimmed away and loads a snapshot again (EventFollower). Each event holds its subscription's
# fields, about 180 bytes in Redis: 200,000 is some 36 MB whatever the number of subscriptions.
EVENTS_MAX = 200_000


class SubscriptionReads:
    """Reads of subscription records: one, a tenant's, the secrets to sign with; and the keys
    each record's scripts touch."""

    def __init__(self, client: Any, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    async def get(self, sub_id: str) -> Subscription:
        with translated("reading a subscription"):
            fields = await self.client.hgetall(self.keys.sub(sub_id))
        if not fields:
            raise NotFound(f"no subscription with id {sub_id!r}")
        return subscription_from_fields(sub_id, fields)

    async def records_of(self, sub_ids: Sequence[str]) -> list[dict[str, str]]:
        """Each record's fields, in one round trip ({} for one not there)."""
        if not sub_ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        for sub_id in sub_ids:
            pipe.hgetall(self.keys.sub(sub_id))
        records: list[dict[str, str]] = await pipe.execute()
        return records

    async def count(self) -> int:
        """How many subscriptions are stored, over every matcher."""
        total = 0
        with translated("counting subscriptions"):
            async for key in self.client.scan_iter(match=self.keys.matcher_subs("*"), count=1000):
                total += await self.client.scard(key)
        return total

    async def tenant_holds(self, tenant: str, sub_ids: Sequence[str]) -> list[bool]:
        """Whether each id is one of the tenant's subscriptions, in one command."""
        if not sub_ids:
            return []
        with translated("checking a tenant's subscriptions"):
            found = await self.client.smismember(self.keys.tenant_subs(tenant), list(sub_ids))
        return [bool(member) for member in found]

    async def tenant_count(self, tenant: str) -> int:
        """How many subscriptions a tenant holds."""
        with translated("counting a tenant's subscriptions"):
            return int(await self.client.scard(self.keys.tenant_subs(tenant)))

    async def tenant_subscriptions(
        self, tenant: str, cursor: int = 0, count: int = 100
    ) -> tuple[int, list[Subscription]]:
        """One page of a tenant's subscriptions and the cursor of the next (0 at the end)."""
        with translated("listing a tenant's subscriptions"):
            cursor, ids = await self.client.sscan(
                self.keys.tenant_subs(tenant), cursor=cursor, count=count
            )
            pipe = self.client.pipeline(transaction=False)
            for sub_id in ids:
                pipe.hgetall(self.keys.sub(sub_id))
            records = await pipe.execute() if ids else []
        # A boolean query's later alternatives are records of their own, not subscriptions.
        subs = [
            subscription_from_fields(i, f)
            for i, f in zip(ids, records, strict=True)
            if f and PART_SEPARATOR not in i
        ]
        return int(cursor), subs

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
        pipe = self.client.pipeline(transaction=False)
        for sub_id in ids:
            pipe.hmget(self.keys.sub(sub_id), ["secret", "previous_secret", "previous_until"])
        with translated("reading signing secrets"):
            replies = await pipe.execute()
        now = time.time()
        found: dict[str, tuple[list[str], float] | None] = {}
        for sub_id, (secret, previous, until) in zip(ids, replies, strict=True):
            if secret is None:
                found[sub_id] = None
                continue
            secrets = [secret] if secret else []
            valid_until = math.inf
            if previous and until and float(until) > now:
                secrets.append(previous)
                valid_until = float(until)
            found[sub_id] = (secrets, valid_until)
        return found

    async def secrets_epoch(self) -> str:
        """A value that changes whenever a signing secret is rotated."""
        with translated("reading the secrets epoch"):
            return str(await self.client.get(self.keys.secrets_epoch) or "0")

    def _matcher_keys(self, matchers: Iterable[int]) -> list[str]:
        keys: list[str] = []
        for matcher in matchers:
            keys += [self.keys.matcher_subs(matcher), self.keys.matcher_words(matcher)]
        return keys

    def _keys(self, sub: Subscription) -> list[str]:
        if sub.is_pattern:
            matcher = sub.matcher
            return [
                self.keys.sub(sub.id),
                self.keys.matcher_subs(matcher),
                self.keys.matcher_anchors(matcher),
                self.keys.pattern_load,
                self.keys.events,
                self.keys.tenant_subs(sub.tenant),
                self.keys.window,
            ]
        fixed = [self.keys.sub(sub.id), self.keys.words, self.keys.events]
        fixed += [self.keys.tenant_subs(sub.tenant), self.keys.window]
        return fixed + self._matcher_keys(sub.matchers)


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
        self._add = client.register_script(scripts.ADD)
        self._add_many = client.register_script(scripts.ADD_MANY)
        self._delete_many = client.register_script(scripts.DELETE_MANY)
        self._move_many = client.register_script(scripts.MOVE_MANY)
        self._delete = client.register_script(scripts.DELETE)
        self._add_pattern = client.register_script(scripts.ADD_PATTERN)
        self._rotate = client.register_script(scripts.ROTATE)
        self._delete_pattern = client.register_script(scripts.DELETE_PATTERN)
        self._move = client.register_script(scripts.MOVE)
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
        script, keys, args = self._add_call(sub, tenant_limit - others, window)
        with translated("storing a subscription"):
            event_id = await self.replication.run_script(
                self.client, script, keys, args, "storing a subscription"
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
        keys, payload = bulk.add_many_call(self.keys, self.events_max, subs, window, room)
        with translated("storing subscriptions"):
            reply = await self.replication.run_script(
                self.client, self._add_many, keys, [payload], "storing subscriptions"
            )
        return bulk.add_many_answers(reply, subs, tenant_limit, window)

    def _add_call(
        self, sub: Subscription, tenant_limit: int, window: str
    ) -> tuple[Any, list[str], list[str | int]]:
        if not sub.is_pattern and not sub.placements:
            sub = sub._replace(placements=(Placement(sub.matcher, 0),))
        keys = self._keys(sub)
        if sub.is_pattern:
            script = self._add_pattern
            args: list[str | int] = [sub.id, sub.matcher, sub.pattern, sub.anchor]
        else:
            script = self._add
            args = [sub.id, sub.matcher, sub.query, " ".join(sub.terms)]
        args += [sub.callback_url, repr(sub.created), self.events_max, sub.tenant, tenant_limit]
        args.append(sub.secret)
        if sub.is_pattern:
            args += [window, sub.stream]
        else:
            args += [encode(sub.placements), window, sub.stream, *sub.matchers]
        return script, keys, args

    def _delete_call(self, sub: Subscription) -> tuple[Any, list[str], list[str | int]]:
        """The script deleting ``sub`` as read: it refuses (returns false) if the record's
        placements changed since."""
        expected = encode(sub.placements) if sub.placements else ""
        args: list[str | int] = [sub.id, expected, self.events_max, *sub.matchers]
        if sub.is_pattern:
            return self._delete_pattern, self._pattern_keys(sub, sub.matchers), args
        return self._delete, self._keys(sub), args

    async def delete(self, sub_id: str) -> tuple[Subscription, str]:
        """Delete a subscription; returns it and the event id. Raises NotFound."""
        for _ in range(5):
            sub = await self.get(sub_id)
            script, keys, args = self._delete_call(sub)
            with translated("deleting a subscription"):
                event_id = await self.replication.run_script(
                    self.client, script, keys, args, "deleting a subscription"
                )
            if event_id:
                return sub, str(event_id)
            # The record changed between the read and the script (deleted or moved): look again.
        raise StoreUnavailable(f"subscription {sub_id} kept changing while being deleted")

    async def delete_with_alternatives(self, sub_id: str) -> tuple[Subscription, str, set[int]]:
        """Delete a subscription and, for a boolean query, its other alternatives' records:
        later ones first and its own record last, so that a failure part-way leaves it listed
        and deletable again, never alternatives without it. Returns it, the last event id and
        every matcher that held one of the records. Raises NotFound."""
        others = [part_id(sub_id, k) for k in range(1, MAX_ALTERNATIVES)]
        with translated("looking for a subscription's alternatives"):
            pipe = self.client.pipeline(transaction=False)
            for other in others:
                pipe.exists(self.keys.sub(other))
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
            boolean = [
                i for i, f in zip(ids, found, strict=True) if has_operators(f.get("query", ""))
            ]
            others = [part_id(i, k) for i in boolean for k in range(MAX_ALTERNATIVES - 1, 0, -1)]
            alternatives = await self.records_of(others)
        events: list[str] = []
        matchers: set[int] = set()
        for records in (zip(others, alternatives, strict=True), zip(ids, found, strict=True)):
            subs = [subscription_from_fields(i, fields) for i, fields in records if fields]
            keywords = [sub for sub in subs if not sub.is_pattern]
            again = [sub for sub in subs if sub.is_pattern]
            if keywords:
                keys, payload = bulk.delete_many_call(self.keys, self.events_max, keywords)
                with translated("deleting subscriptions"):
                    reply = await self.replication.run_script(
                        self.client, self._delete_many, keys, [payload], "deleting subscriptions"
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

    def _pattern_keys(self, sub: Subscription, matchers: Iterable[int]) -> list[str]:
        keys = [self.keys.sub(sub.id), self.keys.events, self.keys.pattern_load]
        keys.append(self.keys.tenant_subs(sub.tenant))
        for matcher in matchers:
            keys += [self.keys.matcher_subs(matcher), self.keys.matcher_anchors(matcher)]
        return keys

    def _move_call(
        self, sub: Subscription, placements: Sequence[Placement]
    ) -> tuple[Any, list[str], list[str | int]]:
        before, after = set(sub.matchers), set(matchers_of(placements))
        leaving, joining = sorted(before - after), sorted(after - before)
        open_ = [p.matcher for p in placements if p.is_open] or [placements[-1].matcher]
        expected = encode(sub.placements) if sub.placements else ""
        args: list[str | int] = [sub.id, expected, encode(placements)]
        args += [open_[0], len(leaving), self.events_max]
        if sub.is_pattern:
            keys = self._pattern_keys(sub, [*leaving, *joining])
            return self._move_pattern, keys, [*args, *leaving, *joining]
        keys = [self.keys.sub(sub.id), self.keys.events, *self._matcher_keys(leaving)]
        keys += self._matcher_keys(joining)
        return self._move, keys, [*args, *leaving, *joining]

    async def move(self, sub: Subscription, placements: Sequence[Placement]) -> str | None:
        """Re-place a subscription; the event id, or None if it changed meanwhile."""
        script, keys, args = self._move_call(sub, placements)
        with translated("moving a subscription"):
            event_id = await self.replication.run_script(
                self.client, script, keys, args, "moving a subscription"
            )
        return str(event_id) if event_id else None

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
            keys, payload = bulk.move_many_call(
                self.keys, self.events_max, [moves[k] for k in keywords]
            )
            await queue_script(pipe, self._move_many, keys, [payload])
        for k in patterns:
            script, keys, args = self._move_call(*moves[k])
            await queue_script(pipe, script, keys, args)
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
        with translated("rotating a signing secret"):
            done = await self._rotate(
                keys=[self.keys.sub(sub_id), self.keys.secrets_epoch], args=[secret, previous_until]
            )
        if not done:
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
