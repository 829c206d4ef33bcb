"""A batch of subscriptions to register, and what its idempotency keys stored before.

A client may give each subscription a key of its own. The key fixes the subscription's id
(:func:`keyed_id`), so a repeated request (a retry, an import resumed after an interruption) finds
the records the first one stored, in one command, and stores only what is missing: no duplicate,
and no table of keys to keep in Redis. A key given again for a different subscription is a
Conflict.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Collection, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import NamedTuple

from wordcast.errors import Conflict, LimitExceeded, StoreUnavailable
from wordcast.query.boolean import BooleanQuery, part_id, part_ids
from wordcast.services.router.locking import locked
from wordcast.services.router.subscription_placer import QueryItem, Stored, SubscriptionPlacer
from wordcast.storage import Store
from wordcast.storage.events import EventFollower
from wordcast.storage.records import Subscription


class BatchItem(NamedTuple):
    """One subscription of a batch: kind "query" or "pattern", its text, where to deliver, the
    shared stream ("" for the tenant's own publications), the client's idempotency key, and its
    tag."""

    kind: str
    text: str
    callback_url: str
    stream: str = ""
    key: str | None = None
    tag: str = ""


def keyed_id(tenant: str, key: str) -> str:
    """The id of the subscription a tenant's idempotency key creates: the same key gives the
    same id, so a repeated request finds what the first one stored; tenants cannot collide."""
    return hashlib.sha256(f"{tenant}\0{key}".encode()).hexdigest()[:32]


def parts(checked: BooleanQuery | str) -> int:
    """Records an item is stored as: one per alternative of a query, one for a pattern."""
    return len(checked.clauses) if isinstance(checked, BooleanQuery) else 1


@dataclass
class Existing:
    """What earlier requests with a batch's idempotency keys stored."""

    ids: set[str]  # record ids stored already, alternatives included
    first: dict[str, Subscription] = field(default_factory=dict)  # their records

    def records_to_store(
        self, ids: Sequence[str | None], terms_or_anchors: Sequence[BooleanQuery | str]
    ) -> int:
        """How many records the batch adds (what counts against the tenant's quota)."""
        return sum(
            sum(1 for part in range(parts(checked)) if part_id(sub_id, part) not in self.ids)
            if sub_id is not None
            else parts(checked)
            for sub_id, checked in zip(ids, terms_or_anchors, strict=True)
        )


def check_quota(tenant: str, holds: int, items: int, records: int, limit: int) -> None:
    """LimitExceeded unless a tenant that holds ``holds`` records may add ``records`` more (each
    alternative of a boolean query is a record and counts)."""
    if records and holds + records > limit:
        more = f"{items} more" if records == items else f"{records} more records"
        raise LimitExceeded(
            f"tenant {tenant!r} holds {holds} subscriptions and the limit is {limit}: "
            f"{more} do not fit; nothing was stored"
        )


async def existing(
    store: Store,
    items: Sequence[BatchItem],
    ids: Sequence[str | None],
    terms_or_anchors: Sequence[BooleanQuery | str],
    tenant: str,
) -> Existing:
    """What earlier requests with the same keys (``ids``: :func:`keyed_id` or None) stored;
    Conflict if a key made a different subscription than the one now asked for under it."""
    wanted = [
        record
        for sub_id, checked in zip(ids, terms_or_anchors, strict=True)
        if sub_id is not None
        for record in part_ids(sub_id, parts(checked))
    ]
    found = await store.subscriptions.tenant_holds(tenant, wanted)
    stored = Existing({record for record, there in zip(wanted, found, strict=True) if there})
    for index, (item, sub_id) in enumerate(zip(items, ids, strict=True)):
        if sub_id is None or sub_id not in stored.ids:
            continue
        sub = await store.subscriptions.get(sub_id)
        if (sub.pattern or sub.query, sub.callback_url, sub.stream, sub.tag) != (
            item.text,
            item.callback_url,
            item.stream,
            item.tag,
        ):
            raise Conflict(
                f"subscription {index}: the key {item.key!r} made a different subscription "
                f"({sub.id}); nothing was stored"
            )
        stored.first[sub_id] = sub
    return stored


async def store_in_order(
    placer: SubscriptionPlacer,
    follower: EventFollower,
    items: Sequence[BatchItem],
    terms_or_anchors: Sequence[BooleanQuery | str],
    ids: Sequence[str | None],
    stored_ids: Collection[str],
    tenant: str,
    added: list[Stored],
) -> list[str | None]:
    """Store the items in order, each run of queries in bulk, each pattern on its own; returns
    each item's subscription id (what a key stored before keeps its keyed id)."""
    first_ids = list(ids)
    index = 0
    while index < len(items):
        item, checked = items[index], terms_or_anchors[index]
        if isinstance(checked, BooleanQuery):
            run = []
            while index < len(items) and isinstance(terms_or_anchors[index], BooleanQuery):
                run.append(index)
                index += 1
            queries = [
                QueryItem(items[i].text, _query(terms_or_anchors[i]), items[i].callback_url,
                          items[i].stream, ids[i], i, items[i].tag)
                for i in run
            ]  # fmt: skip
            made = await placer.add_queries(queries, tenant, added, stored_ids)
            for i, sub_id in zip(run, made, strict=True):
                first_ids[i] = sub_id
            continue
        if ids[index] not in stored_ids:
            try:
                sub, event_id = await placer.add_pattern(
                    item.text, checked, item.callback_url, tenant, item.stream, ids[index], item.tag
                )
            except (StoreUnavailable, LimitExceeded) as exc:
                raise type(exc)(f"subscription {index}: {exc}") from exc
            except ValueError as exc:  # its keyed id was stored meanwhile: a concurrent retry
                raise Conflict(
                    f"subscription {index}: another request with the key {item.key!r} stored it "
                    "meanwhile; send this one again to be answered with it"
                ) from exc
            added.append((sub, event_id))
            first_ids[index] = sub.id
            # The next pattern with this anchor should see which matcher now owns it.
            await follower.catch_up(until=event_id)
        index += 1
    return first_ids


def _query(checked: BooleanQuery | str) -> BooleanQuery:
    assert isinstance(checked, BooleanQuery)
    return checked


def keys_locked(store: Store, keyed: Sequence[str]) -> AbstractAsyncContextManager[None]:
    """Hold the locks of the keyed subscription ids ``keyed`` (:mod:`wordcast.storage.locks`)
    for the block, waiting while another request holds one (:func:`.locking.locked`)."""
    if not keyed:
        return contextlib.nullcontext()
    names = [f"key:{sub_id}" for sub_id in keyed]
    return locked(
        lambda token, ttl_ms: store.locks.take(names, token, ttl_ms, shared=False),
        lambda token: store.locks.give_back(names, token),
        "another request with "
        + ("one of these keys" if len(keyed) > 1 else "this key")
        + " has been registering",
    )
