"""Each subscription's counters: its matches, those delivered, those given up on, and when it
last matched.

Matchers and dispatchers tally in memory and add their tallies every second or so
(:mod:`wordcast.services.matcher.counting`), one script per shard for a whole tally: a count is
never a Redis call per match. A subscription's counters are one value in its shard's
``{ns}:counters`` hash, "matched delivered failed last-match", added to only while its record
exists (a tally that arrives after its deletion changes nothing) and deleted with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wordcast.storage.lua import LuaScript
from wordcast.storage.redis import translated
from wordcast.storage.shards import Shards

# KEYS: 1 the shard's counters, then each subscription's bucket. ``tallies``: per subscription
# (five each): its id, matched, delivered and failed to add, and a match time (0: none; the
# later one is kept).
_ADD = LuaScript(
    "",
    """
for i = 2, #KEYS do
  local at = (i - 2) * 5
  local id = tallies[at + 1]
  if redis.call('HEXISTS', KEYS[i], id) == 1 then
    local m, d, f, t = 0, 0, 0, 0
    local held = redis.call('HGET', KEYS[1], id)
    if held then
      m, d, f, t = string.match(held, '^(%S+) (%S+) (%S+) (%S+)$')
    end
    local last = math.max(tonumber(t), tonumber(tallies[at + 5]))
    redis.call('HSET', KEYS[1], id, string.format('%d %d %d %.3f',
      tonumber(m) + tonumber(tallies[at + 2]), tonumber(d) + tonumber(tallies[at + 3]),
      tonumber(f) + tonumber(tallies[at + 4]), last))
  end
end
return 0
""",
    rest="tallies",
)

ADD_MOST = 500  # subscriptions a script adds to at once


@dataclass
class Tally:
    """What happened to one subscription's matches since the last flush, or in all."""

    matched: int = 0
    delivered: int = 0
    failed: int = 0
    last_match: float = 0.0  # Unix time; 0: never

    def add(self, other: Tally) -> None:
        self.matched += other.matched
        self.delivered += other.delivered
        self.failed += other.failed
        self.last_match = max(self.last_match, other.last_match)

    def shown(self) -> dict[str, Any]:
        return {
            "matched": self.matched,
            "delivered": self.delivered,
            "failed": self.failed,
            "last_match": self.last_match or None,
        }


class SubscriptionCounters:
    def __init__(self, client: Any, shards: Shards) -> None:
        self.client = client
        self.shards = shards
        self._add = client.register_script(_ADD)

    async def add(self, tallies: Mapping[str, Tally]) -> None:
        """Add each subscription's tally to its counters (those deleted meanwhile: none)."""
        shards = await self.shards.keys()
        groups = await self.shards.group(tallies.items(), lambda item: item[0])
        calls = []
        for shard, items in groups.items():
            keys = shards[shard]
            for start in range(0, len(items), ADD_MOST):
                part = items[start : start + ADD_MOST]
                rows: list[str | int | float] = []
                for sub_id, t in part:
                    rows += [sub_id, t.matched, t.delivered, t.failed, t.last_match]
                touched = [keys.counters, *(keys.record_of(sub_id) for sub_id, _ in part)]
                calls.append(self._add(keys=touched, args=_ADD.args(tallies=rows)))
        with translated("adding to subscriptions' counters"):
            await asyncio.gather(*calls)

    async def read(self, sub_ids: Sequence[str]) -> dict[str, Tally]:
        """Each subscription's counters (zero for one never counted)."""
        shards = await self.shards.keys()
        groups = await self.shards.group(list(dict.fromkeys(sub_ids)), lambda sub_id: sub_id)
        found = {sub_id: Tally() for sub_id in sub_ids}
        with translated("reading subscriptions' counters"):
            for shard, ids in groups.items():
                values = await self.client.hmget(shards[shard].counters, ids)
                for sub_id, value in zip(ids, values, strict=True):
                    if value:
                        m, d, f, t = str(value).split()
                        found[sub_id] = Tally(int(m), int(d), int(f), float(t))
        return found

    async def forget(self, sub_ids: Sequence[str]) -> None:
        """Delete the counters of subscriptions that are gone."""
        shards = await self.shards.keys()
        groups = await self.shards.group(sub_ids, lambda sub_id: sub_id)
        with translated("deleting subscriptions' counters"):
            for shard, ids in groups.items():
                await self.client.hdel(shards[shard].counters, *ids)
