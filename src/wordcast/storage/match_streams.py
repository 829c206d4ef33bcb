"""Each tenant's match stream: the matches of its stream-delivered subscriptions, kept for a while.

``{ns}:matches:{tenant}`` is a Redis stream of messages (each the JSON body a webhook would have
received), written by the matchers' dispatchers and read by routers for ``GET /matches/stream``;
an entry's id is the position a consumer resumes after. It is bounded twice: entries older than
the retention go, and so do the oldest beyond a number of entries; ``{ns}:matches:{tenant}:lost``
keeps the id of the last entry dropped (with the bounds then in force), so that a consumer asking
to resume from an older position is told exactly that it missed something, and what, instead of
silently skipping it. ``{ns}:matches:{tenant}:last`` holds the id of the newest entry, so that a
router can learn which of many streams moved with one small read each (:meth:`MatchStreams.heads`)
instead of a blocked connection per consumer. A dispatcher that crashes between writing a
message and acknowledging it in its outbox writes it again: the message's webhook-id, kept as
long as the retention, makes the second write a no-op, so a consumer sees each message once.

On a Redis Cluster each tenant's stream has a hash tag of its own, so tenants spread over the
masters; its keys share that tag, so each write is one script in one slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from wordcast.errors import Gone
from wordcast.storage.lua import LuaScript
from wordcast.storage.records import event_order
from wordcast.storage.redis import on_cluster, translated

# A consumer's next entries and the lost-key together (so never a gap between them), as a
# script: redis-py's transactions on a Redis Cluster queue each command through asyncio.run in a
# thread, and one that needs a node's help to find its keys (XREAD) left a pooled connection
# bound to that short-lived loop, failing the next read. KEYS: the stream, its lost-key.
# Answers [the lost-key's fields, the entries].
READ = LuaScript(
    "after most",
    """
return {redis.call('HGETALL', KEYS[2]),
        redis.call('XRANGE', KEYS[1], '(' .. after, '+', 'COUNT', most)}
""",
)

# KEYS: the stream, its lost-key, its last-key, then a de-duplication key per message (of
# ``bodies``, in order). Entries past either bound are dropped exactly (an XTRIM by MINID just
# past the last of them), so the lost-key is exact too.
APPEND = LuaScript(
    "retention_ms most",
    """
local retention = tonumber(retention_ms)
local added = 0
local newest = nil
for i = 4, #KEYS do
  if redis.call('SET', KEYS[i], '1', 'NX', 'PX', retention) then
    newest = redis.call('XADD', KEYS[1], '*', 'body', bodies[i - 3])
    added = added + 1
  end
end
if newest ~= nil then redis.call('SET', KEYS[3], newest) end
local function later(a, b)
  if b == nil then return a end
  local am, as = string.match(a, '(%d+)-(%d+)')
  local bm, bs = string.match(b, '(%d+)-(%d+)')
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  if am > bm or (am == bm and as > bs) then return a end
  return b
end
local last = nil
local excess = redis.call('XLEN', KEYS[1]) - tonumber(most)
if excess > 0 then
  local over = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', excess)
  last = over[#over][1]
end
local t = redis.call('TIME')
local oldest = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - retention
local expired = redis.call('XRANGE', KEYS[1], '-', '(' .. string.format('%d', oldest), 'COUNT', 10000)
if #expired > 0 then last = later(expired[#expired][1], last) end
if last ~= nil then
  local ms, seq = string.match(last, '(%d+)-(%d+)')
  redis.call('XTRIM', KEYS[1], 'MINID', ms .. '-' .. string.format('%d', tonumber(seq) + 1))
  redis.call('HSET', KEYS[2], 'through', last, 'retention_ms', retention_ms, 'most', most)
end
return added
""",
    rest="bodies",
)


@dataclass(frozen=True, slots=True)
class Lost:
    """What a stream dropped last: entries up to and including ``through``."""

    through: str
    retention_ms: int
    most: int

    def check(self, after: str) -> None:
        """Gone if the entries after ``after`` are not all kept any more."""
        if event_order(after) < event_order(self.through):
            raise Gone(f"the match stream cannot resume after {after}: {self.describe()}")

    def describe(self) -> str:
        return (
            f"matches up to {self.through} are no longer kept (each tenant's match stream keeps "
            f"{self.retention_ms / 1000:g} s of matches, at most {self.most:,} messages: "
            "WORDCAST_MATCHER_STREAM_RETENTION_S, WORDCAST_MATCHER_STREAM_MAX_MESSAGES)"
        )


class MatchStreams:
    """Every tenant's match stream in namespace ``namespace``."""

    def __init__(self, client: aioredis.Redis, namespace: str, bodies: Any = None) -> None:
        self.client: Any = client
        self.ns = namespace
        self._append = self.client.register_script(APPEND)
        # What reads messages: a client that leaves them as bytes, if given.
        self._bodies: Any = bodies if bodies is not None else client
        self._read = self._bodies.register_script(READ)

    def key(self, tenant: str) -> str:
        if on_cluster(self.client):
            return "{" + f"{self.ns.strip('{}')}/matches/{tenant}" + "}:matches"
        return f"{self.ns}:matches:{tenant}"

    async def append(
        self,
        tenant: str,
        messages: Sequence[tuple[str, str | bytes]],
        retention_s: float,
        most: int,
    ) -> int:
        """Add (webhook-id, body) ``messages`` to ``tenant``'s stream, each once however often
        it is given; returns how many were new."""
        if not messages:
            return 0
        key = self.key(tenant)
        keys = [
            key,
            f"{key}:lost",
            f"{key}:last",
            *(f"{key}:seen:{msg_id}" for msg_id, _ in messages),
        ]
        args = APPEND.args(
            retention_ms=max(1, int(retention_s * 1000)),
            most=max(1, most),
            bodies=[body for _, body in messages],
        )
        with translated("adding matches to the match stream"):
            return int(await self._append(keys=keys, args=args))

    async def last_id(self, tenant: str) -> str:
        """The id of the newest entry ever added ("0-0" for none): where "from now" starts."""
        with translated("reading the match stream"):
            try:
                info = await self.client.xinfo_stream(self.key(tenant))
            except ResponseError as exc:
                if "no such key" in str(exc).lower():
                    return "0-0"
                raise
        return str(info.get("last-generated-id") or "0-0")

    async def heads(self, tenants: Sequence[str]) -> dict[str, str]:
        """The newest entry's id of each of ``tenants``' streams that has one (one pipelined
        round trip, whatever the number of tenants)."""
        if not tenants:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for tenant in tenants:
            pipe.get(f"{self.key(tenant)}:last")
        with translated("reading the match streams' newest positions"):
            found = await pipe.execute()
        return {tenant: head for tenant, head in zip(tenants, found, strict=True) if head}

    async def lost(self, tenant: str) -> Lost | None:
        with translated("reading the match stream"):
            fields = await self.client.hgetall(f"{self.key(tenant)}:lost")
        return _lost(fields)

    async def read(self, tenant: str, after: str, count: int) -> list[tuple[str, bytes]]:
        """Up to ``count`` (id, body) entries after ``after``, at once, each body the bytes it
        was written as; raises Gone when entries after ``after`` were dropped (read in one
        transaction with them, so never a gap)."""
        key = self.key(tenant)
        with translated("reading the match stream"):
            fields, entries = await self._read(
                keys=[key, f"{key}:lost"], args=READ.args(after=after, most=count)
            )
        lost = _lost({_text(k): _text(v) for k, v in zip(fields[::2], fields[1::2], strict=True)})
        if lost is not None:
            lost.check(after)
        found = []
        for entry_id, flat in entries:
            entry = {_text(k): v for k, v in zip(flat[::2], flat[1::2], strict=True)}
            found.append((_text(entry_id), _bytes(entry.get("body", b""))))
        return found

    async def wait(self, tenant: str, after: str, block_ms: int) -> bool:
        """Wait up to ``block_ms`` for an entry after ``after``; whether one came."""
        with translated("waiting on the match stream"):
            reply = await self.client.xread({self.key(tenant): after}, count=1, block=block_ms)
        return bool(reply)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _bytes(value: str | bytes) -> bytes:
    return value.encode() if isinstance(value, str) else value


def _lost(fields: dict[str, str] | None) -> Lost | None:
    if not fields or "through" not in fields:
        return None
    return Lost(fields["through"], int(fields.get("retention_ms", 0)), int(fields.get("most", 0)))
