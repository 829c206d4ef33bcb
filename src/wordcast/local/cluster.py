"""A local cluster of real processes: Redis, one router, N matchers and (optionally) a receiver.

Each service runs as its own process, exactly as on Kubernetes, under a :class:`Supervisor` that
restarts one that dies and stops them all on Ctrl-C or SIGTERM.

Like a StatefulSet controller, the cluster also follows the number of matchers asked for with
``wordcast scale`` (:mod:`wordcast.ops.scaling`): it starts the missing ones at once, and stops the
extra ones only once the cluster has moved every subscription off them and no router still uses a
mapping version that routes to them.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from wordcast.local.redis_server import (
    CLUSTER_NODE_TIMEOUT_MS,
    MIN_SHARDS,
    cluster_url,
    form_redis_cluster,
    free_cluster_ports,
    reach_redis,
    redis_cluster_node_argv,
    redis_ready,
    redis_server_argv,
)
from wordcast.local.supervisor import Service, Supervisor, free_port, http_ready
from wordcast.storage import Store

# A dead node of the embedded Redis Cluster comes back only once its replica has surely taken
# over: twice the time the others take to declare it failed.
NODE_RESTART_AFTER_S = 2 * CLUSTER_NODE_TIMEOUT_MS / 1000


class Cluster(Supervisor):
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
        redis_shards: int = 0,
    ) -> None:
        self.matcher_count = matchers
        self._initial_matchers = matchers
        self.port = port
        self._given = {port}  # every port handed to a service of this cluster
        self.namespace = namespace
        self.log_level = log_level
        super().__init__(out)
        self._own_dir = data_dir is None
        self.data_dir = data_dir or Path(tempfile.mkdtemp(prefix="wordcast-"))
        self.redis_node_ports: list[int] = []  # an embedded Redis Cluster's nodes
        if redis_url:
            self.redis_url = redis_url
        elif redis_shards:
            self.redis_url = self._embedded_redis_cluster(redis_shards)
        else:
            self.redis_url = self._embedded_redis()
        self._common_env = {
            "REDIS_URL": self.redis_url,
            "WORDCAST_NAMESPACE": namespace,
            # A local development cluster delivers to receivers on this machine; a deployment
            # leaves the allow-list empty (see wordcast.webhooks.netguard).
            "WORDCAST_CALLBACK_ALLOW": os.environ.get("WORDCAST_CALLBACK_ALLOW", "127.0.0.0/8,::1"),
        }
        self._ports: dict[int, int] = {}
        self.matcher_urls: list[str] = []
        for ordinal in range(matchers):
            self.services.append(self._matcher(ordinal))
        self.router_url = f"http://127.0.0.1:{port}"
        self.services.append(self._router())
        self.receiver_url: str | None = None
        if receiver:
            self.services.append(self._receiver(receiver_quiet))

    def _new_port(self) -> int:
        """A free port that no other service of this cluster was given: a port is free until
        its service binds it, so ``free_port`` alone could hand the router's to a matcher."""
        while True:
            port = free_port()
            if port not in self._given:
                self._given.add(port)
                return port

    def _embedded_redis(self) -> str:
        """Add a Redis server of the cluster's own (append-only, fsync every second); its URL."""
        redis_port = self._new_port()
        url = f"redis://127.0.0.1:{redis_port}/0"
        redis_dir = self.data_dir / "redis"
        redis_dir.mkdir(parents=True, exist_ok=True)
        argv = redis_server_argv(redis_port, str(redis_dir), appendfsync="everysec")
        self.services.append(Service("redis", argv, {}, redis_ready(url)))
        return url

    def _embedded_redis_cluster(self, shards: int) -> str:
        """Add the nodes of a Redis Cluster of the cluster's own: ``shards`` masters and a replica
        each (formed once all answer, in :meth:`start`); its URL. The ports are kept beside the
        data, so that the nodes started again on a ``--data-dir`` find each other where their
        node tables say."""
        if shards < MIN_SHARDS:
            raise ValueError(
                f"--redis-shards must be at least {MIN_SHARDS} (Redis Cluster's least)"
            )
        root = self.data_dir / "redis-cluster"
        root.mkdir(parents=True, exist_ok=True)
        kept = root / "ports.json"
        ports = json.loads(kept.read_text()) if kept.exists() else []
        if len(ports) != 2 * shards:
            ports = free_cluster_ports(2 * shards)
            kept.write_text(json.dumps(ports))
        self.redis_node_ports = ports
        self._given.update(ports)
        for k, port in enumerate(ports):
            node_dir = root / f"node-{port}"
            node_dir.mkdir(exist_ok=True)
            ready = redis_ready(f"redis://127.0.0.1:{port}/0")
            argv = redis_cluster_node_argv(port, str(node_dir))
            node = Service(f"redis-{k}", argv, {}, ready, restart_after_s=NODE_RESTART_AFTER_S)
            self.services.append(node)
        return cluster_url(ports)

    def _router(self) -> Service:
        env = self._common_env | {
            "WORDCAST_ROUTER_PORT": str(self.port),
            "WORDCAST_ROUTER_MATCHER_URLS": ",".join(self.matcher_urls),
            "WORDCAST_ROUTER_LOG_LEVEL": self.log_level,
            # A local cluster is a development cluster: its "dev" tenant's well-known key works.
            "WORDCAST_ENVIRONMENT": os.environ.get("WORDCAST_ENVIRONMENT", "development"),
        }
        argv = [sys.executable, "-m", "wordcast", "router"]
        return Service("router", argv, env, http_ready(f"{self.router_url}/readyz"))

    def _receiver(self, quiet: bool) -> Service:
        rport = self._new_port()
        self.receiver_url = f"http://127.0.0.1:{rport}"
        env = {
            "WORDCAST_RECEIVER_PORT": str(rport),
            "WORDCAST_RECEIVER_QUIET": "true" if quiet else "false",
            "WORDCAST_RECEIVER_RECORD": "false",
        }
        argv = [sys.executable, "-m", "wordcast", "receiver"]
        return Service("receiver", argv, env, http_ready(f"{self.receiver_url}/healthz"))

    def _matcher(self, ordinal: int) -> Service:
        """A matcher service for ``ordinal`` on a port of its own (its URL appended); the same
        port when the ordinal comes back after scaling down, as routers may be configured with
        its URL (a StatefulSet pod keeps its DNS name the same way)."""
        if ordinal not in self._ports:
            self._ports[ordinal] = self._new_port()
        mport = self._ports[ordinal]
        url = f"http://127.0.0.1:{mport}"
        self.matcher_urls.append(url)
        env = self._common_env | {
            "WORDCAST_MATCHER_ORDINAL": str(ordinal),
            "WORDCAST_MATCHER_PORT": str(mport),
            "WORDCAST_MATCHER_LOG_LEVEL": self.log_level,
            # Its restart reads what it holds from there, and only the changes since from Redis.
            "WORDCAST_MATCHER_CHECKPOINT_DIR": os.environ.get(
                "WORDCAST_MATCHER_CHECKPOINT_DIR", str(self.data_dir / "checkpoints")
            ),
        }
        argv = [sys.executable, "-m", "wordcast", "matcher"]
        return Service(f"matcher-{ordinal}", argv, env, http_ready(f"{url}/readyz"))

    @property
    def callback_url(self) -> str:
        if self.receiver_url is None:
            raise RuntimeError("this cluster has no demo receiver")
        return f"{self.receiver_url}/hook"

    def start(self, timeout: float = 60.0) -> None:
        if not any(service.name.startswith("redis") for service in self.services):
            reach_redis(self.redis_url)
        nodes = len(self.redis_node_ports)
        for k, service in enumerate(self.services):
            self._spawn(service)
            self._wait_ready(service, timeout)
            if nodes and k == nodes - 1:  # every node of the embedded Redis Cluster answers
                form_redis_cluster(self.redis_node_ports, replicas=1, timeout=timeout)
        self.start_watching()
        self._scaler = threading.Thread(target=self._follow_scale, name="scaler", daemon=True)
        self._scaler.start()

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
                    wanted = await store.membership.matchers_wanted()
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
            released = await release_outbox_entries(store, gone)
            for ordinal in gone:
                await store.membership.forget_matcher(ordinal)
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

    def stop(self) -> None:
        self.stop_all()
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


async def release_outbox_entries(store: Store, ordinals: range) -> int:
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


def describe(cluster: Cluster) -> Sequence[str]:
    lines = [
        f"router    {cluster.router_url}  (console at {cluster.router_url}/console, API docs "
        f"at {cluster.router_url}/docs)"
    ]
    lines += [f"matcher-{i} {url}" for i, url in enumerate(cluster.matcher_urls)]
    lines.append(f"redis     {cluster.redis_url}")
    if cluster.receiver_url:
        lines.append(f"receiver  {cluster.callback_url}")
    return lines
