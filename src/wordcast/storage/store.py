"""Redis as the system of record: subscriptions, the word maps, and the subscription event stream.

Keys (all under a namespace, ``wordcast`` by default, so several clusters can share one Redis):

``{ns}:sub:{id}``           hash: query, terms (space-separated, sorted), callback_url, matcher, created,
                            placements (JSON, :mod:`wordcast.routing.placement`: which matchers hold it for
                            which mapping versions); a pattern subscription has pattern and anchor
                            instead of query and terms, and lives on ``matcher`` only until a
                            change in the number of matchers moves it: then it has placements too
``{ns}:sub:{id}~{k}``       alternative k ≥ 1 of a boolean query (:mod:`wordcast.query.boolean`): a keyword
                            record of its own, with the query's text and the words it requires;
                            alternative 0 is ``{ns}:sub:{id}`` itself, the subscription
``{ns}:matcher:{i}:subs``   set of the ids placed on matcher i (for any mapping version)
``{ns}:matcher:{i}:words``  hash word -> count: the subscription word map H(i) of S³-TM §4.2
``{ns}:mapping:window``     "low high": the mapping versions routers may be routing with; a
                            subscription is stored only when it was placed for this window
``{ns}:words``              hash word -> count: the subscribed words s(W) routers route on (Eq. 3.1)
``{ns}:matcher:{i}:anchors`` hash anchor -> count of the pattern subscriptions on matcher i
``{ns}:matcher:{i}:url``    the base URL matcher i answers at (routers reach a matcher added by
                            scaling there, when their configuration does not name it)
``{ns}:cluster:matchers``   the number of matchers the cluster should have: set by the first router
                            (its configured number) and by ``wordcast scale``
``{ns}:cluster:internal_token`` the secret routers show matchers' ``/internal`` endpoints (made by
                            the first service that asks)
``{ns}:pattern_load``       hash matcher -> number of pattern subscriptions placed on it
``{ns}:tenant:{t}:subs``    set of the ids of tenant t's subscriptions
``{ns}:apikey:{sha256}``    the tenant an API key belongs to, under the key's SHA-256 (keys are not kept)
``{ns}:tenant:{t}:keys``    hash key id -> "sha256 created": tenant t's API keys, for listing and
                            revoking them (the id is the hash's first 16 hex digits)
``{ns}:streams``            set of the names of the shared streams an admin made
``{ns}:stream:{s}:grants``  hash tenant -> "publish subscribe" (either or both): who may publish
                            to shared stream s and who may subscribe to it
``{ns}:events``             stream of subscription changes (add, del, and move when a mapping change
                            re-places a subscription), in commit order
``{ns}:publications``       bounded stream of sampled analysed publications (time, terms) that the
                            routing learner reads (S³-TM §3: the mapping is learned from traffic)

Mapping versions themselves are kept by :mod:`wordcast.storage.mappings`.

Every change is one Lua script, so the record, both word maps and the event that announces it are
written atomically: concurrent routers cannot corrupt the counts, and a reader that loads a snapshot
and then replays the events after its starting position always converges to the committed state.
Events carry the words whose global count rose from zero (``born``) or fell to zero (``died``), and
for each matcher the words whose count in its H(i) did (``held``, ``dropped``), so routers keep s(W)
and which matchers hold each word (:func:`wordcast.routing.mapping.route_held`) without rereading them; a
pattern event names the matchers on which its anchor's count rose from or fell to zero, so routers
keep the anchor owners the same way.

Redis errors are translated into :class:`~wordcast.errors.StoreUnavailable` here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from wordcast.errors import LimitExceeded, NotFound, StaleMapping, StoreUnavailable
from wordcast.query.boolean import MAX_ALTERNATIVES, PART_SEPARATOR, part_id
from wordcast.routing.placement import Placement, decode, encode, matchers_of

log = logging.getLogger(__name__)

EVENTS_MAXLEN = 1_000_000
API_KEY_ID_CHARS = 16  # of the key's SHA-256: names a key without telling anything of it

# Keyword scripts. KEYS: 1 record, 2 s(W), 3 events, 4 tenant's set, 5 mapping window, then for each
# matcher of the placements its subscription set and its word map H(i); those matchers' ordinals
# are the last ARGV (from ARGV[14] for the add, ARGV[4] for the delete), for the event to name.
_ADD = """
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
if (redis.call('GET', KEYS[5]) or '0 0') ~= ARGV[12] then return -1 end
if redis.call('SCARD', KEYS[4]) >= tonumber(ARGV[9]) then return 0 end
redis.call('HSET', KEYS[1], 'query', ARGV[3], 'terms', ARGV[4], 'callback_url', ARGV[5],
           'matcher', ARGV[2], 'created', ARGV[6], 'tenant', ARGV[8], 'secret', ARGV[10],
           'placements', ARGV[11], 'stream', ARGV[13])
redis.call('SADD', KEYS[4], ARGV[1])
local held = {}
for k = 6, #KEYS, 2 do
  redis.call('SADD', KEYS[k], ARGV[1])
  local new = {}
  for term in string.gmatch(ARGV[4], '%S+') do
    if redis.call('HINCRBY', KEYS[k + 1], term, 1) == 1 then new[#new + 1] = term end
  end
  if #new > 0 then held[#held + 1] = ARGV[14 + (k - 6) / 2] .. ' ' .. table.concat(new, ' ') end
end
local born = {}
for term in string.gmatch(ARGV[4], '%S+') do
  if redis.call('HINCRBY', KEYS[2], term, 1) == 1 then born[#born + 1] = term end
end
return redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[7], '*', 'op', 'add', 'sub', ARGV[1],
                  'matcher', ARGV[2], 'terms', ARGV[4], 'callback_url', ARGV[5], 'query', ARGV[3],
                  'words', table.concat(born, ' '), 'tenant', ARGV[8], 'placements', ARGV[11],
                  'held', table.concat(held, '\\n'), 'stream', ARGV[13])
"""

_DELETE = """
if redis.call('HGET', KEYS[1], 'placements') ~= ARGV[2] then return false end
local terms = redis.call('HGET', KEYS[1], 'terms')
local matcher = redis.call('HGET', KEYS[1], 'matcher')
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[4], ARGV[1])
local dropped = {}
for k = 6, #KEYS, 2 do
  redis.call('SREM', KEYS[k], ARGV[1])
  local gone = {}
  for term in string.gmatch(terms, '%S+') do
    if redis.call('HINCRBY', KEYS[k + 1], term, -1) <= 0 then
      redis.call('HDEL', KEYS[k + 1], term)
      gone[#gone + 1] = term
    end
  end
  if #gone > 0 then dropped[#dropped + 1] = ARGV[4 + (k - 6) / 2] .. ' ' .. table.concat(gone, ' ') end
end
local died = {}
for term in string.gmatch(terms, '%S+') do
  if redis.call('HINCRBY', KEYS[2], term, -1) <= 0 then
    redis.call('HDEL', KEYS[2], term)
    died[#died + 1] = term
  end
end
return redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'op', 'del', 'sub', ARGV[1],
                  'matcher', matcher, 'terms', terms, 'words', table.concat(died, ' '),
                  'placements', ARGV[2], 'held', '', 'dropped', table.concat(dropped, '\\n'))
"""

# Re-placement (a mapping change). KEYS: 1 record, 2 events, then pairs (subscription set, H(i)):
# first ARGV[5] pairs of matchers the subscription leaves, then those it joins (their ordinals from
# ARGV[7] on, in the same order).
_MOVE = """
if redis.call('HGET', KEYS[1], 'placements') ~= ARGV[2] then return false end
local terms = redis.call('HGET', KEYS[1], 'terms')
local leaving = tonumber(ARGV[5])
local held, dropped = {}, {}
for k = 3, #KEYS, 2 do
  local index = (k - 3) / 2
  local changed = {}
  if index < leaving then
    redis.call('SREM', KEYS[k], ARGV[1])
    for term in string.gmatch(terms, '%S+') do
      if redis.call('HINCRBY', KEYS[k + 1], term, -1) <= 0 then
        redis.call('HDEL', KEYS[k + 1], term)
        changed[#changed + 1] = term
      end
    end
    if #changed > 0 then dropped[#dropped + 1] = ARGV[7 + index] .. ' ' .. table.concat(changed, ' ') end
  else
    redis.call('SADD', KEYS[k], ARGV[1])
    for term in string.gmatch(terms, '%S+') do
      if redis.call('HINCRBY', KEYS[k + 1], term, 1) == 1 then changed[#changed + 1] = term end
    end
    if #changed > 0 then held[#held + 1] = ARGV[7 + index] .. ' ' .. table.concat(changed, ' ') end
  end
end
redis.call('HSET', KEYS[1], 'placements', ARGV[3], 'matcher', ARGV[4])
local f = redis.call('HMGET', KEYS[1], 'query', 'callback_url', 'tenant', 'stream')
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], '*', 'op', 'move', 'sub', ARGV[1],
                  'matcher', ARGV[4], 'terms', terms, 'query', f[1], 'callback_url', f[2],
                  'tenant', f[3], 'stream', f[4] or '', 'placements', ARGV[3], 'words', '',
                  'held', table.concat(held, '\\n'), 'dropped', table.concat(dropped, '\\n'))
"""


_ADD_PATTERN = """
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
if (redis.call('GET', KEYS[7]) or '0 0') ~= ARGV[11] then return -1 end
if redis.call('SCARD', KEYS[6]) >= tonumber(ARGV[9]) then return 0 end
redis.call('HSET', KEYS[1], 'pattern', ARGV[3], 'anchor', ARGV[4], 'callback_url', ARGV[5],
           'matcher', ARGV[2], 'created', ARGV[6], 'terms', '', 'tenant', ARGV[8],
           'secret', ARGV[10], 'stream', ARGV[12])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[6], ARGV[1])
redis.call('HINCRBY', KEYS[4], ARGV[2], 1)
local born = ''
if redis.call('HINCRBY', KEYS[3], ARGV[4], 1) == 1 then born = ARGV[2] end
return redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[7], '*', 'op', 'add', 'sub', ARGV[1],
                  'matcher', ARGV[2], 'pattern', ARGV[3], 'anchor', ARGV[4], 'terms', '',
                  'callback_url', ARGV[5], 'anchor_joined', born, 'tenant', ARGV[8],
                  'stream', ARGV[12])
"""

# Pattern scripts after the add. KEYS: 1 record, 2 events, 3 pattern loads, 4 tenant's set, then for
# each matcher of the placements (ARGV from 5 on) its subscription set and its anchor map.
_DELETE_PATTERN = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if (redis.call('HGET', KEYS[1], 'placements') or '') ~= ARGV[2] then return false end
local anchor = redis.call('HGET', KEYS[1], 'anchor')
local f = redis.call('HMGET', KEYS[1], 'pattern', 'matcher')
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[4], ARGV[1])
local left = {}
for k = 5, #KEYS, 2 do
  local matcher = ARGV[4 + (k - 5) / 2]
  redis.call('SREM', KEYS[k], ARGV[1])
  if redis.call('HINCRBY', KEYS[k + 1], anchor, -1) <= 0 then
    redis.call('HDEL', KEYS[k + 1], anchor)
    left[#left + 1] = matcher
  end
  if redis.call('HINCRBY', KEYS[3], matcher, -1) <= 0 then redis.call('HDEL', KEYS[3], matcher) end
end
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', 'op', 'del', 'sub', ARGV[1],
                  'matcher', f[2], 'pattern', f[1], 'anchor', anchor, 'terms', '',
                  'placements', ARGV[2], 'anchor_left', table.concat(left, ' '))
"""

# Re-placement of a pattern (the cluster's matchers change). KEYS as for the delete, but the
# matchers are first ARGV[5] it leaves, then those it joins (ids from ARGV[7] on).
_MOVE_PATTERN = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if (redis.call('HGET', KEYS[1], 'placements') or '') ~= ARGV[2] then return false end
local anchor = redis.call('HGET', KEYS[1], 'anchor')
local leaving = tonumber(ARGV[5])
local joined, left = {}, {}
for k = 5, #KEYS, 2 do
  local index = (k - 5) / 2
  local matcher = ARGV[7 + index]
  if index < leaving then
    redis.call('SREM', KEYS[k], ARGV[1])
    if redis.call('HINCRBY', KEYS[k + 1], anchor, -1) <= 0 then
      redis.call('HDEL', KEYS[k + 1], anchor)
      left[#left + 1] = matcher
    end
    if redis.call('HINCRBY', KEYS[3], matcher, -1) <= 0 then redis.call('HDEL', KEYS[3], matcher) end
  else
    redis.call('SADD', KEYS[k], ARGV[1])
    if redis.call('HINCRBY', KEYS[k + 1], anchor, 1) == 1 then joined[#joined + 1] = matcher end
    redis.call('HINCRBY', KEYS[3], matcher, 1)
  end
end
redis.call('HSET', KEYS[1], 'placements', ARGV[3], 'matcher', ARGV[4])
local f = redis.call('HMGET', KEYS[1], 'pattern', 'callback_url', 'tenant', 'stream')
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], '*', 'op', 'move', 'sub', ARGV[1],
                  'matcher', ARGV[4], 'pattern', f[1], 'anchor', anchor, 'terms', '',
                  'callback_url', f[2], 'tenant', f[3], 'stream', f[4] or '', 'placements', ARGV[3],
                  'anchor_joined', table.concat(joined, ' '), 'anchor_left', table.concat(left, ' '))
"""


_ROTATE = """
local old = redis.call('HGET', KEYS[1], 'secret')
if not old then return false end
redis.call('HSET', KEYS[1], 'secret', ARGV[1], 'previous_secret', old, 'previous_until', ARGV[2])
return 1
"""


@dataclass(frozen=True, slots=True)
class Subscription:
    """A keyword subscription (``query`` and its ``terms``) or a pattern subscription."""

    id: str
    query: str
    terms: tuple[str, ...]
    callback_url: str
    matcher: int
    created: float = 0.0
    pattern: str = ""
    anchor: str = ""
    tenant: str = ""
    secret: str = field(default="", repr=False)
    placements: tuple[Placement, ...] = ()
    stream: str = ""  # a shared stream it listens to; "" for its own tenant's publications

    @property
    def is_pattern(self) -> bool:
        return bool(self.pattern)

    @property
    def audience(self) -> str:
        """Whose publications it matches: :func:`audience` of its stream, or of its tenant."""
        return audience(self.tenant, self.stream)

    @property
    def matchers(self) -> list[int]:
        """Every matcher that holds the subscription (a pattern lives on one, always)."""
        return matchers_of(self.placements) if self.placements else [self.matcher]


@dataclass(frozen=True, slots=True)
class SubscriptionEvent:
    """One committed change.

    ``words`` are the words born (add) or died (del) in s(W); ``held`` and ``dropped`` are, for a
    keyword subscription, the words whose count in a matcher's H(i) rose from or fell to zero, as
    (matcher, words) pairs. For a pattern, ``anchor_joined`` and ``anchor_left`` are the matchers
    on which the count of its anchor rose from or fell to zero.
    """

    id: str
    op: str
    subscription: Subscription
    words: tuple[str, ...]
    anchor_joined: tuple[int, ...] = ()
    anchor_left: tuple[int, ...] = ()
    held: tuple[tuple[int, tuple[str, ...]], ...] = ()
    dropped: tuple[tuple[int, tuple[str, ...]], ...] = ()


def audience(publisher: str, stream: str) -> str:
    """The publications a subscription meets: a shared stream's, or else its own tenant's.

    A publication sent to a stream reaches the subscriptions to that stream; one sent without a
    stream reaches only its publisher's own subscriptions (tenants stay apart by default)."""
    return f"stream:{stream}" if stream else f"tenant:{publisher}"


def event_order(event_id: str) -> tuple[int, int]:
    millis, _, seq = event_id.partition("-")
    return int(millis), int(seq or 0)


@contextlib.contextmanager
def translated(action: str) -> Any:
    try:
        yield
    except RedisError as exc:
        raise StoreUnavailable(f"Redis failed while {action}: {exc}") from exc


def connect(url: str) -> aioredis.Redis:
    """One client (and so one connection pool) per process; responses decoded as text."""
    return aioredis.Redis.from_url(
        url,
        decode_responses=True,
        socket_timeout=10,
        socket_connect_timeout=5,
        health_check_interval=15,
        retry_on_timeout=True,
    )


class SubscriptionStore:
    def __init__(self, client: aioredis.Redis, namespace: str = "wordcast") -> None:
        # Typed loosely: redis-py's annotations cannot express that decode_responses gives str.
        self.client: Any = client
        self.ns = namespace
        self._add = client.register_script(_ADD)
        self._delete = client.register_script(_DELETE)
        self._add_pattern = client.register_script(_ADD_PATTERN)
        self._rotate = client.register_script(_ROTATE)
        self._delete_pattern = client.register_script(_DELETE_PATTERN)
        self._move = client.register_script(_MOVE)
        self._move_pattern = client.register_script(_MOVE_PATTERN)

    # -- keys ---------------------------------------------------------------------------------
    def sub_key(self, sub_id: str) -> str:
        return f"{self.ns}:sub:{sub_id}"

    def matcher_subs_key(self, matcher: int) -> str:
        return f"{self.ns}:matcher:{matcher}:subs"

    def matcher_words_key(self, matcher: int) -> str:
        return f"{self.ns}:matcher:{matcher}:words"

    def matcher_anchors_key(self, matcher: int) -> str:
        return f"{self.ns}:matcher:{matcher}:anchors"

    @property
    def pattern_load_key(self) -> str:
        return f"{self.ns}:pattern_load"

    @property
    def words_key(self) -> str:
        return f"{self.ns}:words"

    @property
    def events_key(self) -> str:
        return f"{self.ns}:events"

    @property
    def publications_key(self) -> str:
        return f"{self.ns}:publications"

    # -- publication log -----------------------------------------------------------------------
    async def log_publications(
        self, samples: Sequence[tuple[float, Iterable[str]]], max_length: int
    ) -> None:
        """Append sampled (time, terms) to the bounded log: one round trip for the whole batch."""
        if not samples:
            return
        pipe = self.client.pipeline(transaction=False)
        for at, terms in samples:
            fields = {"at": repr(at), "terms": " ".join(sorted(terms))}
            pipe.xadd(self.publications_key, fields, maxlen=max_length, approximate=True)
        with translated("logging publications"):
            await pipe.execute()

    async def publication_log(
        self, count: int | None = None
    ) -> list[tuple[float, tuple[str, ...]]]:
        """The logged publications, oldest first."""
        with translated("reading the publication log"):
            entries = await self.client.xrange(self.publications_key, count=count)
        return [(float(f["at"]), tuple(f["terms"].split())) for _, f in entries]

    # -- writes -------------------------------------------------------------------------------
    def tenant_subs_key(self, tenant: str) -> str:
        return f"{self.ns}:tenant:{tenant}:subs"

    def api_key_key(self, key_hash: str) -> str:
        return f"{self.ns}:apikey:{key_hash}"

    @property
    def window_key(self) -> str:
        """ "low high": the oldest and newest mapping versions routers may be routing with."""
        return f"{self.ns}:mapping:window"

    def _matcher_keys(self, matchers: Iterable[int]) -> list[str]:
        keys: list[str] = []
        for matcher in matchers:
            keys += [self.matcher_subs_key(matcher), self.matcher_words_key(matcher)]
        return keys

    def _keys(self, sub: Subscription) -> list[str]:
        if sub.is_pattern:
            matcher = sub.matcher
            return [
                self.sub_key(sub.id),
                self.matcher_subs_key(matcher),
                self.matcher_anchors_key(matcher),
                self.pattern_load_key,
                self.events_key,
                self.tenant_subs_key(sub.tenant),
                self.window_key,
            ]
        fixed = [self.sub_key(sub.id), self.words_key, self.events_key]
        fixed += [self.tenant_subs_key(sub.tenant), self.window_key]
        return fixed + self._matcher_keys(sub.matchers)

    # -- tenants ------------------------------------------------------------------------------
    def tenant_keys_key(self, tenant: str) -> str:
        return f"{self.ns}:tenant:{tenant}:keys"

    @property
    def key_revocations_key(self) -> str:
        return f"{self.ns}:apikey-revocations"

    async def add_api_key(self, key_hash: str, tenant: str) -> str:
        """Register the hash of an API key for a tenant (the key itself is never stored); returns
        the key's id, which names it when it is listed or revoked."""
        key_id = key_hash[:API_KEY_ID_CHARS]
        with translated("storing an API key"):
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.set(self.api_key_key(key_hash), tenant)
                pipe.hset(self.tenant_keys_key(tenant), key_id, f"{key_hash} {time.time():.3f}")
                await pipe.execute()
        return key_id

    async def api_keys(self, tenant: str) -> dict[str, float]:
        """A tenant's API keys: id -> when it was made (Unix time)."""
        with translated("listing a tenant's API keys"):
            found = await self.client.hgetall(self.tenant_keys_key(tenant))
        return {key_id: float(value.split()[1]) for key_id, value in found.items()}

    async def revoke_api_key(self, tenant: str, key_id: str) -> str:
        """Forget one of a tenant's API keys; returns its hash. NotFound if the tenant has no key
        with that id."""
        with translated("revoking an API key"):
            value = await self.client.hget(self.tenant_keys_key(tenant), key_id)
            if value is None:
                raise NotFound(f"tenant {tenant!r} has no API key {key_id!r}; nothing was revoked")
            key_hash = str(value).split()[0]
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.delete(self.api_key_key(key_hash))
                pipe.hdel(self.tenant_keys_key(tenant), key_id)
                pipe.incr(self.key_revocations_key)
                await pipe.execute()
        return key_hash

    async def key_revocations(self) -> int:
        """How many API keys have been revoked so far: routers that see it grow forget the keys
        they remember."""
        with translated("counting revoked API keys"):
            return int(await self.client.get(self.key_revocations_key) or 0)

    # -- shared streams -------------------------------------------------------------------------
    @property
    def streams_key(self) -> str:
        return f"{self.ns}:streams"

    def stream_grants_key(self, stream: str) -> str:
        return f"{self.ns}:stream:{stream}:grants"

    async def create_stream(self, stream: str) -> bool:
        """Make a shared stream with no grants; False if it exists already."""
        with translated("creating a stream"):
            return bool(await self.client.sadd(self.streams_key, stream))

    async def streams(self) -> dict[str, dict[str, tuple[bool, bool]]]:
        """Every shared stream: tenant -> (may publish, may subscribe)."""
        with translated("listing streams"):
            names = sorted(await self.client.smembers(self.streams_key))
            pipe = self.client.pipeline(transaction=False)
            for name in names:
                pipe.hgetall(self.stream_grants_key(name))
            grants = await pipe.execute() if names else []
        return {
            name: {tenant: _grant(value) for tenant, value in found.items()}
            for name, found in zip(names, grants, strict=True)
        }

    async def stream_grants(self, stream: str) -> dict[str, tuple[bool, bool]]:
        """A shared stream's grants: tenant -> (may publish, may subscribe). NotFound if none."""
        with translated("reading a stream"):
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.sismember(self.streams_key, stream)
                pipe.hgetall(self.stream_grants_key(stream))
                exists, found = await pipe.execute()
        if not exists:
            raise NotFound(f"no stream named {stream!r}")
        return {tenant: _grant(value) for tenant, value in found.items()}

    async def grant(self, stream: str, tenant: str) -> tuple[bool, bool]:
        """What ``tenant`` may do with ``stream``: (publish, subscribe); nothing for an unknown
        stream."""
        with translated("reading a stream grant"):
            value = await self.client.hget(self.stream_grants_key(stream), tenant)
        return _grant(value or "")

    async def set_grant(self, stream: str, tenant: str, publish: bool, subscribe: bool) -> None:
        """Give ``tenant`` exactly these rights on ``stream`` (NotFound for an unknown stream).
        Counted as a revocation, so routers forget the grants they remember."""
        value = " ".join(
            name for name, on in (("publish", publish), ("subscribe", subscribe)) if on
        )
        with translated("granting a stream"):
            if not await self.client.sismember(self.streams_key, stream):
                raise NotFound(f"no stream named {stream!r}")
            async with self.client.pipeline(transaction=True) as pipe:
                if value:
                    pipe.hset(self.stream_grants_key(stream), tenant, value)
                else:
                    pipe.hdel(self.stream_grants_key(stream), tenant)
                pipe.incr(self.key_revocations_key)
                await pipe.execute()

    async def drop_stream(self, stream: str) -> None:
        """Forget a shared stream and its grants (the subscriptions to it are deleted first)."""
        with translated("deleting a stream"):
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.srem(self.streams_key, stream)
                pipe.delete(self.stream_grants_key(stream))
                pipe.incr(self.key_revocations_key)
                await pipe.execute()

    async def tenant_for(self, key_hash: str) -> str | None:
        with translated("checking an API key"):
            tenant = await self.client.get(self.api_key_key(key_hash))
        return str(tenant) if tenant is not None else None

    async def tenant_subscriptions(
        self, tenant: str, cursor: int = 0, count: int = 100
    ) -> tuple[int, list[Subscription]]:
        """One page of a tenant's subscriptions and the cursor of the next (0 at the end)."""
        with translated("listing a tenant's subscriptions"):
            cursor, ids = await self.client.sscan(
                self.tenant_subs_key(tenant), cursor=cursor, count=count
            )
            pipe = self.client.pipeline(transaction=False)
            for sub_id in ids:
                pipe.hgetall(self.sub_key(sub_id))
            records = await pipe.execute() if ids else []
        # A boolean query's later alternatives are records of their own, not subscriptions.
        subs = [
            _subscription(i, f)
            for i, f in zip(ids, records, strict=True)
            if f and PART_SEPARATOR not in i
        ]
        return int(cursor), subs

    async def add(
        self, sub: Subscription, tenant_limit: int = 1_000_000, window: str = "0 0"
    ) -> str:
        """Store a subscription and announce it; returns the event id.

        A subscription was placed for the mapping ``window``; if the window moved meanwhile, nothing
        is stored and StaleMapping is raised (place it again). Raises
        ValueError on a duplicate id and LimitExceeded when the tenant holds ``tenant_limit``
        subscriptions already.
        """
        if not sub.is_pattern and not sub.placements:
            sub = replace(sub, placements=(Placement(sub.matcher, 0),))
        keys = self._keys(sub)
        if sub.is_pattern:
            script = self._add_pattern
            args: list[str | int] = [sub.id, sub.matcher, sub.pattern, sub.anchor]
        else:
            script = self._add
            args = [sub.id, sub.matcher, sub.query, " ".join(sub.terms)]
        args += [sub.callback_url, repr(sub.created), EVENTS_MAXLEN, sub.tenant, tenant_limit]
        args.append(sub.secret)
        if sub.is_pattern:
            args += [window, sub.stream]
        else:
            args += [encode(sub.placements), window, sub.stream, *sub.matchers]
        with translated("storing a subscription"):
            event_id = await script(keys=keys, args=args)
        if event_id == -1:
            raise StaleMapping(f"the mapping window is no longer {window!r}")
        if event_id == 0:
            raise LimitExceeded(
                f"tenant {sub.tenant!r} holds {tenant_limit} subscriptions, the limit; "
                "delete some first"
            )
        if not event_id:
            raise ValueError(f"subscription id {sub.id} already exists")
        return str(event_id)

    def _delete_call(self, sub: Subscription) -> tuple[Any, list[str], list[str | int]]:
        """The script deleting ``sub`` as read: it refuses (returns false) if the record's
        placements changed since."""
        expected = encode(sub.placements) if sub.placements else ""
        args: list[str | int] = [sub.id, expected, EVENTS_MAXLEN, *sub.matchers]
        if sub.is_pattern:
            return self._delete_pattern, self._pattern_keys(sub, sub.matchers), args
        return self._delete, self._keys(sub), args

    async def delete(self, sub_id: str) -> tuple[Subscription, str]:
        """Delete a subscription; returns it and the event id. Raises NotFound."""
        for _ in range(5):
            sub = await self.get(sub_id)
            script, keys, args = self._delete_call(sub)
            with translated("deleting a subscription"):
                event_id = await script(keys=keys, args=args)
            if event_id:
                return sub, str(event_id)
            # The record changed between the read and the script (deleted or moved): look again.
        raise StoreUnavailable(f"subscription {sub_id} kept changing while being deleted")

    async def delete_with_alternatives(self, sub_id: str) -> tuple[Subscription, str, set[int]]:
        """Delete a subscription and, for a boolean query, its other alternatives' records:
        later ones first and its own record last, so that a failure part-way leaves it listed
        and deletable again, never alternatives without it. Returns it, the last event id and
        every matcher that held one of the records. Raises NotFound."""
        others = [part_id(sub_id, k) for k in range(1, MAX_ALTERNATIVES)]
        with translated("looking for a subscription's alternatives"):
            pipe = self.client.pipeline(transaction=False)
            for other in others:
                pipe.exists(self.sub_key(other))
            present = [other for other, n in zip(others, await pipe.execute(), strict=True) if n]
        matchers: set[int] = set()
        for other in reversed(present):
            try:
                gone, _ = await self.delete(other)
            except NotFound:  # deleted meanwhile
                continue
            matchers.update(gone.matchers)
        sub, event_id = await self.delete(sub_id)
        matchers.update(sub.matchers)
        return sub, event_id, matchers

    async def delete_many(self, sub_ids: Sequence[str]) -> tuple[str | None, set[int]]:
        """:meth:`delete_with_alternatives` for many subscriptions in four round trips, where one
        at a time takes three each: find the alternatives and read the subscriptions, read the
        alternatives, delete every alternative, then every subscription. Each delete stays atomic;
        one whose record changed meanwhile is deleted again on its own, and an id already gone
        is passed over. As there, no subscription goes before its alternatives. Returns the last
        event id (None if nothing was deleted) and every matcher that held one of the records."""
        ids = list(dict.fromkeys(sub_ids))
        others = [part_id(sub_id, k) for sub_id in ids for k in range(1, MAX_ALTERNATIVES)]
        with translated("reading subscriptions to delete"):
            pipe = self.client.pipeline(transaction=False)
            for sub_id in ids:
                pipe.hgetall(self.sub_key(sub_id))
            for other in others:
                pipe.exists(self.sub_key(other))
            found = await pipe.execute()
            present = [o for o, n in zip(others, found[len(ids) :], strict=True) if n]
            pipe = self.client.pipeline(transaction=False)
            for other in reversed(present):  # later alternatives first, as one at a time
                pipe.hgetall(self.sub_key(other))
            alternatives = await pipe.execute()
        events: list[str] = []
        matchers: set[int] = set()
        for records in (
            zip(reversed(present), alternatives, strict=True),
            zip(ids, found[: len(ids)], strict=True),
        ):
            subs = [_subscription(record_id, fields) for record_id, fields in records if fields]
            pipe = self.client.pipeline(transaction=False)
            for sub in subs:
                script, keys, args = self._delete_call(sub)
                await script(keys=keys, args=args, client=pipe)
            with translated("deleting subscriptions"):
                results = await pipe.execute() if subs else []
            for sub, event_id in zip(subs, results, strict=True):
                if not event_id:  # moved or deleted since it was read
                    try:
                        sub, event_id = await self.delete(sub.id)
                    except NotFound:
                        continue
                events.append(str(event_id))
                matchers.update(sub.matchers)
        return max(events, key=event_order, default=None), matchers

    def _pattern_keys(self, sub: Subscription, matchers: Iterable[int]) -> list[str]:
        keys = [self.sub_key(sub.id), self.events_key, self.pattern_load_key]
        keys.append(self.tenant_subs_key(sub.tenant))
        for matcher in matchers:
            keys += [self.matcher_subs_key(matcher), self.matcher_anchors_key(matcher)]
        return keys

    def _move_call(
        self, sub: Subscription, placements: Sequence[Placement]
    ) -> tuple[Any, list[str], list[str | int]]:
        before, after = set(sub.matchers), set(matchers_of(placements))
        leaving, joining = sorted(before - after), sorted(after - before)
        open_ = [p.matcher for p in placements if p.is_open] or [placements[-1].matcher]
        expected = encode(sub.placements) if sub.placements else ""
        args: list[str | int] = [sub.id, expected, encode(placements)]
        args += [open_[0], len(leaving), EVENTS_MAXLEN]
        if sub.is_pattern:
            keys = self._pattern_keys(sub, [*leaving, *joining])
            return self._move_pattern, keys, [*args, *leaving, *joining]
        keys = [self.sub_key(sub.id), self.events_key, *self._matcher_keys(leaving)]
        keys += self._matcher_keys(joining)
        return self._move, keys, [*args, *leaving, *joining]

    async def move(self, sub: Subscription, placements: Sequence[Placement]) -> str | None:
        """Re-place a subscription; the event id, or None if it changed meanwhile."""
        script, keys, args = self._move_call(sub, placements)
        with translated("moving a subscription"):
            event_id = await script(keys=keys, args=args)
        return str(event_id) if event_id else None

    async def move_many(
        self, moves: Sequence[tuple[Subscription, Sequence[Placement]]]
    ) -> list[str | None]:
        """:meth:`move` for many subscriptions in one round trip (each move stays atomic and
        independent: one that changed meanwhile gets None and the others still happen)."""
        if not moves:
            return []
        pipe = self.client.pipeline(transaction=False)
        for sub, placements in moves:
            script, keys, args = self._move_call(sub, placements)
            await script(keys=keys, args=args, client=pipe)
        with translated("moving subscriptions"):
            results = await pipe.execute()
        return [str(event_id) if event_id else None for event_id in results]

    async def rotate_secret(self, sub_id: str, secret: str, previous_until: float) -> None:
        """Make ``secret`` the signing secret; the old one stays valid until ``previous_until``."""
        with translated("rotating a signing secret"):
            done = await self._rotate(keys=[self.sub_key(sub_id)], args=[secret, previous_until])
        if not done:
            raise NotFound(f"no subscription with id {sub_id!r}")

    async def signing_secrets_of(self, sub_ids: Iterable[str]) -> dict[str, list[str] | None]:
        """The secrets to sign each subscription's messages with now, the previous one too during
        its grace period (None: the subscription no longer exists), in one round trip."""
        ids = list(dict.fromkeys(sub_ids))
        pipe = self.client.pipeline(transaction=False)
        for sub_id in ids:
            pipe.hmget(self.sub_key(sub_id), ["secret", "previous_secret", "previous_until"])
        with translated("reading signing secrets"):
            replies = await pipe.execute()
        now = time.time()
        found: dict[str, list[str] | None] = {}
        for sub_id, (secret, previous, until) in zip(ids, replies, strict=True):
            if secret is None:
                found[sub_id] = None
                continue
            secrets = [secret] if secret else []
            if previous and until and float(until) > now:
                secrets.append(previous)
            found[sub_id] = secrets
        return found

    async def register_matcher(self, matcher: int, url: str) -> None:
        with translated("registering a matcher's URL"):
            await self.client.set(f"{self.ns}:matcher:{matcher}:url", url)

    async def internal_token(self) -> str:
        """The cluster's shared secret for the matchers' ``/internal`` endpoints: made by the first
        service to ask (random, 32 bytes), read by every other. Whoever reads Redis reads every
        other secret of the cluster too, so it adds no exposure. Setting it to a new value
        rotates it: matchers and routers read it again when the other side shows another."""
        key = f"{self.ns}:cluster:internal_token"
        with translated("reading the cluster's internal token"):
            await self.client.set(key, secrets.token_urlsafe(32), nx=True)
            token = await self.client.get(key)
        return str(token)

    async def want_matchers(self, matchers: int, *, only_if_unset: bool = False) -> None:
        with translated("recording the number of matchers wanted"):
            await self.client.set(f"{self.ns}:cluster:matchers", matchers, nx=only_if_unset)

    async def matchers_wanted(self) -> int | None:
        with translated("reading the number of matchers wanted"):
            value = await self.client.get(f"{self.ns}:cluster:matchers")
        return int(value) if value is not None else None

    async def note_followed(self, statefulset: str, ttl_s: float) -> None:
        """Say that routers copy this StatefulSet's replicas into the number wanted (for a while:
        a router that stops following stops saying so)."""
        with translated("noting the StatefulSet the routers follow"):
            await self.client.set(f"{self.ns}:cluster:follows", statefulset, px=int(ttl_s * 1000))

    async def followed(self) -> str | None:
        """The StatefulSet whose replicas the routers copy into the number wanted, if any."""
        with translated("reading the StatefulSet the routers follow"):
            value = await self.client.get(f"{self.ns}:cluster:follows")
        return str(value) if value is not None else None

    async def held_by(self, matcher: int) -> int:
        """How many subscriptions matcher i holds (for any mapping version in use)."""
        with translated("counting a matcher's subscriptions"):
            return int(await self.client.scard(self.matcher_subs_key(matcher)))

    async def forget_matcher(self, matcher: int) -> None:
        """Drop the URL of a matcher removed by scaling down."""
        with translated("forgetting a matcher's URL"):
            await self.client.delete(f"{self.ns}:matcher:{matcher}:url")

    async def matcher_url(self, matcher: int) -> str | None:
        with translated("reading a matcher's URL"):
            url = await self.client.get(f"{self.ns}:matcher:{matcher}:url")
        return str(url) if url is not None else None

    # -- reads --------------------------------------------------------------------------------
    async def get(self, sub_id: str) -> Subscription:
        with translated("reading a subscription"):
            fields = await self.client.hgetall(self.sub_key(sub_id))
        if not fields:
            raise NotFound(f"no subscription with id {sub_id!r}")
        return _subscription(sub_id, fields)

    async def count(self) -> int:
        """How many subscriptions are stored, over every matcher."""
        total = 0
        with translated("counting subscriptions"):
            async for key in self.client.scan_iter(match=f"{self.ns}:matcher:*:subs", count=1000):
                total += await self.client.scard(key)
        return total

    async def tenant_holds(self, tenant: str, sub_ids: Sequence[str]) -> list[bool]:
        """Whether each id is one of the tenant's subscriptions, in one command."""
        if not sub_ids:
            return []
        with translated("checking a tenant's subscriptions"):
            found = await self.client.smismember(self.tenant_subs_key(tenant), list(sub_ids))
        return [bool(member) for member in found]

    async def tenant_count(self, tenant: str) -> int:
        """How many subscriptions a tenant holds."""
        with translated("counting a tenant's subscriptions"):
            return int(await self.client.scard(self.tenant_subs_key(tenant)))

    async def subscribed_words(self) -> set[str]:
        with translated("reading the subscribed words"):
            return set(await self.client.hkeys(self.words_key))

    async def held_words(self, matchers: int) -> dict[int, list[str]]:
        """The words of H(i) for matchers 0 … ``matchers`` - 1, in one round trip."""
        pipe = self.client.pipeline(transaction=False)
        for matcher in range(matchers):
            pipe.hkeys(self.matcher_words_key(matcher))
        with translated("reading the subscription word maps"):
            replies = await pipe.execute()
        return dict(enumerate(replies))

    async def word_map(self, matcher: int) -> dict[str, int]:
        """H(i) with counts."""
        with translated("reading a subscription word map"):
            raw = await self.client.hgetall(self.matcher_words_key(matcher))
        return {word: int(count) for word, count in raw.items()}

    async def word_map_view(
        self, matchers: int, candidates: Iterable[int], terms: Sequence[str]
    ) -> tuple[list[int], dict[int, int]]:
        """LASP's view of H: |H(i)| for every matcher, and how many of ``terms`` each candidate's
        H(i) holds already; one round trip."""
        wanted = sorted(candidates)
        pipe = self.client.pipeline(transaction=False)
        for matcher in range(matchers):
            pipe.hlen(self.matcher_words_key(matcher))
        for matcher in wanted:
            pipe.hmget(self.matcher_words_key(matcher), list(terms))
        with translated("reading the subscription word maps"):
            replies = await pipe.execute()
        sizes = [int(size) for size in replies[:matchers]]
        known = {
            matcher: sum(1 for count in counts if count is not None)
            for matcher, counts in zip(wanted, replies[matchers:], strict=True)
        }
        return sizes, known

    async def anchor_map(self, matcher: int) -> dict[str, int]:
        """The anchors of the pattern subscriptions on a matcher, with counts."""
        with translated("reading an anchor map"):
            raw = await self.client.hgetall(self.matcher_anchors_key(matcher))
        return {anchor: int(count) for anchor, count in raw.items()}

    async def pattern_loads(self) -> dict[int, int]:
        """How many pattern subscriptions each matcher holds."""
        with translated("reading the pattern loads"):
            raw = await self.client.hgetall(self.pattern_load_key)
        return {int(matcher): int(count) for matcher, count in raw.items()}

    async def placed_on(self, matcher: int, page: int = 2_000) -> AsyncIterator[list[Subscription]]:
        """The subscriptions placed on a matcher, in pages, for rebuilding its index."""
        with translated("listing a matcher's subscriptions"):
            cursor = 0
            while True:
                cursor, ids = await self.client.sscan(
                    self.matcher_subs_key(matcher), cursor=cursor, count=page
                )
                if ids:
                    pipe = self.client.pipeline(transaction=False)
                    for sub_id in ids:
                        pipe.hgetall(self.sub_key(sub_id))
                    records = await pipe.execute()
                    yield [
                        _subscription(sub_id, fields)
                        for sub_id, fields in zip(ids, records, strict=True)
                        if fields
                    ]
                if cursor == 0:
                    return

    async def last_event_id(self) -> str:
        with translated("reading the event stream"):
            last = await self.client.xrevrange(self.events_key, count=1)
        return str(last[0][0]) if last else "0-0"

    async def first_event_id(self) -> str | None:
        with translated("reading the event stream"):
            first = await self.client.xrange(self.events_key, count=1)
        return str(first[0][0]) if first else None

    async def events_after(
        self, event_id: str, count: int = 1_000, block_ms: int | None = None
    ) -> list[SubscriptionEvent]:
        with translated("reading the event stream"):
            if block_ms is None:
                entries = await self.client.xrange(self.events_key, min=f"({event_id}", count=count)
            else:
                reply = await self.client.xread(
                    {self.events_key: event_id}, count=count, block=block_ms
                )
                entries = reply[0][1] if reply else []
        return [_event(entry_id, fields) for entry_id, fields in entries]


def _subscription(sub_id: str, fields: dict[str, str]) -> Subscription:
    return Subscription(
        id=sub_id,
        query=fields.get("query", ""),
        terms=tuple(fields.get("terms", "").split()),
        callback_url=fields.get("callback_url", ""),
        matcher=int(fields["matcher"]),
        created=float(fields.get("created", 0.0)),
        pattern=fields.get("pattern", ""),
        anchor=fields.get("anchor", ""),
        tenant=fields.get("tenant", ""),
        placements=decode(fields["placements"]) if fields.get("placements") else (),
        stream=fields.get("stream", ""),
    )


def _grant(value: str) -> tuple[bool, bool]:
    words = value.split()
    return "publish" in words, "subscribe" in words


def _event(event_id: str, fields: dict[str, str]) -> SubscriptionEvent:
    sub = _subscription(fields["sub"], fields)
    op = fields["op"]
    held = _word_changes(fields.get("held"))
    if "held" not in fields and op != "del" and sub.terms:
        # Written by a router from before events named H's changes: a reader that takes every
        # word as held where the subscription now is routes a little more, never less.
        held = tuple((matcher, sub.terms) for matcher in sub.matchers)
    return SubscriptionEvent(
        id=event_id,
        op=op,
        subscription=sub,
        words=tuple(fields.get("words", "").split()),
        anchor_joined=tuple(int(m) for m in fields.get("anchor_joined", "").split()),
        anchor_left=tuple(int(m) for m in fields.get("anchor_left", "").split()),
        held=held,
        dropped=_word_changes(fields.get("dropped")),
    )


def _word_changes(text: str | None) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """ "matcher word word…" lines, one per matcher whose H(i) changed."""
    changes = []
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) > 1:
            changes.append((int(parts[0]), tuple(parts[1:])))
    return tuple(changes)


class EventFollower:
    """Keeps an in-memory replica (a router's s(W), a matcher's index) in step with Redis.

    ``start`` records the stream position, loads a snapshot, then replays what came after; ``run``
    then tails the stream. Applying an event must be idempotent per subscription (last event wins),
    which makes replaying events the snapshot already reflects harmless. ``catch_up`` lets a request
    handler apply everything up to a given event before it answers (read-your-writes).
    """

    def __init__(
        self,
        store: SubscriptionStore,
        load_snapshot: Callable[[], Awaitable[None]],
        apply: Callable[[Iterable[SubscriptionEvent]], None],
        block_ms: int = 1_000,
    ) -> None:
        self._store = store
        self._load_snapshot = load_snapshot
        self._apply = apply
        self._block_ms = block_ms
        self.position = "0-0"
        self.ready = asyncio.Event()
        self._reading = asyncio.Lock()

    async def start(self) -> None:
        position = await self._store.last_event_id()
        await self._load_snapshot()
        self.position = position
        await self.catch_up()
        self.ready.set()

    def _take(self, events: list[SubscriptionEvent]) -> None:
        fresh = [e for e in events if event_order(e.id) > event_order(self.position)]
        if fresh:
            self._apply(fresh)
            self.position = fresh[-1].id

    async def catch_up(self, until: str | None = None) -> None:
        """Apply every event after the current position (at least up to ``until``)."""
        if until is not None and event_order(until) <= event_order(self.position):
            return
        # Concurrent callers share one reader: whoever waited usually finds its event applied
        # already, instead of every request rereading the same tail of the stream.
        async with self._reading:
            while until is None or event_order(until) > event_order(self.position):
                events = await self._store.events_after(self.position)
                self._take(events)
                if len(events) < 1_000:
                    return

    async def _gap(self) -> bool:
        """True when events after our position were trimmed away before we read them."""
        first = await self._store.first_event_id()
        return first is not None and event_order(first) > event_order(self.position) > (0, 0)

    async def run(self) -> None:
        delay = 0.1
        while True:
            try:
                if not self.ready.is_set():
                    await self.start()
                events = await self._store.events_after(self.position, block_ms=self._block_ms)
                if events and await self._gap():
                    log.warning("subscription events were trimmed before we read them; resyncing")
                    self.ready.clear()
                    continue
                self._take(events)
                delay = 0.1
            except StoreUnavailable as exc:
                log.warning("event stream unavailable, retrying in %.1fs: %s", delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
