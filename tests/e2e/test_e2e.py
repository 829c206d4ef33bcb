"""The whole cluster, as real processes over real HTTP, judged by the brute-force oracle."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.e2e.support import (
    check_exact,
    delivered_after,
    engine_cluster,
    publish_posts,
    restart_matcher,
    subscribe_terms,
)
from tests.helpers import (
    AUTH,
    ROOT,
    Receiver,
    RunningCluster,
    eventually,
    extra_router,
    placed_on,
    wordcast_cli,
)
from wordcast.corpus.workload import Post, post_queries, sample_posts
from wordcast.defaults import DEFAULT_ADMIN_TOKEN
from wordcast.query.analysis import analyse
from wordcast.routing.mapping import HashMapping
from wordcast.storage.redis import connect_sync
from wordcast.testing.bruteforce import match_pairs


def test_cluster_delivers_exactly_the_oracle_matches_and_survives_a_matcher_kill(
    cluster: RunningCluster, receiver: Receiver
) -> None:
    posts = sample_posts(15_000, seed=2024)
    queries = post_queries(posts[:10_000], 1_000, seed=99)
    subscriptions = subscribe_terms(cluster, queries, receiver.hook)
    assert len(subscriptions) == 1_000

    first = posts[:10_000]
    expected = match_pairs(subscriptions, {p.id: analyse(p.text) for p in first})
    assert len(expected) > 5_000, "the workload should produce plenty of matches"
    publish_posts(cluster, first)
    check_exact(delivered_after(cluster, receiver, 0, len(expected)), expected)

    # A matcher dies hard; the supervisor restarts it and it rebuilds its trie from Redis.
    offset = receiver.count()
    stats = restart_matcher(cluster, signal.SIGKILL)
    assert stats["subscriptions"] > 0

    second = [Post(f"again:{p.id}", p.text) for p in posts[5_000:15_000]]
    expected = match_pairs(subscriptions, {p.id: analyse(p.text) for p in second})
    publish_posts(cluster, second)
    check_exact(delivered_after(cluster, receiver, offset, len(expected)), expected)


def test_deleted_subscription_stops_matching(cluster: RunningCluster, receiver: Receiver) -> None:
    router = httpx.Client(base_url=cluster.router_url, timeout=30, headers=AUTH)
    kept = router.post(
        "/subscriptions", json={"query": "zebra quagga", "callback_url": receiver.hook}
    )
    gone = router.post(
        "/subscriptions", json={"query": "zebra okapi", "callback_url": receiver.hook}
    )
    assert kept.status_code == gone.status_code == 201
    kept_id, gone_id = kept.json()["id"], gone.json()["id"]
    assert router.get(f"/subscriptions/{gone_id}").json()["terms"] == ["okapi", "zebra"]
    assert router.delete(f"/subscriptions/{gone_id}").status_code == 204
    assert router.get(f"/subscriptions/{gone_id}").status_code == 404
    assert router.delete(f"/subscriptions/{gone_id}").status_code == 404

    offset = receiver.count()
    response = router.post(
        "/publications", json={"id": "zoo-1", "text": "Zebras, quaggas and okapis"}
    )
    assert response.status_code == 202
    assert response.json()["ids"] == ["zoo-1"]
    delivered = delivered_after(cluster, receiver, offset, 1)
    assert delivered == [(kept_id, "zoo-1")]


def test_a_word_goes_only_to_a_matcher_holding_a_subscription_with_it(
    cluster: RunningCluster, receiver: Receiver
) -> None:
    """ "narwhal bonobo" sits on one of its words' matchers; a post carrying only the other word
    reaches no matcher (Eq. 3.1 alone would send it to that word's matcher), while the post with
    both words still matches."""
    router = httpx.Client(base_url=cluster.router_url, timeout=30, headers=AUTH)
    stats = router.get("/stats").json()
    assert stats["mapping"]["active"] == 0  # stable hashing: M(w) = stable_hash(w) mod N
    mapping = HashMapping(stats["matchers"])
    words = ["narwhal", "bonobo", "pangolin", "axolotl", "capybara", "wombat", "kinkajou"]
    first = words[0]
    second = next(w for w in words if mapping(w) != mapping(first))
    assert analyse(f"{first} {second}") == {first, second}
    sub = router.post(
        "/subscriptions", json={"query": f"{first} {second}", "callback_url": receiver.hook}
    )
    assert sub.status_code == 201
    placed = sub.json()["matcher"]
    elsewhere = second if mapping(first) == placed else first

    def routed() -> list[int]:
        return [httpx.get(f"{u}/stats").json()["publications"] for u in cluster.matcher_urls]

    before = routed()
    assert router.post("/publications", json={"id": "lone", "text": elsewhere}).status_code == 202
    assert routed() == before
    offset = receiver.count()
    both = {"id": "both", "text": f"A {second} met a {first}"}
    assert router.post("/publications", json=both).status_code == 202
    after = routed()
    assert after[placed] == before[placed] + 1
    assert sum(after) == sum(before) + 1
    assert delivered_after(cluster, receiver, offset, 1) == [(sub.json()["id"], "both")]
    assert router.delete(f"/subscriptions/{sub.json()['id']}").status_code == 204


def test_only_routers_of_the_cluster_reach_the_matchers_internal_endpoints(
    cluster: RunningCluster, redis_url: str
) -> None:
    """The matchers' /internal endpoints want the token every service of the cluster reads from
    Redis; routers show it (every other test here goes through them)."""

    client = connect_sync(redis_url)
    key = f"{cluster.namespace}:cluster:internal_token"
    token = client.get(key)
    assert token
    assert len(token) >= 40
    url = f"{cluster.matcher_urls[0]}/internal/sync"
    body = {"until": "0-0"}
    for headers in ({}, {"authorization": "Bearer not-the-token"}, AUTH):
        refused = httpx.post(url, json=body, headers=headers, timeout=30)
        assert refused.status_code == 401, (headers, refused.text)
        assert "internal token" in refused.json()["detail"]
    batch = {"version": 0, "ids": ["x"], "texts": ["zebra"], "terms": [["zebra"]]}
    refused = httpx.post(f"{cluster.matcher_urls[0]}/internal/match", json=batch, timeout=30)
    assert refused.status_code == 401
    shown = {"authorization": f"Bearer {token}"}
    assert httpx.post(url, json=body, headers=shown, timeout=30).status_code == 204
    # A routed batch comes by columns; columns that disagree are refused, naming why.
    for wrong, why in (
        (batch | {"texts": ["zebra", "crossing"]}, "the columns differ in length"),
        (batch | {"patterns": [1]}, "position 1 is outside the batch of 1"),
        (batch | {"drawn": {"-1": {"zebra": 0}}}, "position -1 is outside"),
    ):
        answer = httpx.post(
            f"{cluster.matcher_urls[0]}/internal/match", json=wrong, headers=shown, timeout=30
        )
        assert answer.status_code == 422, answer.text
        assert why in answer.text
    matched = httpx.post(
        f"{cluster.matcher_urls[0]}/internal/match", json=batch, headers=shown, timeout=30
    )
    assert matched.status_code == 200, matched.text

    # Rotated in Redis: the matcher takes the new token when shown it, and refuses the old; the
    # router, refused, reads the new one and routes on.
    client.set(key, "rotated-" + "x" * 40)
    rotated = {"authorization": "Bearer rotated-" + "x" * 40}
    # The refusals above re-read it lately, and a matcher re-reads at most once a second: the
    # new token is taken at a later try.
    eventually(
        lambda: httpx.post(url, json=body, headers=rotated, timeout=30).status_code == 204,
        10,
        what="the rotated token taken",
    )
    assert httpx.post(url, json=body, headers=shown, timeout=30).status_code == 401
    posts = [{"id": f"rotation-{i}", "text": "zebra crossing"} for i in range(20)]
    routed = httpx.post(
        f"{cluster.router_url}/publications",
        json={"publications": posts},
        headers=AUTH,
        timeout=30,
    )
    assert routed.status_code == 202, routed.text


def test_status_shows_what_each_matcher_holds(cluster: RunningCluster, redis_url: str) -> None:
    """`wordcast status` lists, per matcher, the subscriptions it holds (what Redis has placed on
    it), as the router asks each matcher's /stats."""

    client = connect_sync(redis_url)
    subscribe_terms(cluster, ["status check", "held where"], "http://127.0.0.1:9/hook")
    placed = [len(placed_on(client, cluster.namespace, m)) for m in range(2)]
    # Operators only: matcher URLs and process ids are not a tenant's business.
    assert (
        httpx.get(f"{cluster.router_url}/stats/matchers", headers=AUTH, timeout=30).status_code
        == 401
    )
    admin = {"authorization": f"Bearer {DEFAULT_ADMIN_TOKEN}"}
    matchers = httpx.get(f"{cluster.router_url}/stats/matchers", headers=admin, timeout=30).json()[
        "matchers"
    ]
    assert [(m["ordinal"], m["reachable"], m["subscriptions"]) for m in matchers] == [
        (0, True, placed[0]),
        (1, True, placed[1]),
    ]
    assert [m["url"] for m in matchers] == cluster.matcher_urls
    status = wordcast_cli("status", router=cluster.router_url)
    assert status.returncode == 0, status.stderr
    for ordinal, count in enumerate(placed):
        line = next(x for x in status.stdout.splitlines() if f"matcher-{ordinal}:" in x)
        # "1 subscription", "2 subscriptions": how many depends on the tests run before.
        assert re.search(rf"holds {count} subscriptions? ", line), line

    # Into a reader that has gone (`wordcast status | head -1`): no traceback.
    piped = subprocess.Popen(
        [sys.executable, "-m", "wordcast", "status", "--router", cluster.router_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert piped.stdout is not None
    piped.stdout.close()
    _out, errors = piped.communicate(timeout=60)
    assert "Traceback" not in errors, errors
    assert "Exception ignored" not in errors, errors
    assert piped.returncode == 1


def test_the_readme_python_example_runs(cluster: RunningCluster, receiver: Receiver) -> None:
    """The README's Python example as written, with this cluster's URL and key and the test's
    webhook: the post it publishes is routed to its subscription's matcher, the subscription is
    listed, and then deleted."""
    readme = (ROOT / "README.md").read_text()
    assert "example.com" not in readme  # every example works offline, on this machine
    found = re.search(r"```python\n(.*?RouterClient.*?)```", readme, re.DOTALL)
    assert found is not None
    code = found.group(1)
    dev_key = AUTH["authorization"].removeprefix("Bearer ")
    assert code.count(f'"{dev_key}"') == 1  # wordcast up's development key
    for written, here in [
        ('"http://127.0.0.1:8000"', repr(cluster.router_url)),
        ('"http://127.0.0.1:8200/hook"', repr(receiver.hook)),
    ]:
        assert code.count(written) == 1, written
        code = code.replace(written, here)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    routed, *listed = result.stdout.splitlines()
    assert re.fullmatch(r"routed to [12] matchers", routed), routed
    ids = [line.split(" ")[0] for line in listed if line.endswith(" python (web OR http)")]
    assert len(ids) == 1, result.stdout
    router = httpx.Client(base_url=cluster.router_url, timeout=30, headers=AUTH)
    assert router.get(f"/subscriptions/{ids[0]}").status_code == 404
    # Its match is delivered, or dropped if the deletion came first: either way, before the
    # next test counts deliveries.
    eventually(lambda: not cluster.pending_deliveries(), 60, what="the matchers idle")


@pytest.mark.parametrize("engine", ["trie", "querynote"])  # the default is tested above
def test_every_matcher_engine_delivers_the_oracle_matches(
    engine: str, redis_url: str, receiver: Receiver, tmp_path: Path
) -> None:
    posts = sample_posts(4_000, seed=77)
    with engine_cluster(redis_url, engine, posts[:2_000], tmp_path) as cluster:
        subscriptions = subscribe_terms(cluster, post_queries(posts, 400, seed=78), receiver.hook)
        offset = receiver.count()
        published = [Post(f"{engine}:{p.id}", p.text) for p in posts[2_000:]]
        expected = match_pairs(subscriptions, {p.id: analyse(p.text) for p in published})
        assert len(expected) > 500
        publish_posts(cluster, published)
        check_exact(delivered_after(cluster, receiver, offset, len(expected)), expected)


def test_a_router_of_several_workers_answers_as_one(
    cluster: RunningCluster, redis_url: str, receiver: Receiver
) -> None:
    """WORDCAST_ROUTER_WORKERS=2: two processes answer on one port, each routes what it accepts
    to every matcher it concerns, and /metrics, whichever answers, counts for both."""
    subscribed = subscribe_terms(cluster, ["wombat burrow"], receiver.hook)
    offset = receiver.count()
    with extra_router(cluster, redis_url, workers="2") as url:
        answered: set[int] = set()

        def both_answered() -> bool:
            # A new connection each time: the kernel hands it to either worker.
            answered.add(httpx.get(f"{url}/stats", timeout=10).json()["pid"])
            return len(answered) == 2

        eventually(both_answered, 30, 0.01, "both workers answering")
        posts = [{"id": f"wombat-{n}", "text": f"a wombat burrow, {n}"} for n in range(20)]
        for post in posts:  # one connection each, shared out between the workers
            accepted = httpx.post(
                f"{url}/publications", json={"publications": [post]}, headers=AUTH, timeout=30
            )
            assert accepted.status_code == 202, accepted.text
        delivered = delivered_after(cluster, receiver, offset, len(posts))
        check_exact(delivered, {(sub_id, p["id"]) for sub_id in subscribed for p in posts})
        for _ in range(6):
            metrics = httpx.get(f"{url}/metrics", timeout=10).text
            counted = re.search(r"^wordcast_router_publications_total (\S+)$", metrics, re.M)
            assert counted is not None, metrics[:2000]
            assert float(counted[1]) == len(posts)
