"""Learned mappings through the whole cluster: two live swaps under a steady publication stream.

Two routers switch mapping versions at different moments (one checks every 0.3 s, the other only
every 3 s); the first swap moves to a SALB mapping learned from corpus posts, the second to a
mapping whose most frequent words are hot (split into copies, §5.1), with subscriptions made only
of those words. The oracle judges every delivery: nothing lost, nothing twice.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.support import (
    AlternatingPublisher,
    boolean_oracle,
    check_exact,
    delivered_after,
    subscribe_queries,
    subscribe_terms,
)
from tests.helpers import (
    AUTH,
    Receiver,
    RunningCluster,
    eventually,
    extra_router,
    start_cluster,
    stop_cluster,
    wordcast_cli,
)
from wordcast.corpus.workload import Post, post_boolean_queries, post_queries, sample_posts
from wordcast.learning.salb import learn
from wordcast.query.analysis import analyse
from wordcast.routing.mapping import HashMapping, copy_name
from wordcast.storage import Store
from wordcast.testing.bruteforce import match_pairs

MATCHERS = 3


@pytest.fixture(scope="module")
def swap_cluster(redis_url: str) -> Iterator[RunningCluster]:
    running = start_cluster(
        redis_url,
        f"test-swap-{os.getpid()}",
        matchers=MATCHERS,
        env={"WORDCAST_ROUTER_MAPPING_POLL_S": "0.3"},
    )
    yield running
    stop_cluster(running)


def _run(redis_url: str, namespace: str, work: str, *args: object) -> object:
    async def go() -> object:
        store = Store.connect(redis_url, namespace)
        part = store.mappings if hasattr(store.mappings, work) else store.subscriptions
        try:
            return await getattr(part, work)(*args)
        finally:
            await store.aclose()

    return asyncio.run(go())


def _state(redis_url: str, namespace: str) -> tuple[int, int, tuple[int, int]]:
    state = _run(redis_url, namespace, "state")
    assert isinstance(state, tuple)
    return state  # type: ignore[return-value]


def _hot_mapping(posts: list[Post]) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """The five most frequent words split into three copies, one per matcher; the rest hashed
    differently from version 0 (shifted by one), so that almost every subscription moves."""
    frequency = Counter(t for p in posts for t in analyse(p.text))
    hot = [w for w, _ in frequency.most_common(5)]
    hashing = HashMapping(MATCHERS)
    words = {w: (hashing(w) + 1) % MATCHERS for w in frequency if w not in hot}
    for word in hot:
        for copy in range(3):
            words[copy_name(word, copy)] = copy
    return words, dict.fromkeys(hot, 3), {w: frequency[w] for w in hot}


def _wait_for(redis_url: str, namespace: str, active: int, timeout: float = 60) -> None:
    eventually(
        lambda: _state(redis_url, namespace)[1:] == (active, (active, active)),
        timeout,
        0.2,
        f"settled on v{active}",
    )


def test_two_live_mapping_swaps_lose_and_duplicate_nothing(
    swap_cluster: RunningCluster, receiver: Receiver, redis_url: str
) -> None:
    namespace = swap_cluster.namespace
    with extra_router(swap_cluster, redis_url, mapping_poll_s="3") as slow_url:
        posts = sample_posts(9_000, seed=77)
        learning, stream = posts[:5_000], posts[5_000:]
        words, splits, frequencies = _hot_mapping(learning)
        hot = sorted(splits)
        queries = post_queries(learning, 500, seed=5)
        queries += [hot[0], f"{hot[0]} {hot[1]}", " ".join(hot[2:4]), hot[4]]
        subscriptions = subscribe_terms(swap_cluster, queries, receiver.hook)
        # Boolean queries: alternatives of hot words alone are multicast like any others.
        boolean_queries = post_boolean_queries(learning, 80, seed=7)
        boolean_queries += [f"{hot[0]} OR {hot[2]}", f"{hot[1]} -{hot[3]}"]
        boolean = subscribe_queries(swap_cluster, boolean_queries, receiver.hook)

        learned = learn([analyse(p.text) for p in learning], MATCHERS, seed=3)
        publisher = AlternatingPublisher([swap_cluster.router_url, slow_url], stream)

        time.sleep(2)
        first = _run(redis_url, namespace, "write", MATCHERS, learned.words, learned.versions)
        assert first == 1
        _wait_for(redis_url, namespace, 1)
        at_first = publisher.sent
        # Subscriptions added between the swaps are placed for whatever versions are in use.
        late = subscribe_terms(swap_cluster, post_queries(learning, 100, seed=6), receiver.hook)
        subscriptions |= late
        second = _run(redis_url, namespace, "write", MATCHERS, words, splits, frequencies)
        assert second == 2
        _wait_for(redis_url, namespace, 2)
        at_second = publisher.sent
        publisher.end()
        assert 0 < at_first < at_second < publisher.sent == len(stream) // 50, (
            "both swaps should happen while publications flow"
        )

        # Every router now routes with version 2; hot words went to their copies' matchers.
        for url in (swap_cluster.router_url, slow_url):
            metrics = httpx.get(f"{url}/metrics", timeout=10).text
            assert "wordcast_router_mapping_version 2.0" in metrics
            assert "wordcast_router_spread" in metrics
            assert "wordcast_router_imbalance_cv" in metrics
        status = wordcast_cli("status", router=swap_cluster.router_url, timeout=30)
        assert status.returncode == 0, status.stderr
        assert "mapping version 2 (latest 2, versions in use 2..2)" in status.stdout
        assert status.stdout.count("matcher-") == MATCHERS
        early = {sid: t for sid, t in subscriptions.items() if sid not in late}
        placed = _run(
            redis_url,
            namespace,
            "get",
            next(sid for sid, terms in subscriptions.items() if terms == frozenset({hot[0]})),
        )
        assert {p.hot for p in placed.placements} == {hot[0]}  # type: ignore[attr-defined]
        assert len(placed.placements) == 3  # type: ignore[attr-defined]
        either = next(sid for sid, q in boolean.items() if q == f"{hot[0]} OR {hot[2]}")
        first_alternative = _run(redis_url, namespace, "get", either)
        assert {p.hot for p in first_alternative.placements} <= {hot[0], hot[2]}  # type: ignore[attr-defined]
        assert len(first_alternative.placements) == 3  # type: ignore[attr-defined]
        moved = 0
        for sid in list(early)[:100]:
            record = _run(redis_url, namespace, "get", sid)
            moved += all(p.first == 2 for p in record.placements)  # type: ignore[attr-defined]
        assert moved > 20, "the second mapping should have moved many subscriptions"

        # Subscriptions added after the first swap missed the posts published before them.
        analysed = {p.id: analyse(p.text) for p in stream}
        expected = match_pairs(early, analysed) | boolean_oracle(boolean, stream)
        delivered = delivered_after(swap_cluster, receiver, 0, len(expected))
        late_pairs = [pair for pair in delivered if pair[0] in late]
        check_exact([pair for pair in delivered if pair[0] not in late], expected)
        assert len(expected) > 2_000, "the stream should produce plenty of matches"
        assert set(late_pairs) <= match_pairs(late, analysed)
        assert len(late_pairs) == len(set(late_pairs)), "a match was delivered twice"

        # A batch sent twice (a client retrying after a lost answer) draws the same hot-word
        # copies both times, so each match comes again in a message with the same webhook-id:
        # receivers de-duplicate on webhook-id alone. Random draws would regroup the matches.
        carrying = [p for p in learning if analyse(p.text) & set(hot)][:60]
        again = [Post(f"again-{p.id}", p.text) for p in carrying]
        offset = receiver.count()
        expected_again = match_pairs(
            subscriptions, {p.id: analyse(p.text) for p in again}
        ) | boolean_oracle(boolean, again)
        assert len({pid for _, pid in expected_again}) > 30, "most of the batch should match"
        for _ in range(2):
            body = {"publications": [{"id": p.id, "text": p.text} for p in again]}
            response = httpx.post(
                f"{swap_cluster.router_url}/publications", json=body, headers=AUTH, timeout=60
            )
            assert response.status_code == 202, response.text
        twice = _delivered_with_ids(swap_cluster, receiver, offset, 2 * len(expected_again))
        assert Counter(pair for pair, _ in twice) == Counter(dict.fromkeys(expected_again, 2))
        ids_per_pair: dict[tuple[str, str], set[str]] = {}
        for pair, webhook_id in twice:
            ids_per_pair.setdefault(pair, set()).add(webhook_id)
        assert all(len(ids) == 1 for ids in ids_per_pair.values()), "a resent match changed id"


def _delivered_with_ids(
    cluster: RunningCluster, receiver: Receiver, offset: int, count: int
) -> list[tuple[tuple[str, str], str]]:
    """The (pair, webhook-id) deliveries after ``offset``, once ``delivered_after`` has waited."""
    delivered_after(cluster, receiver, offset, count)
    got = httpx.get(f"{receiver.url}/deliveries", params={"offset": offset}, timeout=30).json()
    pairs = [(str(s), str(p)) for s, p in got["pairs"]]
    return list(zip(pairs, got["webhook_ids"], strict=True))
