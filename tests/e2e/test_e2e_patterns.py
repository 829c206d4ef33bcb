"""Pattern subscriptions through the whole cluster, alongside keyword ones, judged by oracles."""

from __future__ import annotations

import os
import time

import httpx
import pytest

from tests.e2e.support import (
    check_exact,
    create_subscriptions,
    delivered_after,
    pattern_oracle,
    publish_posts,
)
from tests.helpers import (
    AUTH,
    Receiver,
    RunningCluster,
    extra_router,
    start_cluster,
    stop_cluster,
)
from wordcast.corpus.workload import Post, post_patterns, post_queries, sample_posts
from wordcast.query.analysis import analyse
from wordcast.testing.bruteforce import match_pairs


@pytest.fixture(scope="module")
def pattern_cluster(redis_url: str) -> RunningCluster:
    running = start_cluster(redis_url, f"test-patterns-{os.getpid()}", matchers=3)
    yield running  # type: ignore[misc]
    stop_cluster(running)


def test_patterns_and_keywords_deliver_exactly_the_oracle_matches(
    pattern_cluster: RunningCluster, receiver: Receiver
) -> None:
    posts = sample_posts(6_000, seed=4242)
    hook = receiver.hook
    patterns = post_patterns(posts[:3_000], 400, seed=7)
    queries = post_queries(posts[:3_000], 300, seed=8)
    created = create_subscriptions(
        pattern_cluster.router_url, [{"pattern": p, "callback_url": hook} for p in patterns]
    )
    assert all(c["kind"] == "pattern" and c["anchor"] for c in created)
    by_id = {str(c["id"]): str(c["pattern"]) for c in created}
    keyword_created = create_subscriptions(
        pattern_cluster.router_url, [{"query": q, "callback_url": hook} for q in queries]
    )
    keywords = {str(c["id"]): analyse(str(c["query"])) for c in keyword_created}

    # Patterns are spread over the matchers, not piled on one.
    loads = [
        httpx.get(f"{url}/stats").json()["pattern_subscriptions"]
        for url in pattern_cluster.matcher_urls
    ]
    assert sum(loads) == 400, loads
    assert max(loads) < 400 * 0.5, loads

    published = [Post(f"pat:{p.id}", p.text) for p in posts[3_000:]]
    expected = pattern_oracle(by_id, published) | match_pairs(
        keywords, {p.id: analyse(p.text) for p in published}
    )
    pattern_matches = pattern_oracle(by_id, published)
    assert len(pattern_matches) > 300, "the workload should make plenty of pattern matches"
    offset = receiver.count()
    publish_posts(pattern_cluster, published)
    check_exact(delivered_after(pattern_cluster, receiver, offset, len(expected)), expected)

    # Deleting half of the patterns stops exactly those from matching.
    router = httpx.Client(base_url=pattern_cluster.router_url, timeout=30, headers=AUTH)
    gone = list(by_id)[::2]
    for sub_id in gone:
        assert router.delete(f"/subscriptions/{sub_id}").status_code == 204
    kept = {sid: p for sid, p in by_id.items() if sid not in set(gone)}
    again = [Post(f"again:{p.id}", p.text) for p in published]
    expected = pattern_oracle(kept, again) | match_pairs(
        keywords, {p.id: analyse(p.text) for p in again}
    )
    offset = receiver.count()
    publish_posts(pattern_cluster, again)
    check_exact(delivered_after(pattern_cluster, receiver, offset, len(expected)), expected)


def test_a_pattern_added_on_one_router_reaches_another_within_seconds(
    pattern_cluster: RunningCluster, receiver: Receiver, redis_url: str
) -> None:
    with extra_router(pattern_cluster, redis_url) as other:

        def routed_by_second(text: str) -> int:
            response = httpx.post(f"{other}/publications", json={"text": text}, headers=AUTH)
            assert response.status_code == 202
            routed: int = response.json()["routed"]
            return routed

        probe = "ZQAX JW*"  # no subscribed word, no other anchor: only this pattern routes it
        assert routed_by_second(probe) == 0

        first = httpx.Client(base_url=pattern_cluster.router_url, timeout=30, headers=AUTH)
        created = first.post(
            "/subscriptions", json={"pattern": "zq?x*jw\\*", "callback_url": receiver.hook}
        )
        assert created.status_code == 201, created.text
        assert created.json()["anchor"] == "jw*"
        sub_id = created.json()["id"]

        # The router that did not take the subscription learns its anchor from the event stream.
        added = time.monotonic()
        while routed_by_second(probe) != 1:
            assert time.monotonic() - added < 5, "the second router never routed to the pattern"
            time.sleep(0.1)
        offset = receiver.count()
        response = httpx.post(
            f"{other}/publications", json={"id": "late", "text": probe}, headers=AUTH
        )
        assert response.status_code == 202
        delivered = delivered_after(pattern_cluster, receiver, offset, 1)
        # The probe that was first routed to the pattern matched too, and its delivery may come
        # after the offset was read (the more likely on a Redis Cluster, whose outboxes are polled).
        assert [pair for pair in delivered if pair[1] == "late"] == [(sub_id, "late")]
        assert {pair[0] for pair in delivered} == {sub_id}, delivered

        assert first.delete(f"/subscriptions/{sub_id}").status_code == 204
        removed = time.monotonic()
        while routed_by_second(probe) != 0:
            assert time.monotonic() - removed < 5, "the deletion never reached the second router"
            time.sleep(0.1)
