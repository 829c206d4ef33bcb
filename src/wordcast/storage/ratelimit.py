"""Per-tenant publication rate limit: a token bucket in Redis, shared by every router.

Each tenant's bucket holds up to ``burst`` publications and refills at ``rate`` per second; a batch
takes as many tokens as it has publications, all or none. The bucket lives in Redis (one Lua
script, Redis's own clock) so that a tenant cannot multiply its rate by spreading requests over
routers. A router that cannot reach Redis within ``RATE_CHECK_DEADLINE_S`` refuses the batch (503)
rather than hold it.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from wordcast.storage.lua import LuaScript
from wordcast.storage.redis import deadline, translated

RATE_CHECK_DEADLINE_S = 2.0

# A token bucket: KEYS its hash. Answers how long to wait before ``cost`` may be spent (0: spent).
_TAKE = LuaScript(
    "per_second most to_spend",
    """
local rate, burst, cost = tonumber(per_second), tonumber(most), tonumber(to_spend)
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1e6
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local wait = 0
if tokens >= cost then tokens = tokens - cost else wait = (cost - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(burst / rate) + 60)
return tostring(wait)
""",
)


class RateLimiter:
    def __init__(self, client: aioredis.Redis, namespace: str, rate: float, burst: float) -> None:
        self.client: Any = client
        self.ns = namespace
        self.rate = rate
        self.burst = burst
        self._take = client.register_script(_TAKE)

    async def take(self, tenant: str, cost: int) -> float:
        """0 if the tenant may publish ``cost`` publications now, else seconds to wait."""
        action = "checking the rate limit"
        with translated(action):
            async with deadline(RATE_CHECK_DEADLINE_S, action):
                wait = await self._take(
                    keys=[f"{self.ns}:rate:{tenant}"],
                    args=_TAKE.args(per_second=self.rate, most=self.burst, to_spend=cost),
                )
        return float(wait)
