"""Locks in Redis, taken shared or exclusive, so that requests that would race are served one
at a time.

Idempotency keys: a keyed subscription's id is fixed by its key
(:func:`wordcast.services.router.batches.keyed_id`); two requests with the same key at once
would both find nothing stored and both store, so each takes its keys' locks (``key:ID``)
exclusive. Webhook URLs: subscribing to a URL takes its lock (``url:HASH``) shared, so that
imports to one URL run side by side, while changing or deleting its endpoint takes it exclusive.

A request takes all its locks in one script, all or none, each lapsing after ``ttl_ms`` so that a
router killed while holding one cannot hold it for ever, and gives back only those still its own
(a token of its own in each). The keys live in the namespace's slot, so one script covers them on
a Redis Cluster too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wordcast.storage.keys import Keys
from wordcast.storage.lua import LuaScript
from wordcast.storage.redis import translated

# Redis's clock, in milliseconds.
_NOW = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
"""

# KEYS, in pairs for each name: the exclusive holder's key, the shared holders' sorted set
# (token -> when it lapses, ms). Each script takes every lock, or none.
_TAKE_SHARED = LuaScript(
    "token ttl_ms",
    _NOW
    + """
for k = 1, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[k]) == 1 then return 0 end
end
for k = 2, #KEYS, 2 do
  redis.call('ZADD', KEYS[k], now + tonumber(ttl_ms), token)
  redis.call('PEXPIRE', KEYS[k], ttl_ms)
end
return 1
""",
)

_TAKE_EXCLUSIVE = LuaScript(
    "token ttl_ms",
    _NOW
    + """
for k = 1, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[k]) == 1 then return 0 end
  redis.call('ZREMRANGEBYSCORE', KEYS[k + 1], '-inf', now)
  if redis.call('ZCARD', KEYS[k + 1]) > 0 then return 0 end
end
for k = 1, #KEYS, 2 do redis.call('SET', KEYS[k], token, 'PX', ttl_ms) end
return 1
""",
)

_GIVE_BACK = LuaScript(
    "token",
    """
for k = 2, #KEYS, 2 do redis.call('ZREM', KEYS[k], token) end
for k = 1, #KEYS, 2 do
  if redis.call('GET', KEYS[k]) == token then redis.call('DEL', KEYS[k]) end
end
return 0
""",
)


class Locks:
    """Locks on names (``{ns}:name-lock:{name}`` and ``…:shared``) taken shared or exclusive."""

    def __init__(self, client: Any, keys: Keys) -> None:
        self._keys = keys
        self._take_shared = client.register_script(_TAKE_SHARED)
        self._take_exclusive = client.register_script(_TAKE_EXCLUSIVE)
        self._give_back = client.register_script(_GIVE_BACK)

    def _locks(self, names: Sequence[str]) -> list[str]:
        found = []
        for name in sorted(set(names)):
            found += [
                f"{self._keys.ns}:name-lock:{name}",
                f"{self._keys.ns}:name-lock:{name}:shared",
            ]
        return found

    async def take(self, names: Sequence[str], token: str, ttl_ms: int, shared: bool) -> bool:
        """Take the locks of ``names`` for ``token``, all or none."""
        script, lua = (
            (self._take_shared, _TAKE_SHARED) if shared else (self._take_exclusive, _TAKE_EXCLUSIVE)
        )
        with translated("taking locks"):
            taken = await script(keys=self._locks(names), args=lua.args(token=token, ttl_ms=ttl_ms))
        return bool(taken)

    async def give_back(self, names: Sequence[str], token: str) -> None:
        with translated("giving locks back"):
            await self._give_back(keys=self._locks(names), args=_GIVE_BACK.args(token=token))
