"""Redis restarts under load: services reconnect by themselves and nothing acknowledged is lost."""

from __future__ import annotations

import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.support import check_exact, delivered_after, publish_posts
from tests.helpers import AUTH, Receiver, start_cluster, start_redis_server, stop_cluster
from wordcast.corpus.workload import Post, post_queries, sample_posts
from wordcast.local.supervisor import free_port
from wordcast.query.analysis import analyse
from wordcast.testing.bruteforce import match_pairs


class RestartableRedis:
    """A redis-server with append-only persistence, on a fixed port and data directory."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.directory = directory
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = start_redis_server(self.port, str(self.directory), append_only=True)

    def stop(self) -> None:
        assert self.process is not None
        self.process.terminate()
        self.process.wait(20)


@pytest.fixture
def own_redis() -> Iterator[RestartableRedis]:
    with tempfile.TemporaryDirectory(prefix="wordcast-restart-") as data:
        server = RestartableRedis(Path(data))
        server.start()
        yield server
        if server.process and server.process.poll() is None:
            server.stop()


def test_cluster_survives_a_redis_restart(own_redis: RestartableRedis, receiver: Receiver) -> None:
    cluster = start_cluster(own_redis.url, "test-restart")
    try:
        posts = sample_posts(6_000, seed=808)
        router = httpx.Client(base_url=cluster.router_url, timeout=30, headers=AUTH)
        subs = {}
        for query in post_queries(posts[:3_000], 200, seed=809):
            created = router.post(
                "/subscriptions", json={"query": query, "callback_url": receiver.hook}
            )
            assert created.status_code == 201
            subs[created.json()["id"]] = analyse(query)

        # A steady stream of publications while Redis goes away and comes back.
        stop = threading.Event()
        outcomes: list[int] = []

        def stream() -> None:
            with httpx.Client(base_url=cluster.router_url, timeout=30, headers=AUTH) as client:
                n = 0
                while not stop.is_set():
                    batch = [
                        {"id": f"during:{n}:{k}", "text": posts[(n + k) % 3_000].text}
                        for k in range(20)
                    ]
                    try:
                        outcomes.append(
                            client.post("/publications", json={"publications": batch}).status_code
                        )
                    except httpx.HTTPError:
                        outcomes.append(0)
                    n += 20
                    time.sleep(0.05)

        publisher = threading.Thread(target=stream, daemon=True)
        publisher.start()
        time.sleep(1.0)
        own_redis.stop()
        time.sleep(1.0)
        own_redis.start()
        restarted = time.monotonic()

        # The cluster serves again within seconds, without being told.
        while True:
            probe = router.post("/publications", json={"text": "are you back"})
            if probe.status_code == 202:
                break
            assert time.monotonic() - restarted < 15, f"still {probe.status_code}: {probe.text}"
            time.sleep(0.2)
        stop.set()
        publisher.join(30)
        both_sides = "the stream should have run on both sides of the outage"
        assert 202 in outcomes, both_sides
        assert any(code != 202 for code in outcomes), both_sides

        # No acknowledged subscription was lost.
        for sub_id in subs:
            kept = router.get(f"/subscriptions/{sub_id}")
            assert kept.status_code == 200, kept.text

        # And matching and delivery work as before: exactly the oracle for a fresh batch.
        cluster.wait_ready()
        delivered_after(cluster, receiver, 0, 0)  # let the outage's stragglers finish
        after = [Post(f"after:{p.id}", p.text) for p in posts[3_000:]]
        expected = match_pairs(subs, {p.id: analyse(p.text) for p in after})
        assert len(expected) > 300
        offset = receiver.count()
        publish_posts(cluster, after)
        delivered = [
            pair
            for pair in delivered_after(cluster, receiver, offset, len(expected))
            if pair[1].startswith("after:")
        ]
        check_exact(delivered, expected)
    finally:
        stop_cluster(cluster)


def test_a_router_cut_off_from_redis_turns_unready_and_recovers(
    own_redis: RestartableRedis,
) -> None:
    """A router that cannot report its mapping version must leave the load balancer's rotation
    before its report expires (a migration could retire the version it routes with), and come back
    by itself once Redis does."""
    cluster = start_cluster(
        own_redis.url, "test-fence", env={"WORDCAST_ROUTER_MAPPING_POLL_S": "0.5"}
    )
    try:
        router = httpx.Client(base_url=cluster.router_url, timeout=30, headers=AUTH)
        assert router.get("/readyz").status_code == 200
        own_redis.stop()
        stopped = time.monotonic()
        while True:  # the fence is 3 polls (1.5 s) after the last report
            probe = router.get("/readyz")
            if probe.status_code == 503:
                break
            assert time.monotonic() - stopped < 15, "the router stayed ready without Redis"
            time.sleep(0.2)
        assert "cannot report its mapping version" in probe.json()["detail"]
        assert router.post("/publications", json={"text": "anyone there"}).status_code == 503

        own_redis.start()
        restarted = time.monotonic()
        while router.get("/readyz").status_code != 200:
            assert time.monotonic() - restarted < 20, "the router did not come back"
            time.sleep(0.2)
        assert router.post("/publications", json={"text": "back again"}).status_code == 202
    finally:
        stop_cluster(cluster)
