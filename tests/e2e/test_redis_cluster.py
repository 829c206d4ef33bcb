"""wordcast on a Redis Cluster (issue 11): ``wordcast up --redis-shards 3`` forms one from the
embedded redis-server, three masters and a replica each, and runs the whole cluster on it. A
master killed with SIGKILL while publications stream in is failed over to its replica; every match
of every acknowledged publication is delivered, judged by the brute-force oracle."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.helpers import (
    AUTH,
    Publisher,
    Receiver,
    RunningCluster,
    eventually,
    record_shards,
    start_cluster,
    stop_cluster,
    wordcast_cli,
)
from wordcast.client import RouterClient
from wordcast.corpus.workload import post_queries, sample_posts
from wordcast.query.analysis import analyse
from wordcast.storage import Store
from wordcast.storage.redis import connect_sync, slot_namespace
from wordcast.testing.bruteforce import match_pairs


def _redis_url(cluster: RunningCluster) -> str:
    found = [m[1] for line in cluster.output if (m := re.match(r"redis\s+(\S+)", line))]
    assert found, "wordcast up did not say its Redis URL"
    assert found[0].startswith("redis+cluster://127.0.0.1:"), found[0]
    return found[0]


def _master_of_namespace(url: str, namespace: str) -> tuple[int, int]:
    """(port, pid) of the master holding the namespace's slot (every key but the outboxes)."""
    return _master_of(url, f"{slot_namespace(namespace)}:events")


def _outbox_key(url: str, namespace: str, matcher: int) -> str:
    client = connect_sync(url)
    try:
        return str(client.hget(f"{slot_namespace(namespace)}:outbox-keys", str(matcher)))
    finally:
        client.close()


def _master_of(url: str, key: str) -> tuple[int, int]:
    """(port, pid) of the master holding ``key``."""
    client = connect_sync(url)
    try:
        port = int(client.get_node_from_key(key).port)
    finally:
        client.close()
    one = connect_sync(f"redis://127.0.0.1:{port}/0")
    try:
        return port, int(one.info("server")["process_id"])
    finally:
        one.close()


def test_up_refuses_a_cluster_of_too_few_shards() -> None:
    done = wordcast_cli("up", "--no-demo", "--redis-shards", "2", env={"REDIS_URL": ""})
    assert done.returncode != 0
    assert "--redis-shards must be at least 3" in done.stderr


@pytest.fixture(scope="module")
def sharded() -> Iterator[RunningCluster]:
    cluster = start_cluster("", f"sharded-{uuid.uuid4().hex[:6]}", args=["--redis-shards", "3"])
    yield cluster
    stop_cluster(cluster)


def _replica_of(master_port: int) -> int:
    """The pid of the master's replica."""
    master = connect_sync(f"redis://127.0.0.1:{master_port}/0")
    try:
        port = int(master.info("replication")["slave0"]["port"])
    finally:
        master.close()
    replica = connect_sync(f"redis://127.0.0.1:{port}/0")
    try:
        return int(replica.info("server")["process_id"])
    finally:
        replica.close()


def test_a_write_no_replica_confirms_is_refused_not_acknowledged(
    sharded: RunningCluster, receiver: Receiver
) -> None:
    """Redis replicates after answering: a write is acknowledged only once WAIT says a replica
    has it. With the replicas stopped, subscribing and publishing are refused (503) and say why;
    with them back, they succeed."""
    url = _redis_url(sharded)
    masters = {_master_of_namespace(url, sharded.namespace)[0]}
    masters |= {_master_of(url, _outbox_key(url, sharded.namespace, m))[0] for m in (0, 1)}
    replicas = [_replica_of(port) for port in sorted(masters)]
    api = httpx.Client(base_url=sharded.router_url, headers=AUTH, timeout=30)
    kept = api.post("/subscriptions", json={"query": "okapi", "callback_url": receiver.hook})
    assert kept.status_code == 201, kept.text
    for replica in replicas:
        os.kill(replica, signal.SIGSTOP)
    try:
        refused = api.post("/subscriptions", json={"query": "tapir", "callback_url": receiver.hook})
        assert refused.status_code == 503, refused.text
        assert "reached 0 of the 1 Redis replicas" in refused.text
        published = api.post("/publications", json={"id": "okapi-1", "text": "an okapi"})
        assert published.status_code == 503, published.text
    finally:
        for replica in replicas:
            os.kill(replica, signal.SIGCONT)
    offset = receiver.count()

    def published_again() -> bool:
        answer = api.post("/publications", json={"id": "okapi-1", "text": "an okapi"})
        return answer.status_code == 202

    eventually(published_again, 30, 0.5, "publishing again once the replica is back")
    eventually(
        lambda: (kept.json()["id"], "okapi-1") in receiver.pairs(offset), 30, 0.2, "the match"
    )


def test_the_outboxes_and_the_records_spread_over_the_masters(
    sharded: RunningCluster, receiver: Receiver
) -> None:
    """Each matcher's outbox (most of the traffic) has a slot of its own, on a master apart from
    the other's and from the namespace's, and the subscription records are sharded over the
    three masters: all three carry some of the load."""
    api = httpx.Client(base_url=sharded.router_url, headers=AUTH, timeout=30)
    mine = set()
    for word in ("heron", "egret", "ibis", "stork"):
        made = api.post("/subscriptions", json={"query": word, "callback_url": receiver.hook})
        assert made.status_code == 201, made.text
        mine.add(made.json()["id"])
    more = [{"query": f"plover{k}", "callback_url": receiver.hook} for k in range(40)]
    made = api.post("/subscriptions/batch", json={"subscriptions": more})
    assert made.status_code == 201, made.text
    mine |= {sub["id"] for sub in made.json()["subscriptions"]}
    client = connect_sync(_redis_url(sharded))
    try:
        shards = record_shards(client, slot_namespace(sharded.namespace))
        assert len({client.get_node_from_key(keys.events).name for keys in shards}) == 3
        held = [
            sum(int(client.hget(keys.matcher_counts, m) or 0) for m in (0, 1)) for keys in shards
        ]  # 44 records or more in three shards: none empty but once in 10^5
        assert all(held), held
        listed = api.get("/subscriptions", params={"limit": 30}).json()
        cursor, ids = listed["next_cursor"], [s["id"] for s in listed["subscriptions"]]
        while cursor:
            listed = api.get("/subscriptions", params={"limit": 30, "cursor": cursor}).json()
            cursor, ids = listed["next_cursor"], ids + [s["id"] for s in listed["subscriptions"]]
        assert len(set(ids)) == len(ids), "no subscription listed twice"
        assert mine <= set(ids), "the listing pages through every shard"
        keys = eventually(
            lambda: client.hgetall(f"{slot_namespace(sharded.namespace)}:outbox-keys"),
            30,
            0.2,
            "outbox keys",
        )
        assert sorted(keys) == ["0", "1"], keys
        masters = {
            client.get_node_from_key(key).name
            for key in [*keys.values(), f"{slot_namespace(sharded.namespace)}:events"]
        }
        assert len(masters) == 3, (keys, masters)
        offset = receiver.count()
        published = api.post(
            "/publications", json={"id": "birds", "text": "heron egret ibis stork"}
        )
        assert published.status_code == 202, published.text
        eventually(lambda: len(receiver.pairs(offset)) >= 4, 30, 0.2, "four matches")
        # Delivered, then acknowledged and deleted (just after the receiver has them).
        eventually(
            lambda: all(client.xlen(key) == 0 for key in keys.values()), 10, 0.2, "outboxes empty"
        )
    finally:
        client.close()


def test_a_namespace_from_before_the_records_were_sharded_keeps_them_in_its_slot(
    sharded: RunningCluster,
) -> None:
    """A new namespace gets a shard per master; one whose slot already holds an event stream
    (subscriptions stored before sharding) keeps one shard, so every record is still found."""
    url = _redis_url(sharded)

    async def shards(namespace: str) -> list[str]:
        store = Store.connect(url, namespace)
        try:
            return [keys.ns for keys in await store.shards.keys()]
        finally:
            await store.aclose()

    fresh, older = f"fresh-{uuid.uuid4().hex[:8]}", f"older-{uuid.uuid4().hex[:8]}"
    client = connect_sync(url)
    try:
        client.set(f"{slot_namespace(older)}:mapping:window", "2 2")
        assert len(asyncio.run(shards(fresh))) == 3
        client.xadd(f"{slot_namespace(older)}:events", {"op": "add", "sub": "kept"})
        assert asyncio.run(shards(older)) == [slot_namespace(older)]
        # A new namespace's shards get the window it had already.
        fresh_with_window = f"fresh-{uuid.uuid4().hex[:8]}"
        client.set(f"{slot_namespace(fresh_with_window)}:mapping:window", "2 3")
        prefixes = asyncio.run(shards(fresh_with_window))
        assert [client.get(f"{p}:mapping:window") for p in prefixes] == ["2 3"] * 3
    finally:
        client.close()


def test_a_master_killed_while_publishing_loses_no_acknowledged_match(
    sharded: RunningCluster, receiver: Receiver
) -> None:
    cluster = sharded
    url = _redis_url(cluster)
    posts = sample_posts(3_000, seed=11)
    queries = post_queries(posts, 400, seed=5, sizes=(1, 2, 2))

    async def subscribe() -> list[dict[str, object]]:
        async with RouterClient(cluster.router_url) as client:
            return await client.subscribe_many(queries, receiver.hook, progress=False)

    subscribed = {str(c["id"]): analyse(str(c["query"])) for c in asyncio.run(subscribe())}
    offset = receiver.count()
    # The master holding matcher 0's outbox: where acknowledged matches wait for delivery.
    outbox = _outbox_key(url, cluster.namespace, 0)
    port, pid = _master_of(url, outbox)

    publisher = Publisher(cluster.router_url, [(p.id, p.text) for p in posts])
    publisher.start()
    eventually(lambda: len(publisher.acknowledged) >= 1_000, 60, 0.05, "1,000 acknowledged")
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    publisher.join(180)
    assert not publisher.is_alive(), "the publications were not all acknowledged in 3 min"
    assert not publisher.unexpected, publisher.unexpected

    # A replica took over the slot, and the clients followed it unaided.
    moved_to, _ = _master_of(url, outbox)
    assert moved_to != port
    after = [t for t in publisher.acknowledged_at if t > killed_at]
    gap = after[0] - killed_at if after else float("inf")
    print(f"failover: service back {gap:.1f} s after the kill, {len(publisher.refusals)} refusals")
    assert gap <= 15, f"service back {gap:.1f} s after the kill ({publisher.refusals[-3:]})"

    acknowledged = set(publisher.acknowledged)
    expected = match_pairs(
        subscribed, {p.id: analyse(p.text) for p in posts if p.id in acknowledged}
    )
    eventually(
        lambda: expected <= set(receiver.pairs(offset)) and cluster.pending_deliveries() == 0,
        120,
        0.5,
        "every match of every acknowledged publication delivered",
    )
    delivered = {pair for pair in receiver.pairs(offset) if pair[0] in subscribed}
    assert delivered - expected == set(), "a delivery the oracle does not expect"
