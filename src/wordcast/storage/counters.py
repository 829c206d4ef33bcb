"""Each subscription's counters: its matches, those delivered, those given up on, and when it
last matched.

Matchers and dispatchers tally in memory and add their tallies every second or so
(:mod:`wordcast.services.matcher.counting`), one script per shard for a whole tally: a count is
never a Redis call per match. A subscription's counters are one value in its shard's
``{ns}:counters`` hash, "matched delivered failed last-match created", added to only while its
record exists (a tally that arrives after its deletion changes nothing) and deleted with it.

Counters belong to one incarnation of a subscription: the record's ``created`` is kept beside
them, and a tally counts only events recorded since then (a tally's ``since``). A subscription
deleted and made again under the same id (the same idempotency key) starts from zero: its
predecessor's late tallies, and counters a failed deletion left behind, are not its own.

What a kill -9 loses: the tallies a matcher holds in memory, at most its last ``FLUSH_S`` (one
second) of matches, deliveries and failures (docs/GUIDE.md says so). Deliveries themselves are
not lost; only their counting.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wordcast.storage.lua import LuaScript
from wordcast.storage.redis import translated
from wordcast.storage.shards import Shards

# KEYS: 1 the shard's counters, then each subscription's bucket. ``tallies``: one string, seven
# words per subscription: its id, matched, delivered and failed to add, a match time ("%.3f";
# 0: none; the later one is kept), since when it counts (the earliest event in it), and the
# incarnation it belongs to ("%.6f" of its record's ``created``, known to the matcher), else "-".
# One string, not seven arguments a subscription: packing a flush's arguments one by one was
# most of a matcher's counting. A tally from before the record was made is an earlier
# incarnation's: dropped; counters of an earlier one are started afresh. A tally of the
# incarnation the counters already hold is added without reading the record (the counters of
# one that is gone are read by nobody: a re-made one's first tally starts them afresh). Values
# are joined, not formatted: the script's string work is most of what Redis spends on it.
_ADD = LuaScript(
    "tallies",
    """
local ids, words, n = {}, {}, 0
for id, am, ad, af, at, since, inc in
    string.gmatch(tallies, '(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)') do
  local base = n * 6
  n = n + 1
  ids[n] = id
  words[base + 1], words[base + 2], words[base + 3] = am, ad, af
  words[base + 4], words[base + 5], words[base + 6] = at, since, inc
end
if n == 0 then return 0 end
-- One read and one write of the counters for the lot (a subscription may have several
-- tallies: each sees what the one before it left).
local read = redis.call('HMGET', KEYS[1], unpack(ids))
local now, order = {}, {}
for k = 1, n do
  local id, base = ids[k], (k - 1) * 6
  local held = now[id] or read[k]
  local m, d, f, t, c = 0, 0, 0, '0', ''
  if held then m, d, f, t, c = string.match(held, '^(%S+) (%S+) (%S+) (%S+) ?(%S*)$') end
  local inc, created = words[base + 6], nil
  if held and c == inc then
    created = c
  else
    local record = redis.call('HGET', KEYS[k + 1], id)
    if record then
      local made = tonumber(cjson.decode(string.match(record, '\\n(.*)$'))[3]) or 0
      if tonumber(words[base + 5]) >= made then
        created = string.format('%.6f', made)
        if c ~= created then m, d, f, t = 0, 0, 0, '0' end
      end
    end
  end
  if created then
    local at = words[base + 4]
    if tonumber(at) > tonumber(t) then t = at end
    if now[id] == nil then order[#order + 1] = id end
    now[id] = (m + words[base + 1]) .. ' ' .. (d + words[base + 2]) .. ' ' ..
      (f + words[base + 3]) .. ' ' .. t .. ' ' .. created
  end
end
if #order > 0 then
  local pairs_ = {}
  for _, id in ipairs(order) do pairs_[#pairs_ + 1] = id; pairs_[#pairs_ + 1] = now[id] end
  redis.call('HSET', KEYS[1], unpack(pairs_))
end
return 0
""",
)

ADD_MOST = 500  # subscriptions a script adds to at once


@dataclass
class Tally:
    """What happened to one subscription's matches since the last flush, or in all."""

    matched: int = 0
    delivered: int = 0
    failed: int = 0
    last_match: float = 0.0  # Unix time; 0: never
    since: float = math.inf  # when the earliest event counted here was recorded (Unix time)
    incarnation: bool = False  # ``since`` is the incarnation's ``created``, known by a matcher

    def add(self, other: Tally) -> None:
        self.matched += other.matched
        self.delivered += other.delivered
        self.failed += other.failed
        self.last_match = max(self.last_match, other.last_match)
        self.since = min(self.since, other.since)
        self.incarnation = self.incarnation or other.incarnation

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

    async def add(self, tallies: Sequence[tuple[str, Tally]]) -> None:
        """Add each (subscription id, tally) to its counters (those deleted meanwhile: none;
        a subscription may have several tallies, each counted by its own ``since``)."""
        shards = await self.shards.keys()
        groups = await self.shards.group(tallies, lambda item: item[0])
        calls = []
        for shard, items in groups.items():
            keys = shards[shard]
            for start in range(0, len(items), ADD_MOST):
                part = items[start : start + ADD_MOST]
                now = time.time()
                rows = " ".join(
                    f"{sub_id} {t.matched} {t.delivered} {t.failed} {t.last_match:.3f} "
                    f"{t.since if t.since < math.inf else now!r} "
                    f"{f'{t.since:.6f}' if t.incarnation else '-'}"
                    for sub_id, t in part
                )
                touched = [keys.counters, *(keys.record_of(sub_id) for sub_id, _ in part)]
                calls.append(self._add(keys=touched, args=_ADD.args(tallies=rows)))
        with translated("adding to subscriptions' counters"):
            await asyncio.gather(*calls)

    async def read(self, subs: Mapping[str, float]) -> dict[str, Tally]:
        """Each subscription's counters, by id, given when each was created (zero for one
        never counted, or counted only in an earlier incarnation)."""
        shards = await self.shards.keys()
        groups = await self.shards.group(list(subs), lambda sub_id: sub_id)
        found = {sub_id: Tally() for sub_id in subs}
        with translated("reading subscriptions' counters"):
            for shard, ids in groups.items():
                values = await self.client.hmget(shards[shard].counters, ids)
                for sub_id, value in zip(ids, values, strict=True):
                    m, d, f, t, *created = str(value or "0 0 0 0").split()
                    if value and created == [f"{subs[sub_id]:.6f}"]:
                        found[sub_id] = Tally(int(m), int(d), int(f), float(t))
        return found

    async def forget(self, sub_ids: Sequence[str]) -> None:
        """Delete the counters of subscriptions that are gone."""
        shards = await self.shards.keys()
        groups = await self.shards.group(sub_ids, lambda sub_id: sub_id)
        with translated("deleting subscriptions' counters"):
            for shard, ids in groups.items():
                await self.client.hdel(shards[shard].counters, *ids)
