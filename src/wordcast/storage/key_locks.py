"""Locks on idempotency keys, so that requests using one key at once are served one at a time.

A keyed subscription's id is fixed by its key (:func:`wordcast.services.router.batches.keyed_id`);
two requests with the same key at once would both find nothing stored and both store. A request
takes the locks of all its keys in one script, all or none (``{ns}:key-lock:{id}``, each expiring
after ``ttl_ms`` so that a router killed while holding one cannot hold it for ever), and gives back
only those still its own (a token of its own in each). The keys live in the namespace's slot, so
one script covers them on a Redis Cluster too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wordcast.storage.keys import Keys
from wordcast.storage.lua import LuaScript
from wordcast.storage.redis import translated

# KEYS: the locks. Takes every one, or none if any is held: 1 taken, 0 not.
_TAKE = LuaScript(
    "token ttl_ms",
    """
for _, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 1 then return 0 end
end
for _, key in ipairs(KEYS) do redis.call('SET', key, token, 'PX', ttl_ms) end
return 1
""",
)

# KEYS: the locks. Deletes those that still hold ``token``.
_GIVE_BACK = LuaScript(
    "token",
    """
for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == token then redis.call('DEL', key) end
end
return 0
""",
)


class KeyLocks:
    def __init__(self, client: Any, keys: Keys) -> None:
        self._keys = keys
        self._take = client.register_script(_TAKE)
        self._give_back = client.register_script(_GIVE_BACK)

    def _locks(self, ids: Sequence[str]) -> list[str]:
        return [f"{self._keys.ns}:key-lock:{sub_id}" for sub_id in sorted(set(ids))]

    async def take(self, ids: Sequence[str], token: str, ttl_ms: int) -> bool:
        """Take the locks of ``ids`` (keyed subscription ids) for ``token``: all, or none."""
        with translated("locking idempotency keys"):
            taken = await self._take(
                keys=self._locks(ids), args=_TAKE.args(token=token, ttl_ms=ttl_ms)
            )
        return bool(taken)

    async def give_back(self, ids: Sequence[str], token: str) -> None:
        with translated("unlocking idempotency keys"):
            await self._give_back(keys=self._locks(ids), args=_GIVE_BACK.args(token=token))
