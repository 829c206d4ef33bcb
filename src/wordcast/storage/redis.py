"""The one Redis client of a process, and the translation of Redis's errors into wordcast's.

A URL whose scheme is ``redis+cluster://`` (or ``rediss+cluster://``) names one node of a Redis
Cluster: the process then talks to the cluster through redis-py's cluster client, which learns the
topology from that node and follows it through failovers and resharding. Every other URL is one
Redis (``redis://``, ``rediss://``, ``unix://``), as always.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import RedisError

from wordcast.errors import StoreUnavailable


@contextlib.contextmanager
def translated(action: str) -> Any:
    try:
        yield
    except RedisError as exc:
        raise StoreUnavailable(f"Redis failed while {action}: {exc}") from exc


@contextlib.asynccontextmanager
async def deadline(seconds: float, action: str, verb: str = "answer") -> Any:
    """Redis must ``verb`` within ``seconds`` for ``action``, else StoreUnavailable: a service cut
    off from Redis says so at once rather than hold a request while TCP keeps trying."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError as exc:
        raise StoreUnavailable(
            f"{action}: Redis did not {verb} within {seconds:g} s, so it is not acknowledged "
            "(retrying is safe)"
        ) from exc


SOCKET_TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 3.0
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


class _Cluster(RedisCluster):
    """redis-py's cluster client, which learns the slots before a command chooses its node.

    redis-py decides how to route a command before it first learns the slots: commands sent at
    once by a fresh client went to any node, came back MOVED, and the re-learning that followed
    closed connections under commands already sent, which it then sent again (a subscription
    stored twice). Learning the slots first avoids all of it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # redis-py's cluster pools refuse a command at once ("Too many connections") when a
        # node's connections are all busy, where one Redis's blocking pool waits up to
        # POOL_WAIT_S for one: commands here wait likewise, at most as many at once as a node
        # has connections (each holds one a node at most).
        self._free = asyncio.Semaphore(kwargs.get("max_connections", MAX_CONNECTIONS))

    @contextlib.asynccontextmanager
    async def connection_slot(self) -> Any:
        try:
            async with asyncio.timeout(POOL_WAIT_S):
                await self._free.acquire()
        except TimeoutError:
            raise redis.ConnectionError(
                f"no Redis connection free within {POOL_WAIT_S:g} s"
            ) from None
        try:
            yield
        finally:
            self._free.release()

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        if self._initialize:
            await self.initialize()
        async with self.connection_slot():
            # A node hands a connection back to its pool only after a task of its own has
            # disconnected it, when the command before was cut off (a client gone, a timeout):
            # until then a command holding a free slot may find none. redis-py raises that
            # before sending anything, so the command is safely sent again a moment later.
            loop = asyncio.get_running_loop()
            deadline = loop.time() + POOL_WAIT_S
            while True:
                try:
                    return await super().execute_command(*args, **kwargs)
                except redis.exceptions.MaxConnectionsError:
                    if loop.time() >= deadline:
                        raise
                    await asyncio.sleep(POOL_RECHECK_S)

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None) -> Any:
        if shard_hint:
            return super().pipeline(transaction, shard_hint)  # refused as redis-py refuses it
        return _Pipeline(self, transaction)  # type: ignore[abstract]  # as redis-py makes its own


class _Pipeline(ClusterPipeline):
    """A cluster pipeline that waits for a connection slot as its client's commands do."""

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        client: _Cluster = self.cluster_client  # type: ignore[assignment]  # made by _Cluster
        async with client.connection_slot():
            return await super().execute(*args, **kwargs)


def is_cluster(url: str) -> bool:
    """Whether ``url`` names a Redis Cluster (``redis+cluster://host:port``)."""
    return url.partition("://")[0].lower() in CLUSTER_SCHEMES


def node_url(url: str) -> str:
    """The plain Redis URL of the node a cluster URL names (``url`` itself otherwise)."""
    scheme, sep, rest = url.partition("://")
    return f"{CLUSTER_SCHEMES.get(scheme.lower(), scheme)}{sep}{rest}"


def stored_namespace(url: str, namespace: str) -> str:
    """The namespace as keys at ``url`` carry it: :func:`slot_namespace` on a Redis Cluster."""
    return slot_namespace(namespace) if is_cluster(url) else namespace


def connect_sync(url: str, **options: Any) -> Any:
    """A synchronous client (for jobs and tests outside an event loop): one Redis, or a Redis
    Cluster; text decoded unless ``decode_responses=False``."""
    options.setdefault("decode_responses", True)
    if is_cluster(url):
        return redis.RedisCluster.from_url(node_url(url), **options)
    return redis.Redis.from_url(url, **options)


def slot_namespace(namespace: str) -> str:
    """The namespace as a Redis Cluster hash tag: every key of the namespace then hashes to one
    slot, so each Lua script, transaction and multi-stream read touches one slot, as Redis
    Cluster requires. A namespace that holds a tag already is taken as it is."""
    return namespace if "{" in namespace else "{" + namespace + "}"


POOL_WAIT_S = 5.0  # how long a command waits for a free pooled connection before it fails
POOL_RECHECK_S = 0.005  # on a Redis Cluster, how often a command looks again for one
MAX_CONNECTIONS = 100


def body_readers(max_connections: int) -> int:
    """How many connections read match stream messages at once (each may hold a message's
    worth of buffer while it reads): few, as each read takes a millisecond or so."""
    return max(2, min(8, max_connections // 4))


def connect(url: str, max_connections: int = MAX_CONNECTIONS, decode: bool = True) -> Any:
    """One client (and so one connection pool) per process; responses decoded as text unless
    ``decode`` is false (then bytes, as Redis holds them).

    The pool holds at most ``max_connections`` connections (per node on a Redis Cluster). On one
    Redis a command that finds them all busy waits up to ``POOL_WAIT_S`` for one, rather than
    failing at once with "Too many connections": a burst of requests queues instead of failing
    every other request with it."""
    # Every command wordcast sends answers in milliseconds (a blocking read waits a second at
    # most): one that has not within the socket timeout means Redis is unreachable, and the
    # caller is told (a request gets 503; a background loop backs off and tries again) rather
    # than kept waiting for a retry that would wait as long again.
    options: dict[str, Any] = {
        "decode_responses": decode,
        "socket_timeout": SOCKET_TIMEOUT_S,
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
    }
    if is_cluster(url):
        # A failover takes the cluster's node timeout to be noticed and a few seconds to
        # settle: commands are retried across it rather than failing at the first refusal.
        retry = Retry(ExponentialBackoff(cap=2.0, base=0.1), retries=8)
        return _Cluster.from_url(
            node_url(url), retry=retry, max_connections=max_connections, **options
        )
    # A pooled connection that Redis closed (a restart) fails its next command at once: that is
    # retried on a new connection, a few times; a timeout (connecting included) is not: see above.
    reconnect = Retry(
        ExponentialBackoff(cap=0.5, base=0.02), retries=3, supported_errors=(redis.ConnectionError,)
    )
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=POOL_WAIT_S,
        health_check_interval=15,
        retry=reconnect,
        retry_on_error=[redis.ConnectionError],
        **options,
    )
    return aioredis.Redis.from_pool(pool)


def answers(url: str, timeout_s: float = 1.0) -> str | None:
    """Why the Redis at ``url`` does not answer a PING now (None if it does); for processes that
    start or wait for a Redis server (``wordcast up``), outside any event loop."""
    try:
        client = redis.Redis.from_url(
            node_url(url), socket_timeout=timeout_s, socket_connect_timeout=timeout_s
        )
    except ValueError as exc:
        return f"{url!r} is not a Redis URL: {exc}"
    try:
        client.ping()
        if is_cluster(url):
            info = client.cluster("info")  # parsed by redis-py: field -> value
            state = info.get("cluster_state") if isinstance(info, dict) else None
            if state not in ("ok", b"ok"):
                return "the Redis Cluster is not ready (cluster_state is not ok)"
        return None
    except redis.RedisError as exc:
        return str(exc) or type(exc).__name__
    finally:
        client.close()


def on_cluster(client: Any) -> bool:
    """Whether ``client`` (or a pipeline of it) talks to a Redis Cluster."""
    return isinstance(client, RedisCluster | ClusterPipeline)


async def node_of(client: Any, key: str) -> Any:
    """The cluster node (master) holding ``key``, the slots learned first if not yet."""
    await client.initialize()  # a no-op once the client knows the slots
    return client.get_node_from_key(key)


async def queue_script(pipe: Any, script: Any, keys: list[str], args: list[Any]) -> None:
    """Queue a registered Lua ``script`` on ``pipe``: by its SHA on one Redis (loaded once); on
    a Redis Cluster, whose pipelines refuse EVALSHA (a node may not have the script cached, a
    failed-over one least of all), as EVAL with its text, routed by its keys' slot."""
    if on_cluster(pipe):
        pipe.execute_command("EVAL", script.script, len(keys), *keys, *args)
    else:
        await script(keys=keys, args=args, client=pipe)


@dataclass(frozen=True)
class Replication:
    """How many replicas must hold a write before wordcast acknowledges it (Redis's ``WAIT``).

    Redis replicates asynchronously: a master that fails over loses the writes its replica had not
    received, and with them matches and subscriptions already acknowledged. Where this says
    ``replicas`` > 0, the writes that carry a promise (a routed batch's messages in the outbox, a
    subscription stored or deleted) are followed on the same connection by ``WAIT replicas
    timeout_ms``; fewer replicas within the timeout is an error, so the request is refused (503)
    and retried by its sender: the write may well have happened, and doing it again is safe (the
    same messages under the same webhook-ids; a subscription with an idempotency key). It costs
    each such write a round trip to a replica.

    Whatever ``replicas`` says, a promised write Redis has not confirmed within ``deadline_s`` is
    refused the same way: cut off from Redis, a service answers 503 after that long rather than
    holding the request for as long as TCP keeps trying."""

    replicas: int = 0
    timeout_ms: int = 2_000
    deadline_s: float = 5.0

    @classmethod
    def default_for(
        cls, url: str, replicas: int | None = None, timeout_ms: int = 2_000, deadline_s: float = 5.0
    ) -> Replication:
        """``replicas`` as given, else one on a Redis Cluster (whose masters have replicas to fail
        over to) and none on one Redis."""
        if replicas is None:
            replicas = 1 if is_cluster(url) else 0
        return cls(replicas, timeout_ms, deadline_s)

    async def queue_wait(self, pipe: Any, key: str) -> bool:
        """Queue the ``WAIT`` after the writes on ``pipe`` (to the node holding ``key``);
        whether it did (the pipeline's last reply is then the number of replicas reached)."""
        if not self.replicas:
            return False
        if on_cluster(pipe):
            node = await node_of(pipe.cluster_client, key)
            pipe.execute_command("WAIT", self.replicas, self.timeout_ms, target_nodes=node)
        else:
            pipe.execute_command("WAIT", self.replicas, self.timeout_ms)
        return True

    async def execute(self, pipe: Any, key: str, what: str) -> list[Any]:
        """The answers of what ``pipe`` holds, once enough replicas hold its writes (to the node
        of ``key``: every key of a namespace shares its slot)."""
        waiting = await self.queue_wait(pipe, key)
        async with self._deadline(what):
            replies: list[Any] = await pipe.execute()
        if waiting:
            self.check(replies.pop(), what)
        return replies

    async def run_script(
        self, client: Any, script: Any, keys: list[str], args: list[Any], what: str
    ) -> Any:
        """One registered script's answer, once enough replicas hold its write."""
        if not self.replicas:
            async with self._deadline(what):
                return await script(keys=keys, args=args)
        pipe = client.pipeline(transaction=False)
        await queue_script(pipe, script, keys, args)
        (answer,) = await self.execute(pipe, keys[0], what)
        return answer

    def _deadline(self, what: str) -> Any:
        return deadline(self.deadline_s, what, "confirm the write")

    def check(self, reached: Any, what: str) -> None:
        """Raise StoreUnavailable unless ``reached`` (WAIT's answer) is enough."""
        if int(reached) < self.replicas:
            raise StoreUnavailable(
                f"{what}: the write reached {reached} of the {self.replicas} Redis replicas "
                f"required within {self.timeout_ms} ms, so it is not acknowledged (retrying is "
                "safe)"
            )


NO_REPLICAS = Replication()  # one Redis: a write is acknowledged once Redis has it
