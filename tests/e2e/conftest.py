"""The end-to-end suite's fixtures: a real Redis server (or Redis Cluster) the suite starts
itself, a receiver, a local cluster per module, and one SparkSession."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.helpers import (
    Receiver,
    RunningCluster,
    eventually,
    start_cluster,
    start_redis_server,
    stop_cluster,
)
from wordcast.local.redis_server import start_redis_cluster
from wordcast.local.supervisor import free_port
from wordcast.storage.redis import stored_namespace


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A redis-server process for the whole suite; with WORDCAST_TEST_REDIS_SHARDS=K, a Redis
    Cluster of K masters and a replica each (``make test-redis-cluster``)."""
    shards = int(os.environ.get("WORDCAST_TEST_REDIS_SHARDS", "0"))
    if shards:
        with tempfile.TemporaryDirectory(prefix="wordcast-test-redis-cluster-") as data:
            processes, url = start_redis_cluster(shards, data)
            try:
                yield url
            finally:
                for process in processes:
                    process.terminate()
                for process in processes:
                    process.wait(10)
        return
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="wordcast-test-redis-") as data:
        process = start_redis_server(port, data)
        try:
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait(10)


@pytest.fixture
def namespace(redis_url: str) -> str:
    return stored_namespace(redis_url, f"test-{uuid.uuid4().hex[:10]}")


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "wordcast", "receiver", "--port", str(port), "--quiet"],
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        eventually(answers, 30, 0.05, "the receiver answering")
    except AssertionError:
        process.kill()
        raise
    yield Receiver(process, url)
    process.terminate()
    process.wait(10)


@pytest.fixture(scope="module")
def cluster(redis_url: str) -> Iterator[RunningCluster]:
    # The console's charts get a point every half second instead of every 10 s.
    fast_history = {"WORDCAST_ROUTER_HISTORY_EVERY_S": "0.5"}
    running = start_cluster(redis_url, f"test-{uuid.uuid4().hex[:10]}", env=fast_history)
    yield running
    stop_cluster(running)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for every Spark test (starting a JVM takes seconds)."""
    from wordcast.spark_jobs.session import spark_session

    session = spark_session("wordcast-tests", "local[2]")
    yield session
    session.stop()
