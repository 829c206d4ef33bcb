"""Records of the layout before packing (a hash per record, id sets per tenant and matcher),
as the last version wrote them, migrated without loss on first use (issue 41)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from wordcast.routing.placement import encode
from wordcast.storage import Store
from wordcast.storage.records import secrets_of_record
from wordcast.storage.redis import connect

# Written by the version before packing (its own scripts, through SubscriptionStore): keyword
# subscriptions of two tenants, a boolean query's second alternative, one on two matchers, a
# rotated secret, a stream's, two patterns (one moved by a change of matchers). The event
# stream is left out; each test starts one, as every namespace of that version had.
BEFORE = orjson.loads(
    (Path(__file__).parents[1] / "data" / "layout_before_packing.json").read_bytes()
)
RECORDS = {k.removeprefix("sub:"): v["value"] for k, v in BEFORE.items() if k.startswith("sub:")}


async def _load(client: Any, namespace: str) -> None:
    for suffix, entry in BEFORE.items():
        key, value = f"{namespace}:{suffix}", entry["value"]
        if entry["type"] == "hash":
            await client.hset(key, mapping=value)
        elif entry["type"] == "set":
            await client.sadd(key, *value)
        else:
            await client.set(key, value)
    await client.xadd(f"{namespace}:events", {"op": "add", "sub": "kw1"})


async def _old_keys(client: Any, namespace: str) -> list[str]:
    found = []
    for pattern in ("sub:*", "matcher:*:subs", "tenant:*:subs"):
        found += [k async for k in client.scan_iter(match=f"{namespace}:{pattern}")]
    return found


def test_records_of_the_layout_before_are_migrated_without_loss(
    redis_url: str, namespace: str
) -> None:
    async def scenario() -> None:
        client = connect(redis_url)
        await _load(client, namespace)
        # Two processes open the namespace at once: each record moves, and is counted, once.
        stores = [Store(connect(redis_url), namespace) for _ in range(2)]
        await asyncio.gather(*(store.shards.keys() for store in stores))
        store = stores[0]
        assert await _old_keys(client, namespace) == []

        for sub_id, fields in RECORDS.items():
            sub = await store.subscriptions.get(sub_id)
            assert sub.query == fields.get("query", "")
            assert " ".join(sub.terms) == fields["terms"]
            assert (sub.pattern, sub.anchor) == (
                fields.get("pattern", ""),
                fields.get("anchor", ""),
            )
            assert sub.callback_url == fields["callback_url"]
            assert (sub.matcher, sub.tenant, sub.stream) == (
                int(fields["matcher"]),
                fields["tenant"],
                fields["stream"],
            )
            assert repr(sub.created) == fields["created"]
            placements = encode(sub.placements) if sub.placements else ""
            assert placements == fields.get("placements", "")
        [rotated] = await (await store.subscriptions.parts())[0].packed(["kw4"])
        assert rotated is not None
        assert secrets_of_record(rotated) == ("whsec_two", "whsec_one", 1795929999.0)

        for matcher in (0, 1):
            old = set(BEFORE[f"matcher:{matcher}:subs"]["value"])
            placed = [s async for page in store.word_maps.placed_on(matcher) for s in page]
            assert {s.id for s in placed} == old
            assert await store.membership.held_by(matcher) == len(old)
        for tenant in ("acme", "zeta"):
            old = set(BEFORE[f"tenant:{tenant}:subs"]["value"])
            assert await store.subscriptions.tenant_count(tenant) == len(old)
            _, listed = await store.subscriptions.tenant_subscriptions(tenant, 0, 1000)
            assert {s.id for s in listed} == {i for i in old if "~" not in i}
        assert await store.word_maps.word_map(1) == {
            w: int(c) for w, c in BEFORE["matcher:1:words"]["value"].items()
        }

        # The migrated records agree with the word maps they left: deleting them all empties both.
        await store.subscriptions.delete_many(["kw1", "kw2", "kw3", "kw4"])
        for pattern in ("pat1", "pat2"):
            await store.subscriptions.delete(pattern)
        for matcher in (0, 1):
            assert await store.word_maps.word_map(matcher) == {}
            assert await store.word_maps.anchor_map(matcher) == {}
            assert await store.membership.held_by(matcher) == 0
        assert await store.word_maps.subscribed_words() == set()
        assert await store.word_maps.pattern_loads() == {}
        assert [await store.subscriptions.tenant_count(t) for t in ("acme", "zeta")] == [0, 0]
        for opened in stores:
            await opened.aclose()
        await client.aclose()

    asyncio.run(scenario())
