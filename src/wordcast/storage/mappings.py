"""Mapping versions in Redis: written once by the learner, switched to by the routers.

Keys (under the namespace):

``{ns}:mapping:next``           counter that hands out version numbers (version 0 is stable hashing)
``{ns}:mapping:{v}:words``      hash word -> matcher (hot words as their copies ``word#j``)
``{ns}:mapping:{v}:hot``        hash hot word -> "copies frequency" (S³-TM §5.1)
``{ns}:mapping:{v}:meta``       hash: matchers (the number of matchers it routes to: a version for
                                another number is how the cluster is scaled), algorithm, created,
                                posts, and the learner's figures; written last, so a version with
                                meta is complete
``{ns}:mapping:initial``        how many matchers version 0 hashes over (the first router's
                                configuration; set once)
``{ns}:mapping:latest``         the newest complete version (announced on ``{ns}:mapping:announce``)
``{ns}:mapping:active``         the version routers route new batches with
``{ns}:mapping:window``         "low high": versions routers may still be routing with (see
                                :mod:`wordcast.routing.placement`); kept in step by
                                :mod:`wordcast.ops.migration`, and copied into every other
                                shard of the subscription records (:mod:`.shards`)
``{ns}:mapping:retiring``       v while the placements that served only versions before v are being
                                dropped (the window is "v v" already): a router that finds it set
                                finishes the work of one that stopped midway
``{ns}:mapping:lock``           held by the one router that is moving subscriptions to a new version
``{ns}:mapping:problem``        why the last attempt to move to a new version stopped (expires)
``{ns}:router:{id}``            each live router's oldest version in use, refreshed with a short TTL

A version is immutable once written: routers cache it forever.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import redis.asyncio as aioredis

from wordcast.errors import MappingError
from wordcast.routing.mapping import HashMapping, LearnedMapping
from wordcast.storage.lua import LuaScript
from wordcast.storage.redis import on_cluster, translated
from wordcast.storage.shards import Shards

CHUNK = 10_000

# KEYS: the latest version, the channel it is announced on.
_RAISE_LATEST = LuaScript(
    "version",
    """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(version) > current then redis.call('SET', KEYS[1], version) end
return redis.call('PUBLISH', KEYS[2], version)
""",
)

# KEYS: the migration lock.
_RELEASE = LuaScript(
    "owner",
    """
if redis.call('GET', KEYS[1]) == owner then return redis.call('DEL', KEYS[1]) end
return 0
""",
)

# KEYS: the version being retired.
_RETIRED = LuaScript(
    "version",
    """
local retiring = redis.call('GET', KEYS[1])
if retiring and tonumber(retiring) <= tonumber(version) then return redis.call('DEL', KEYS[1]) end
return 0
""",
)

# KEYS: the migration lock.
_RENEW = LuaScript(
    "owner ttl_ms",
    """
if redis.call('GET', KEYS[1]) == owner then return redis.call('PEXPIRE', KEYS[1], ttl_ms) end
return 0
""",
)


class MappingStore:
    def __init__(
        self, client: aioredis.Redis, namespace: str = "wordcast", shards: Shards | None = None
    ) -> None:
        self.client: Any = client
        self.ns = namespace
        self.shards = shards or Shards(client, namespace)
        self._raise_latest = client.register_script(_RAISE_LATEST)
        self._release = client.register_script(_RELEASE)
        self._renew = client.register_script(_RENEW)
        self._retired = client.register_script(_RETIRED)

    def key(self, name: str) -> str:
        return f"{self.ns}:mapping:{name}"

    @property
    def channel(self) -> str:
        return self.key("announce")

    # -- versions -----------------------------------------------------------------------------
    async def announcements(self) -> Any:
        """A pub/sub subscribed (once awaited: ``await pubsub.subscribe``) to announcements."""
        if on_cluster(self.client):
            # A cluster's pub/sub finds its node by the channel's slot: the client must have
            # learned the slots first (a no-op once it has).
            with translated("learning the Redis Cluster's slots"):
                await self.client.initialize()
        return self.client.pubsub()

    async def write(
        self,
        matchers: int,
        words: Mapping[str, int],
        splits: Mapping[str, int] | None = None,
        frequencies: Mapping[str, int] | None = None,
        meta: Mapping[str, object] | None = None,
    ) -> int:
        """Store a new immutable version and announce it; returns its number."""
        LearnedMapping(
            0, matchers, words, splits, frequencies
        )  # validates before anything is written
        splits, frequencies = splits or {}, frequencies or {}
        with translated("writing a mapping version"):
            version = int(await self.client.incr(self.key("next")))
            items = list(words.items())
            for start in range(0, len(items), CHUNK):
                await self.client.hset(
                    self.key(f"{version}:words"), mapping=dict(items[start : start + CHUNK])
                )
            if splits:
                hot = {w: f"{k} {frequencies.get(w, 0)}" for w, k in splits.items()}
                await self.client.hset(self.key(f"{version}:hot"), mapping=hot)
            fields: dict[str, str | int | float] = {
                "matchers": matchers,
                "created": time.time(),
                "words": len(words),
            }
            fields.update({k: str(v) for k, v in (meta or {}).items()})
            await self.client.hset(self.key(f"{version}:meta"), mapping=fields)
            await self._raise_latest(
                keys=[self.key("latest"), self.channel], args=_RAISE_LATEST.args(version=version)
            )
        return version

    async def meta(self, version: int) -> dict[str, str]:
        with translated("reading a mapping version"):
            return dict(await self.client.hgetall(self.key(f"{version}:meta")))

    async def record_initial(self, matchers: int) -> None:
        """Record version 0's number of matchers, for processes without a router's settings
        (``wordcast drain``); the first router to start sets it."""
        with translated("recording version 0's number of matchers"):
            await self.client.set(self.key("initial"), matchers, nx=True)

    async def initial(self) -> int | None:
        with translated("reading version 0's number of matchers"):
            value = await self.client.get(self.key("initial"))
        return int(value) if value is not None else None

    async def matchers_of(self, version: int, initial_matchers: int) -> int:
        """How many matchers ``version`` routes to: as many as it was made for; version 0 is
        stable hashing over the cluster's ``initial_matchers`` (a cluster changes its number of
        matchers by moving to a version made for the new number). Raises MappingError."""
        if version == 0:
            return initial_matchers
        meta = await self.meta(version)
        if not meta:
            raise MappingError(f"mapping version {version} does not exist (or is incomplete)")
        return int(meta["matchers"])

    async def load(self, version: int, initial_matchers: int) -> HashMapping:
        """Version ``version``, for as many matchers as it routes to (:meth:`matchers_of`)."""
        matchers = await self.matchers_of(version, initial_matchers)
        if version == 0:
            return HashMapping(matchers)
        with translated("reading a mapping version"):
            raw_words = await self.client.hgetall(self.key(f"{version}:words"))
            raw_hot = await self.client.hgetall(self.key(f"{version}:hot"))
        splits, frequencies = {}, {}
        for word, value in raw_hot.items():
            copies, frequency = value.split()
            splits[word], frequencies[word] = int(copies), int(frequency)
        words = {w: int(m) for w, m in raw_words.items()}
        return LearnedMapping(version, matchers, words, splits, frequencies)

    async def versions(self) -> list[int]:
        with translated("listing mapping versions"):
            last = int(await self.client.get(self.key("next")) or 0)
            pipe = self.client.pipeline(transaction=False)
            for version in range(1, last + 1):
                pipe.exists(self.key(f"{version}:meta"))
            found = await pipe.execute() if last else []
        return [v for v, exists in zip(range(1, last + 1), found, strict=True) if exists]

    # -- the routers' state -------------------------------------------------------------------
    async def state(self) -> tuple[int, int, tuple[int, int]]:
        """(latest, active, window)."""
        with translated("reading the mapping state"):
            latest, active, window = await self.client.mget(
                self.key("latest"), self.key("active"), self.key("window")
            )
        low, high = (window or "0 0").split()
        return int(latest or 0), int(active or 0), (int(low), int(high))

    async def set_window(self, low: int, high: int) -> None:
        with translated("moving the mapping window"):
            await self.client.set(self.key("window"), f"{low} {high}")
            await self._copy_window(f"{low} {high}")
            await self.client.publish(self.channel, "window")

    async def _copy_window(self, window: str) -> None:
        """The window into every other shard's copy, which its scripts check a placement
        against (:mod:`wordcast.storage.shards`); after the namespace's, so that a copy is
        never ahead of what routers read."""
        others = (await self.shards.keys())[1:]
        if others:
            pipe = self.client.pipeline(transaction=False)
            for keys in others:
                pipe.set(keys.window, window)
            await pipe.execute()

    async def narrow_window(self, version: int) -> None:
        """The window becomes "v v", and v is marked as being retired (until :meth:`retired`)."""
        with translated("narrowing the mapping window"):
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.set(self.key("window"), f"{version} {version}")
                pipe.set(self.key("retiring"), version)
                await pipe.execute()
            await self._copy_window(f"{version} {version}")
            await self.client.publish(self.channel, "window")

    async def retiring(self) -> int | None:
        """The version whose retirement was begun and not finished, if any."""
        with translated("reading the mapping retirement"):
            found = await self.client.get(self.key("retiring"))
        return int(found) if found is not None else None

    async def retired(self, version: int) -> None:
        """Every placement serving only versions before ``version`` is gone (an older mark too)."""
        with translated("recording a finished retirement"):
            await self._retired(keys=[self.key("retiring")], args=_RETIRED.args(version=version))

    async def activate(self, version: int) -> None:
        with translated("activating a mapping version"):
            await self.client.set(self.key("active"), version)
            await self.client.publish(self.channel, "active")

    # -- coordination -------------------------------------------------------------------------
    async def acquire(self, owner: str, ttl_ms: int) -> bool:
        with translated("taking the migration lock"):
            return bool(await self.client.set(self.key("lock"), owner, nx=True, px=ttl_ms))

    async def renew(self, owner: str, ttl_ms: int) -> bool:
        with translated("renewing the migration lock"):
            return bool(
                await self._renew(
                    keys=[self.key("lock")], args=_RENEW.args(owner=owner, ttl_ms=ttl_ms)
                )
            )

    async def release(self, owner: str) -> None:
        with translated("releasing the migration lock"):
            await self._release(keys=[self.key("lock")], args=_RELEASE.args(owner=owner))

    async def report_problem(self, problem: str, ttl_s: float) -> None:
        with translated("recording a migration problem"):
            await self.client.set(self.key("problem"), problem, px=int(ttl_s * 1000))

    async def clear_problem(self) -> None:
        with translated("clearing the migration problem"):
            await self.client.delete(self.key("problem"))

    async def problem(self) -> str | None:
        with translated("reading the last migration problem"):
            found = await self.client.get(self.key("problem"))
        return str(found) if found is not None else None

    async def heartbeat(self, router: str, oldest_in_use: int, ttl_s: float) -> None:
        with translated("recording the router's mapping version"):
            await self.client.set(f"{self.ns}:router:{router}", oldest_in_use, px=int(ttl_s * 1000))

    async def oldest_in_use(self) -> int | None:
        """The oldest mapping version any live router may still route with (None: no router)."""
        with translated("reading the routers' mapping versions"):
            keys = [k async for k in self.client.scan_iter(match=f"{self.ns}:router:*", count=1000)]
            found = await self.client.mget(keys) if keys else []
        # A report that expired between the scan and the read is simply gone.
        values = [int(value) for value in found if value is not None]
        return min(values) if values else None
