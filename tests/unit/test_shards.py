"""The pure parts of sharding the subscription records: which shard an id lives in, event
positions over several shards, and the router's replica adding the shards' word maps up."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from wordcast.query.boolean import part_id
from wordcast.routing.placement import Placement
from wordcast.services.router.routing_table import RoutingTable
from wordcast.storage.events import ids_of, reached
from wordcast.storage.records import Subscription, SubscriptionEvent
from wordcast.storage.shards import latest, position_of, shard_of


def test_a_subscription_and_its_alternatives_share_a_shard_and_ids_spread_evenly() -> None:
    ids = [f"sub-{k}" for k in range(3_000)]
    assert {shard_of(i, 1) for i in ids} == {0}
    for sub_id in ids[:50]:
        assert shard_of(part_id(sub_id, 2), 3) == shard_of(sub_id, 3)
    counts = Counter(shard_of(i, 3) for i in ids)
    assert sorted(counts) == [0, 1, 2]
    assert max(counts.values()) < 1.1 * min(counts.values()), counts


def test_positions_merge_shard_by_shard_and_one_shard_keeps_plain_ids() -> None:
    assert position_of(0, "5-1", 1) == "5-1"
    assert position_of(1, "5-1", 3) == "0-0 5-1 0-0"
    assert latest(["0-0 9-0 0-0", None, "7-2 5-1 0-0", "0-0 10-0 3-3"]) == "7-2 10-0 3-3"
    assert latest(["4-0", "12-0", "9-9"]) == "12-0"  # compared as ids, not as text
    assert latest([None]) is None
    assert reached("7-2 10-0 3-3", "0-0 10-0 0-0")
    assert not reached("7-2 10-0 3-3", "0-0 10-1 0-0")
    assert ids_of("0-0", 3) == ["0-0", "0-0", "0-0"]  # a follower not started yet
    assert not reached("0-0", "0-0 0-0 1-0")


class _WordMaps:
    """Two shards' word maps, as Redis would hand them to a router starting up."""

    async def held_words_by_shard(self, matchers: int) -> list[dict[int, list[str]]]:
        return [{0: ["heron"], 1: []}, {0: ["heron", "ibis"], 1: ["ibis"]}]

    async def anchor_maps_by_shard(self, matchers: int) -> list[dict[int, list[str]]]:
        return [{0: ["stor"], 1: []}, {0: ["stor"], 1: []}]


class _Store:
    word_maps = _WordMaps()


def _event(shard: int, dropped: tuple[tuple[int, tuple[str, ...]], ...], **pattern: Any) -> Any:
    sub = Subscription("s", "q", ("heron",), "http://x/hook", 0, placements=(Placement(0, 0),))
    if pattern:
        sub = Subscription("p", "", (), "http://x/hook", 0, pattern="stor*", anchor="stor")
    return SubscriptionEvent("1-0", "del", sub, (), dropped=dropped, shard=shard, **pattern)


def test_a_word_dropped_in_one_shard_stays_routed_while_another_shard_holds_it() -> None:
    replica = RoutingTable()
    asyncio.run(replica.load(_Store(), 2))  # type: ignore[arg-type]
    assert replica.held.holders("heron") == [0]
    replica.apply([_event(0, ((0, ("heron",)),))])
    assert replica.held.holders("heron") == [0], "shard 1 still holds it on matcher 0"
    replica.apply([_event(1, ((0, ("heron", "ibis")),))])
    assert replica.held.holders("heron") == []
    assert replica.held.holders("ibis") == [1]

    replica.apply([_event(0, (), anchor_left=(0,))])
    assert replica.anchors.owners("stor") == {0}, "shard 1's pattern still anchors it there"
    replica.apply([_event(1, (), anchor_left=(0,))])
    assert replica.anchors.owners("stor") == set()
