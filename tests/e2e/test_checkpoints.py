"""A matcher's checkpoint, with real processes on a real Redis: a restart reads what it holds from
its checkpoint and replays only the changes since; a damaged checkpoint, or one older than the
event stream keeps, is passed over for a full load. Every phase is judged by the oracle."""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.support import (
    check_exact,
    delivered_after,
    publish_posts,
    restart_matcher,
    subscribe_terms,
)
from tests.helpers import AUTH, Receiver, RunningCluster, eventually, start_cluster, stop_cluster
from wordcast.corpus.workload import Post, post_queries, sample_posts
from wordcast.query.analysis import analyse
from wordcast.storage.redis import connect_sync
from wordcast.testing.bruteforce import match_pairs

POSTS = sample_posts(4_000, seed=41)


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("checkpoints")


@pytest.fixture(scope="module")
def one_matcher(redis_url: str, checkpoint_dir: Path) -> Iterator[RunningCluster]:
    # No periodic checkpoint: each test decides when one is written (the matcher stopping).
    env = {
        "WORDCAST_MATCHER_CHECKPOINT_DIR": str(checkpoint_dir),
        "WORDCAST_MATCHER_CHECKPOINT_EVERY_S": "3600",
    }
    cluster = start_cluster(redis_url, f"test-checkpoint-{uuid.uuid4().hex[:6]}", 1, env)
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


def _held(cluster: RunningCluster) -> dict[str, frozenset[str]]:
    """Every subscription the router lists, with its terms as the oracle reads its query."""
    held: dict[str, frozenset[str]] = {}
    with httpx.Client(base_url=cluster.router_url, headers=AUTH, timeout=30) as router:
        cursor = 0
        while True:
            page = router.get("/subscriptions", params={"cursor": cursor, "limit": 1000}).json()
            held |= {s["id"]: analyse(s["query"]) for s in page["subscriptions"]}
            cursor = page.get("next_cursor") or 0
            if not cursor:
                return held


def _changed_meanwhile(cluster: RunningCluster, receiver: Receiver, seed: int) -> None:
    """Subscribe 150 more and delete 50 of those held: changes a checkpoint does not have."""
    queries = post_queries(POSTS[:2_000], 150, seed=seed)
    subscribe_terms(cluster, queries, receiver.hook)
    gone = sorted(_held(cluster))[:50]
    with httpx.Client(base_url=cluster.router_url, headers=AUTH, timeout=30) as router:
        reply = router.post("/subscriptions/batch/delete", json={"ids": gone})
        assert reply.status_code == 200, reply.text


def _delivers_exactly(cluster: RunningCluster, receiver: Receiver, tag: str) -> None:
    held = _held(cluster)
    posts = [Post(f"{tag}:{p.id}", p.text) for p in POSTS[2_000:3_000]]
    expected = match_pairs(held, {p.id: analyse(p.text) for p in posts})
    assert expected, "the posts should match some subscriptions"
    offset = receiver.count()
    publish_posts(cluster, posts)
    check_exact(delivered_after(cluster, receiver, offset, len(expected)), expected)


def test_a_killed_matcher_starts_from_its_checkpoint_and_replays_the_changes_since(
    one_matcher: RunningCluster, receiver: Receiver
) -> None:
    subscribe_terms(one_matcher, post_queries(POSTS[:2_000], 300, seed=1), receiver.hook)
    stopped = restart_matcher(one_matcher, signal.SIGTERM)  # stopping writes its checkpoint
    assert stopped["loaded_from"] == "checkpoint"
    assert stopped["checkpoint_position"] == stopped["event_position"]

    _changed_meanwhile(one_matcher, receiver, seed=2)
    killed = restart_matcher(one_matcher, signal.SIGKILL)
    said = [line for line in one_matcher.output if "checkpoint is not used" in line]
    assert killed["loaded_from"] == "checkpoint", said
    assert killed["checkpoint_position"] == stopped["checkpoint_position"]
    assert killed["event_position"] != killed["checkpoint_position"], "the tail was replayed"
    assert killed["subscriptions"] == len(_held(one_matcher))
    _delivers_exactly(one_matcher, receiver, "after-kill")


def _checkpoint_then_change(cluster: RunningCluster, receiver: Receiver, seed: int) -> None:
    """A checkpoint of 100 more subscriptions (the matcher stopping), then changes after it."""
    subscribe_terms(cluster, post_queries(POSTS[:2_000], 100, seed=seed), receiver.hook)
    restart_matcher(cluster, signal.SIGTERM)
    _changed_meanwhile(cluster, receiver, seed=seed + 1)


def _loads_from_redis_after_a_kill(cluster: RunningCluster, receiver: Receiver, tag: str) -> None:
    stats = restart_matcher(cluster, signal.SIGKILL)
    assert stats["loaded_from"] == "redis"
    assert stats["subscriptions"] == len(_held(cluster))
    _delivers_exactly(cluster, receiver, tag)


def test_a_damaged_checkpoint_is_passed_over_for_a_full_load(
    one_matcher: RunningCluster, receiver: Receiver, checkpoint_dir: Path
) -> None:
    _checkpoint_then_change(one_matcher, receiver, seed=3)
    [path] = checkpoint_dir.glob(f"{one_matcher.namespace}-matcher-0.checkpoint")
    data = bytearray(path.read_bytes())
    data[data.index(b'[["') + 3] ^= 0x01  # one bit of an id: still JSON, now another id
    path.write_bytes(bytes(data))
    _loads_from_redis_after_a_kill(one_matcher, receiver, "after-damage")


def test_a_checkpoint_older_than_the_event_stream_keeps_is_passed_over(
    one_matcher: RunningCluster, receiver: Receiver, redis_url: str
) -> None:
    _checkpoint_then_change(one_matcher, receiver, seed=5)
    # The changes since the checkpoint leave the stream (as trimming does to a long-dead one).
    connect_sync(redis_url).xtrim(f"{one_matcher.namespace}:events", maxlen=0)
    _loads_from_redis_after_a_kill(one_matcher, receiver, "after-trim")


def test_the_services_record_their_progress_and_the_stream_keeps_only_what_they_need(
    one_matcher: RunningCluster, receiver: Receiver, redis_url: str
) -> None:
    """The router needs the events it has not read; the matcher those since its checkpoint."""
    client = connect_sync(redis_url)
    events = f"{one_matcher.namespace}:events"
    for seed in range(7, 12):  # batches of 50: an entry each
        subscribe_terms(one_matcher, post_queries(POSTS[:2_000], 50, seed=seed), receiver.hook)
    last = str(client.xrevrange(events, count=1)[0][0])

    def trimmed() -> bool:
        stats = httpx.get(f"{one_matcher.matcher_urls[0]}/stats", timeout=5).json()
        # The namespace's own stream is shard 0's (the first id of a position on a Redis Cluster).
        matcher = (stats["checkpoint_position"] or stats["event_position"]).split()[0]
        needs = {"matcher": matcher, "router": last}
        readers = client.hgetall(f"{events}:readers")
        kept = [str(entry_id) for entry_id, _ in client.xrange(events)]
        return (
            {name.split(":")[0]: value.split()[0] for name, value in readers.items()} == needs
            and needs["matcher"] in [*kept, "0-0"]  # what the matcher needs is kept…
            and len(client.xrange(events, max=f"({needs['matcher']}")) < 100  # …little else
        )

    eventually(trimmed, 30, 0.2, "both services' progress recorded and the stream trimmed")
