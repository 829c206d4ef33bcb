"""Changing the number of matchers of a running cluster: `wordcast scale`, under a steady stream.

A local cluster of two matchers and two routers (one checks for mapping changes every 0.3 s, the
other every 3 s, so they switch at different moments) holds keyword subscriptions, boolean queries
(their alternatives move like keyword subscriptions) and patterns.
While publications flow through both routers, `wordcast scale 3` makes the supervisor start a
third matcher and moves the cluster onto it. Then only the number of matchers wanted is set to 1,
as routers following `kubectl scale` do on Kubernetes: the routers move everything, patterns
included, onto matcher 0 by themselves, matcher 2's preStop hook (`wordcast drain`) returns once
it is empty, and the supervisor stops matchers 1 and 2. `wordcast scale 2` brings matcher 1 back,
on another port. The oracle judges every delivery: nothing lost, nothing twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from tests.e2e.support import (
    AlternatingPublisher,
    boolean_oracle,
    check_exact,
    create_subscriptions,
    pattern_oracle,
    publish_posts,
    subscribe_queries,
    subscribe_terms,
)
from tests.helpers import (
    Receiver,
    RunningCluster,
    eventually,
    extra_router,
    placed_on,
    record_shards,
    start_cluster,
    stop_cluster,
    stored_record,
)
from wordcast.corpus.workload import post_boolean_queries, post_patterns, post_queries, sample_posts
from wordcast.query.analysis import analyse
from wordcast.query.boolean import parse_query
from wordcast.storage.keys import RECORD_BUCKETS
from wordcast.storage.records import unpack_record
from wordcast.storage.redis import connect_sync, stored_namespace
from wordcast.testing.bruteforce import match_pairs


@pytest.fixture(scope="module")
def scaling_cluster(redis_url: str) -> Iterator[RunningCluster]:
    running = start_cluster(
        redis_url,
        f"test-scale-{os.getpid()}",
        matchers=2,
        env={"WORDCAST_ROUTER_MAPPING_POLL_S": "0.3"},
    )
    yield running
    stop_cluster(running)


def _wordcast(
    *args: str, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the CLI; an empty value in ``env`` unsets that variable."""
    environment = {k: v for k, v in (os.environ | env).items() if v != ""}
    return subprocess.run(
        [sys.executable, "-m", "wordcast", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
    )


def _on(cluster: RunningCluster, redis_url: str) -> dict[str, str]:
    return {"REDIS_URL": redis_url, "WORDCAST_NAMESPACE": cluster.namespace}


def _scale(cluster: RunningCluster, redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = _on(cluster, redis_url)
    return _wordcast("scale", *args, "--router", cluster.router_url, env=env, timeout=300)


def _closed_placements(client: redis.Redis, namespace: str) -> list[str]:
    """Subscriptions that still hold a placement serving only older mapping versions."""
    return [
        sub_id
        for shard in record_shards(client, namespace)
        for bucket in range(RECORD_BUCKETS)
        for sub_id, value in client.hgetall(shard.records(bucket)).items()
        if any(p.until is not None for p in unpack_record(sub_id, value).placements)
    ]


def _drain(
    cluster: RunningCluster, redis_url: str, ordinal: int
) -> subprocess.CompletedProcess[str]:
    env = _on(cluster, redis_url)
    return _wordcast("drain", "--ordinal", str(ordinal), "--timeout", "120", env=env, timeout=300)


def _stats(url: str) -> dict[str, object]:
    stats: dict[str, object] = httpx.get(f"{url}/stats", timeout=10).json()
    return stats


def _quiet(client: redis.Redis, namespace: str, receiver: Receiver, expected: int) -> list:  # type: ignore[type-arg]
    """The deliveries once the expected number arrived and every outbox is empty."""

    def quiet() -> bool:
        outboxes = client.smembers(f"{namespace}:outboxes")
        depth = sum(client.xlen(f"{namespace}:outbox:{i}") for i in outboxes)  # type: ignore[union-attr]
        return depth == 0 and receiver.count() >= expected

    eventually(quiet, 120, 0.2, f"{expected} deliveries with every outbox empty")
    return receiver.pairs()  # accepted publications' messages are all in outboxes: none to come


def test_scaling_up_and_down_under_a_stream_loses_and_duplicates_nothing(
    scaling_cluster: RunningCluster, receiver: Receiver, redis_url: str
) -> None:
    cluster, namespace = scaling_cluster, scaling_cluster.namespace
    client = connect_sync(redis_url)
    assert receiver.count() == 0, "this module's receiver starts empty"
    posts = sample_posts(7_000, seed=515)
    learning, stream = posts[:3_000], posts[3_000:]
    keywords = subscribe_terms(cluster, post_queries(learning, 400, seed=51), receiver.hook)
    boolean = subscribe_queries(
        cluster, post_boolean_queries(learning, 100, seed=53), receiver.hook
    )
    alternatives = sum(len(parse_query(q).clauses) for q in boolean.values())
    created = create_subscriptions(
        cluster.router_url,
        [
            {"pattern": p, "callback_url": receiver.hook}
            for p in post_patterns(learning, 120, seed=52)
        ],
    )
    patterns = {str(c["id"]): str(c["pattern"]) for c in created}
    on_one = [sid for sid in patterns if _matcher_of(client, namespace, sid) == 1]
    assert on_one, "some patterns should start on matcher 1"

    first_pid = cluster.matcher_pid(1)
    with extra_router(cluster, redis_url, mapping_poll_s="3") as slow_url:
        # Scaling up may take longer than the stream on a loaded machine: the batches from
        # the 20th last on wait for it, so that some are left to flow while scaling down.
        scaled_up = threading.Event()
        publisher = AlternatingPublisher(
            [cluster.router_url, slow_url], stream, gates={len(stream) // 50 - 20: scaled_up}
        )
        time.sleep(2)

        up = _scale(cluster, redis_url, "3", "--algorithm", "hash")
        assert up.returncode == 0, up.stdout + up.stderr
        assert "the cluster routes to 3 matchers" in up.stdout
        # Settled means that no placement for an older version is left either.
        assert _closed_placements(client, namespace) == []
        at_up = publisher.sent
        scaled_up.set()
        # Both routers route to the new matcher, which the supervisor started and which holds
        # a share of the subscriptions now.
        for url in (cluster.router_url, slow_url):
            assert _stats(url)["matchers"] == 3
        third = client.get(f"{namespace}:matcher:2:url")
        assert third is not None
        assert third not in cluster.matcher_urls
        held = _stats(third)["subscriptions"]
        assert isinstance(held, int), held
        assert held > 50, held
        assert any("started matcher-2" in line for line in cluster.output)
        # Patterns too: whole anchor groups moved onto the new matcher, none of its share before.
        pattern_loads = [
            client.hget(shard.pattern_load, "2") for shard in record_shards(client, namespace)
        ]
        assert sum(int(load or 0) for load in pattern_loads) > 0, pattern_loads

        # What a router following `kubectl scale statefulset/matcher --replicas=1` writes.
        staying = _drain(cluster, redis_url, 0)
        assert staying.returncode == 0, staying.stderr
        assert "only restarting, nothing to drain" in staying.stdout
        client.set(f"{namespace}:cluster:matchers", 1)
        removed = _drain(cluster, redis_url, 2)
        assert removed.returncode == 0, removed.stdout + removed.stderr
        assert "drained: nothing routes to it and it holds nothing" in removed.stdout
        assert len(placed_on(client, namespace, 2)) == 0
        # Written by a router, which nothing but that number told to.
        written = client.hgetall(
            f"{namespace}:mapping:{client.get(f'{namespace}:mapping:latest')}:meta"
        )
        assert (written["matchers"], written["algorithm"], written["reason"]) == (
            "1",
            "hash",
            "scale",
        )
        at_down = publisher.sent
        eventually(
            lambda: all(
                any(f"stopped matcher-{k}" in line for line in cluster.output) for k in (1, 2)
            ),
            30,
            0.2,
            "the supervisor stopping matchers 1 and 2",
        )
        for url in (cluster.router_url, slow_url):
            assert _stats(url)["matchers"] == 1
            assert (_stats(url)["matchers_wanted"], _stats(url)["awaiting_matcher"]) == (1, None)
            metrics = httpx.get(f"{url}/metrics", timeout=10).text
            assert "wordcast_router_matchers 1.0" in metrics
            assert "wordcast_router_matchers_wanted 1.0" in metrics
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{cluster.matcher_urls[1]}/readyz", timeout=2)
        # Everything lives on matcher 0 now, patterns included (moved with versioned placements).
        assert _stats(cluster.matcher_urls[0])["subscriptions"] == (
            len(keywords) + alternatives + len(patterns)
        )
        moved = [_matcher_of(client, namespace, sid) for sid in on_one]
        assert set(moved) == {0}

        again = _scale(cluster, redis_url, "2", "--algorithm", "hash")
        assert again.returncode == 0, again.stdout + again.stderr
        # A new process, at the URL the routers were configured with.
        assert client.get(f"{namespace}:matcher:1:url") == cluster.matcher_urls[1]
        assert _stats(cluster.matcher_urls[1])["pid"] != first_pid
        assert _stats(cluster.matcher_urls[1])["subscriptions"] > 50

        publisher.end()
        assert 0 < at_up < at_down < publisher.sent == len(stream) // 50, (
            "the changes should happen while publications flow"
        )
    status = _wordcast("status", "--router", cluster.router_url, env={})
    assert status.returncode == 0, status.stdout
    assert status.stdout.count("matcher-") == 2, status.stdout
    assert "scaling to" not in status.stdout, "the cluster has the number wanted"

    analysed = {p.id: analyse(p.text) for p in stream}
    expected = match_pairs(keywords, analysed) | pattern_oracle(patterns, stream)
    expected |= boolean_oracle(boolean, stream)
    assert len(expected) > 2_000, "the stream should produce plenty of matches"
    check_exact(_quiet(client, namespace, receiver, len(expected)), expected)


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["0"], {"REDIS_URL": "redis://127.0.0.1:1/0"}, "must be at least 1"),
        (
            ["3"],
            {"REDIS_URL": "", "WORDCAST_STATE_DIR": "/nonexistent/wordcast-state"},
            "give --redis-url or set REDIS_URL",
        ),
        (["3", "--router", "http://127.0.0.1:1"], {"REDIS_URL": "redis://x"}, "cannot read"),
        (["3", "--algorithm", "magic"], {}, "invalid choice"),
    ],
)
def test_scale_refuses_bad_requests_clearly(
    args: list[str], env: dict[str, str], message: str
) -> None:
    result = _wordcast("scale", *args, env=env)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr, result.stderr


def test_commands_find_the_redis_of_the_local_cluster_wordcast_up_runs(
    redis_url: str, tmp_path: Path
) -> None:
    """`wordcast up` records its Redis, namespace and router; `wordcast scale` acts on that
    cluster (its router on a port of its own) with neither REDIS_URL, WORDCAST_NAMESPACE,
    WORDCAST_URL nor --router, and says how to proceed once it has stopped."""
    state = {"WORDCAST_STATE_DIR": str(tmp_path)}
    cluster = start_cluster(redis_url, f"test-record-{os.getpid()}", matchers=1, env=state)
    assert not cluster.router_url.endswith(":8000")
    bare = state | {"REDIS_URL": "", "WORDCAST_NAMESPACE": "", "WORDCAST_URL": ""}
    try:
        grown = _wordcast("scale", "2", "--algorithm", "hash", env=bare)
        assert grown.returncode == 0, grown.stdout + grown.stderr
        assert "the cluster routes to 2 matchers" in grown.stdout
        assert _stats(cluster.router_url)["matchers"] == 2
    finally:
        stop_cluster(cluster)
    assert not list((tmp_path / "clusters").glob("*.json")), "the record goes with the cluster"
    refused = _wordcast("scale", "3", "--router", cluster.router_url, env=bare)
    assert refused.returncode == 2
    assert "no local cluster is running" in refused.stderr, refused.stderr


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ([], {"HOSTNAME": "laptop", "WORDCAST_MATCHER_ORDINAL": ""}, "cannot tell which matcher"),
        (
            ["--ordinal", "3", "--statefulset", "matcher"],
            {"KUBECONFIG": "", "HOME": "/nonexistent"},
            "matcher-3: reading the replicas of statefulset/matcher from the Kubernetes API: "
            "not in a pod?",
        ),
        (["--ordinal", "1"], {"REDIS_URL": "redis://127.0.0.1:1/0"}, "matcher-1: Redis"),
    ],
)
def test_drain_refuses_clearly(args: list[str], env: dict[str, str], message: str) -> None:
    result = _wordcast("drain", *args, env=env)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr, result.stderr


def test_learn_refuses_a_number_of_matchers_the_cluster_does_not_have(
    redis_url: str, namespace: str
) -> None:
    client = connect_sync(redis_url)
    client.set(f"{namespace}:cluster:matchers", 4)
    env = {"REDIS_URL": redis_url, "WORDCAST_NAMESPACE": namespace}
    result = _wordcast("learn", "--matchers", "6", env=env)
    assert result.returncode == 2, result.stderr
    assert "the cluster has 4 matchers" in result.stderr
    assert "wordcast scale 6 --algorithm salb" in result.stderr
    assert client.get(f"{namespace}:mapping:latest") is None, "nothing was learned or written"


def test_a_router_needs_the_size_of_version_0_with_a_url_template() -> None:
    from pydantic import ValidationError

    from wordcast.services.router.settings import RouterSettings

    dev = {"environment": "development"}
    with pytest.raises(ValidationError, match="set WORDCAST_ROUTER_MATCHERS"):
        RouterSettings(matcher_urls=["http://matcher-{ordinal}.matcher:8101"], **dev)
    with pytest.raises(ValidationError, match="must be the only URL"):
        RouterSettings(matcher_urls=["http://a:1", "http://m-{ordinal}:1"], matchers=2, **dev)
    settings = RouterSettings(matcher_urls=["http://m-{ordinal}.m:8101"], matchers=4, **dev)
    assert (settings.url_template, settings.initial_matchers) == ("http://m-{ordinal}.m:8101", 4)
    assert RouterSettings(matcher_urls=["http://a:1", "http://b:1"], **dev).initial_matchers == 2


def test_learn_without_matchers_needs_a_recorded_number(redis_url: str, namespace: str) -> None:
    result = _wordcast("learn", env={"REDIS_URL": redis_url, "WORDCAST_NAMESPACE": namespace})
    assert result.returncode == 2, result.stderr
    assert "no router has recorded the cluster's number of matchers" in result.stderr


def test_a_background_loop_that_swallows_a_cancellation_still_stops() -> None:
    """A cancellation landing in a Redis read can come back as a connection error that a retry
    loop swallows; stopping a service must not wait on such a loop for ever."""
    import asyncio

    from wordcast.services.common import in_background

    swallowed = 0

    async def retrying() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:  # what a translated Redis error looks like to it
                swallowed += 1
                if swallowed > 1:
                    raise
            await asyncio.sleep(0)

    async def scenario() -> None:
        async with in_background(retrying(), "stubborn"):
            await asyncio.sleep(0.01)

    asyncio.run(asyncio.wait_for(scenario(), timeout=5))
    assert swallowed == 2


@contextlib.asynccontextmanager
async def _router_state(redis_url: str, namespace: str, **settings: Any) -> AsyncIterator[Any]:
    """A router's state without its HTTP server or background loops, over two matchers that do
    not answer: the tests drive its mapping step themselves."""
    from wordcast.services.router.settings import RouterSettings
    from wordcast.services.router.state import RouterState
    from wordcast.storage import Store
    from wordcast.storage.redis import connect

    client = connect(redis_url)
    state = RouterState(
        RouterSettings(
            redis_url=redis_url,
            namespace=namespace,
            environment="development",
            matcher_urls=["http://127.0.0.1:1", "http://127.0.0.1:2"],
            **settings,
        ),
        Store(client, namespace),
    )
    try:
        yield state
    finally:
        await state.close()
        await client.aclose()


def test_a_router_writes_a_version_for_the_number_wanted_once_the_cluster_can_take_it(
    redis_url: str,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Growing waits for the new matchers to be ready (none answers here, so nothing is
    written), and says so again while it waits; shrinking needs nothing started, and the router
    that wrote the (hashing) version starts the learner's CronJob; a new number waits while a
    move is under way."""
    from prometheus_client import REGISTRY

    from tests.unit.support import KUBE_CONFIG, cronjob_api
    from wordcast.ops.kube import CronJobRun
    from wordcast.services.router import scale_follower

    monkeypatch.setattr(scale_follower, "REMIND_EVERY_S", 0.05)
    jobs: list[dict[str, Any]] = []

    async def scenario() -> None:
        async with _router_state(redis_url, namespace, learn_cronjob="learn-mapping") as state:
            store, mappings = state.store, state.versions.mappings
            follower = state.versions.scale
            assert follower.learner is not None
            follower.learner = CronJobRun("learn-mapping", KUBE_CONFIG, transport=cronjob_api(jobs))
            await store.membership.want_matchers(3)
            await store.membership.register_matcher(
                2, "http://127.0.0.1:3"
            )  # registered, not answering
            await state.versions.step()
            assert (follower.wanted, follower.awaited) == (3, 2)
            assert (await mappings.state())[0] == 0, "no version before matcher 2 is ready"
            await asyncio.sleep(0.1)
            with caplog.at_level(logging.WARNING, logger=scale_follower.__name__):
                await state.versions.step()
            assert "matcher-2 has not been ready for" in caplog.text
            assert "stays on 2 matchers" in caplog.text
            waited = REGISTRY.get_sample_value("wordcast_router_awaiting_matcher_seconds")
            assert waited is not None
            assert waited >= 0.1

            await store.membership.want_matchers(1)
            await state.versions.step()
            latest = (await mappings.state())[0]
            assert latest == 1
            assert follower.awaited is None
            assert follower.awaited_for == 0
            meta = await mappings.meta(1)
            assert (meta["matchers"], meta["algorithm"], meta["reason"]) == ("1", "hash", "scale")
            assert [job["metadata"]["name"] for job in jobs] == ["learn-mapping-scale-v1"]

            await store.membership.want_matchers(2)
            await state.versions.step()  # moving to v1 is under way (no matcher answers): wait
            assert (await mappings.state())[0] == 1

    asyncio.run(scenario())


def test_a_matcher_that_does_not_answer_is_listed_with_the_reason(
    redis_url: str, namespace: str
) -> None:
    async def scenario() -> list[dict[str, Any]]:
        async with _router_state(redis_url, namespace) as state:
            listed: list[dict[str, Any]] = await state.matcher_client.stats(3)
            return listed

    first, second, third = asyncio.run(scenario())
    assert (first["url"], first["reachable"]) == ("http://127.0.0.1:1", False)
    assert second["reachable"] is False
    assert second["error"]
    assert third == {"ordinal": 2, "reachable": False, "error": "its URL is not registered"}


def test_a_router_following_the_statefulset_copies_its_replicas(
    redis_url: str, namespace: str
) -> None:
    """`kubectl scale` as a router sees it: the replicas (read from an in-process Kubernetes API,
    see test_kube.py) become the number wanted, at most every follow_poll_s, and the router says
    it follows; scaling to 0 stops pods without re-mapping and is not copied."""
    import httpx2

    from tests.unit.support import KUBE_CONFIG, scale_body
    from wordcast.ops.kube import StatefulSetReplicas

    replicas = {"now": 5}

    def api(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json=scale_body({"replicas": replicas["now"]}))

    async def scenario() -> None:
        following = {"follow_statefulset": "matcher", "follow_poll_s": 0.2}
        async with _router_state(redis_url, namespace, **following) as state:
            store = state.store
            await state.versions.scale.aclose()
            transport = httpx2.MockTransport(api)
            state.versions.scale.statefulset = StatefulSetReplicas(
                "matcher", KUBE_CONFIG, transport=transport
            )
            await state.versions.step()
            assert await store.membership.matchers_wanted() == 5
            assert await store.membership.followed() == "matcher"
            replicas["now"] = 3
            await state.versions.step()
            assert await store.membership.matchers_wanted() == 5, (
                "read again only after follow_poll_s"
            )
            await asyncio.sleep(0.25)
            await state.versions.step()
            assert await store.membership.matchers_wanted() == 3
            replicas["now"] = 0
            await asyncio.sleep(0.25)
            await state.versions.step()
            assert await store.membership.matchers_wanted() == 3

    asyncio.run(scenario())


def test_scale_refuses_while_the_routers_follow_a_statefulset(
    scaling_cluster: RunningCluster, redis_url: str
) -> None:
    client = connect_sync(redis_url)
    namespace = scaling_cluster.namespace
    wanted = client.get(f"{namespace}:cluster:matchers")
    client.set(f"{namespace}:cluster:follows", "matcher", px=60_000)
    try:
        result = _scale(scaling_cluster, redis_url, "5", "--algorithm", "hash")
    finally:
        client.delete(f"{namespace}:cluster:follows")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "kubectl scale statefulset/matcher --replicas=5 instead" in result.stderr
    assert client.get(f"{namespace}:cluster:matchers") == wanted, "nothing was asked for"


def test_a_removed_matcher_that_is_gone_does_not_hold_the_cluster_on_the_old_version(
    redis_url: str, receiver: Receiver
) -> None:
    """A pod stopped before its subscriptions moved (its preStop hook timed out, or it was
    deleted by force): matcher 2 is frozen, then 2 matchers are wanted. The routers move to a
    version without it all the same, and every match is delivered once, the ones of the
    subscriptions it held included."""
    namespace = stored_namespace(redis_url, f"test-gone-{os.getpid()}")
    cluster = start_cluster(
        redis_url, namespace, matchers=3, env={"WORDCAST_ROUTER_MAPPING_POLL_S": "0.3"}
    )
    client = connect_sync(redis_url)
    frozen = cluster.matcher_pid(2)
    try:
        posts = sample_posts(3_000, seed=616)
        already = receiver.count()
        keywords = subscribe_terms(
            cluster, post_queries(posts[:1_000], 300, seed=61), receiver.hook
        )
        held = placed_on(client, namespace, 2)
        assert len(held) > 30, "matcher 2 should hold a share"
        os.kill(frozen, signal.SIGSTOP)
        try:
            client.set(f"{namespace}:cluster:matchers", 2)

            def settled() -> bool:
                latest = client.get(f"{namespace}:mapping:latest")
                return latest is not None and (
                    client.get(f"{namespace}:mapping:active") == latest
                    and client.get(f"{namespace}:mapping:window") == f"{latest} {latest}"
                )

            eventually(settled, 90, 0.3, "the routers not waiting for the frozen matcher")
            # The window narrows first, then the placements that served only v0 are dropped.
            eventually(
                lambda: len(placed_on(client, namespace, 2)) == 0,
                60,
                what="matcher 2 rid of the subscriptions of v0",
            )
            moved = [_matcher_of(client, namespace, sid) for sid in held]
            assert set(moved) <= {0, 1}
            assert _stats(cluster.router_url)["matchers"] == 2
            stream = posts[1_000:]
            publish_posts(cluster, stream)
        finally:
            os.kill(frozen, signal.SIGCONT)
        analysed = {p.id: analyse(p.text) for p in stream}
        expected = match_pairs(keywords, analysed)
        assert len(expected) > 200
        delivered = _quiet(client, namespace, receiver, already + len(expected))[already:]
        check_exact(delivered, expected)
    finally:
        stop_cluster(cluster)


def test_scale_with_a_learned_mapping_writes_only_that_version(
    redis_url: str, receiver: Receiver
) -> None:
    """`wordcast scale 3 --algorithm salb` holds the migration lock while it asks for 3, learns
    SALB with Spark from the publication log and waits for matcher 2: no router writes a
    hashing version or tries a version whose matcher is not there yet, the learned one is the
    only new version, and every match is delivered once across the move."""
    namespace = stored_namespace(redis_url, f"test-learned-scale-{os.getpid()}")
    env = {"WORDCAST_ROUTER_MAPPING_POLL_S": "0.3", "WORDCAST_ROUTER_PUBLICATION_LOG_RATE": "1"}
    cluster = start_cluster(redis_url, namespace, matchers=2, env=env)
    client = connect_sync(redis_url)
    try:
        posts = sample_posts(4_000, seed=717)
        already = receiver.count()
        keywords = subscribe_terms(
            cluster, post_queries(posts[:1_500], 300, seed=71), receiver.hook
        )
        publish_posts(cluster, posts[:1_500])  # every one is logged (rate 1): the learner's input
        result = _scale(cluster, redis_url, "3", "--algorithm", "salb")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "mapping v1 for 3 matchers written" in result.stdout
        assert client.get(f"{namespace}:mapping:latest") == "1", "the learned version alone"
        meta = client.hgetall(f"{namespace}:mapping:1:meta")
        assert (meta["matchers"], meta["algorithm"], meta["reason"]) == ("3", "salb", "scale")
        assert client.get(f"{namespace}:mapping:active") == "1"
        logged = "".join(cluster.output)
        assert "has not registered" not in logged
        assert "not usable" not in logged
        assert len(placed_on(client, namespace, 2)) > 0, "LASP moved some to matcher 2"
        publish_posts(cluster, posts[1_500:])
        analysed = {p.id: analyse(p.text) for p in posts}
        expected = match_pairs(keywords, analysed)
        assert len(expected) > 300
        check_exact(
            _quiet(client, namespace, receiver, already + len(expected))[already:], expected
        )
    finally:
        stop_cluster(cluster)


def test_drain_with_no_number_recorded_lets_the_matcher_go(redis_url: str, namespace: str) -> None:
    result = _wordcast(
        "drain", "--ordinal", "5", env={"REDIS_URL": redis_url, "WORDCAST_NAMESPACE": namespace}
    )
    assert result.returncode == 0, result.stderr
    assert "matcher-5: stays (no number of matchers recorded): nothing to drain" in result.stdout


def _matcher_of(client: Any, namespace: str, sub_id: str) -> int | None:
    stored = stored_record(client, namespace, sub_id)
    return None if stored is None else stored.matcher
