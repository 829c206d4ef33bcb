"""Tenants' webhook endpoints: where their matches are POSTed, each with one signing secret.

The Standard Webhooks (and Svix) model: a tenant registers endpoints, and every message to an
endpoint is signed once, with the endpoint's secret (and, for a grace period after a rotation,
its previous one too), whatever number of subscriptions its matches are for. A subscription names
its endpoint by URL (its record's ``callback_url``, as before endpoints existed), so an endpoint
is found by (tenant, URL), and the first subscription to a URL makes its endpoint.

Keys (in the namespace's slot, with the tenants):

``{ns}:tenant:{t}:endpoints``      hash endpoint id -> its record, as JSON
``{ns}:tenant:{t}:endpoint-urls``  hash URL -> endpoint id (one endpoint per URL and tenant)
``{ns}:endpoint:{id}:health``      hash: delivered, failed (matches), attempts_ok, attempts_failed,
                                   latency_ms (sum over the successful attempts), last_error,
                                   last_error_at, failing_since, last_delivered_at
``{ns}:endpoints-epoch``           counter moved by every change to an endpoint: dispatchers keep
                                   the endpoints they read until it moves
"""

from __future__ import annotations

import base64
import math
import secrets
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any

import orjson

from wordcast.errors import Conflict, LimitExceeded, NotFound
from wordcast.storage.keys import Keys
from wordcast.storage.lua import LuaScript
from wordcast.storage.redis import translated


def new_secret() -> str:
    """A Standard Webhooks signing secret: whsec_ and 24 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def new_endpoint_id() -> str:
    return "ep_" + secrets.token_hex(12)


@dataclass(frozen=True, slots=True)
class Endpoint:
    id: str
    tenant: str
    url: str
    secret: str
    description: str = ""
    enabled: bool = True
    disabled_reason: str = ""  # why it was disabled, when wordcast did it (a failing endpoint)
    created: float = 0.0
    previous_secret: str = ""
    previous_until: float = 0.0  # until when the previous secret still signs (Unix time)

    def signing_secrets(self, now: float) -> tuple[list[str], float]:
        """The secrets that sign now, and until when that holds (infinity unless rotating)."""
        if self.previous_secret and self.previous_until > now:
            return [self.secret, self.previous_secret], self.previous_until
        return [self.secret], math.inf

    def encoded(self) -> str:
        return orjson.dumps(asdict(self)).decode()

    @classmethod
    def decoded(cls, text: str | bytes) -> Endpoint:
        return cls(**orjson.loads(text))


@dataclass(frozen=True, slots=True)
class EndpointHealth:
    delivered: int = 0  # matches acknowledged with a 2xx
    failed: int = 0  # matches given up on (dead-lettered)
    attempts_ok: int = 0
    attempts_failed: int = 0
    latency_ms: float = 0.0  # mean over the successful attempts
    last_error: str = ""
    last_error_at: float = 0.0
    failing_since: float = 0.0  # the first failed attempt since the last success; 0: not failing
    last_delivered_at: float = 0.0


# Make the endpoint of (tenant, URL) unless there is one: atomic, so two routers (or a router and
# a dispatcher) subscribing to one URL at once share one endpoint.
# KEYS: records, urls, epoch. ``record``: the new one's JSON; ``most``: how many the tenant may
# hold (0: no bound). Returns the endpoint's record, and 1 if it was made now (else 0); or "" and
# -1 if the tenant holds ``most`` already.
_FOR_URL = LuaScript(
    "url new_id record most",
    """
local id = redis.call('HGET', KEYS[2], url)
if id then
  local found = redis.call('HGET', KEYS[1], id)
  if found then return {found, 0} end
end
if tonumber(most) > 0 and redis.call('HLEN', KEYS[1]) >= tonumber(most) then return {'', -1} end
redis.call('HSET', KEYS[2], url, new_id)
redis.call('HSET', KEYS[1], new_id, record)
redis.call('INCR', KEYS[3])
return {record, 1}
""",
)

# Replace an endpoint's record (whose URL may change: the URL must be free, and the old one is
# let go). KEYS: records, urls, epoch. ``record``: the new JSON. Returns 1, or 0 when the
# endpoint is gone, or -1 when the new URL is another endpoint's.
_REPLACE = LuaScript(
    "id record old_url new_url",
    """
if redis.call('HEXISTS', KEYS[1], id) == 0 then return 0 end
if old_url ~= new_url then
  local holder = redis.call('HGET', KEYS[2], new_url)
  if holder and holder ~= id then return -1 end
  redis.call('HDEL', KEYS[2], old_url)
  redis.call('HSET', KEYS[2], new_url, id)
end
redis.call('HSET', KEYS[1], id, record)
redis.call('INCR', KEYS[3])
return 1
""",
)

# Record a dispatcher's counts of attempts since its last flush, and disable the endpoint when it
# has failed for longer than allowed. KEYS: health, records, epoch. ``first_failure`` and
# ``last_success`` are 0 for none. Returns the reason it was disabled now, or "".
_HEALTH = LuaScript(
    "id delivered failed attempts_ok attempts_failed latency_ms last_error last_error_at"
    " first_failure last_success now disable_after_s",
    """
redis.call('HINCRBY', KEYS[1], 'delivered', delivered)
redis.call('HINCRBY', KEYS[1], 'failed', failed)
redis.call('HINCRBY', KEYS[1], 'attempts_ok', attempts_ok)
redis.call('HINCRBY', KEYS[1], 'attempts_failed', attempts_failed)
redis.call('HINCRBYFLOAT', KEYS[1], 'latency_ms', latency_ms)
local last_ok = tonumber(last_success)
local first_failed = tonumber(first_failure)
if last_ok > 0 then redis.call('HSET', KEYS[1], 'last_delivered_at', last_success) end
if last_error ~= '' then
  redis.call('HSET', KEYS[1], 'last_error', last_error, 'last_error_at', last_error_at)
end
local since = tonumber(redis.call('HGET', KEYS[1], 'failing_since') or '0')
if last_ok > 0 and last_ok >= first_failed then
  since = 0
  redis.call('HDEL', KEYS[1], 'failing_since')
elseif first_failed > 0 and since == 0 then
  since = first_failed
  redis.call('HSET', KEYS[1], 'failing_since', first_failure)
end
if since > 0 and tonumber(now) - since >= tonumber(disable_after_s) then
  local text = redis.call('HGET', KEYS[2], id)
  if text then
    local record = cjson.decode(text)
    if record['enabled'] then
      record['enabled'] = false
      record['disabled_reason'] = 'failing since ' .. string.format('%.0f', since) ..
        ' (Unix time), last error: ' .. last_error
      redis.call('HSET', KEYS[2], id, cjson.encode(record))
      redis.call('INCR', KEYS[3])
      return record['disabled_reason']
    end
  end
end
return ''
""",
)


class EndpointStore:
    def __init__(self, client: Any, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._for_url = client.register_script(_FOR_URL)
        self._replace = client.register_script(_REPLACE)
        self._add_health = client.register_script(_HEALTH)
        self._records = keys.tenant_endpoints
        self._urls = keys.tenant_endpoint_urls
        self._health_key = keys.endpoint_health
        self._epoch = keys.endpoints_epoch

    async def for_url(self, tenant: str, url: str, description: str = "") -> Endpoint:
        """The tenant's endpoint for ``url``, made (enabled, with a new secret) if it has none."""
        return (await self._find_or_make(tenant, url, description))[0]

    async def _find_or_make(
        self, tenant: str, url: str, description: str, most: int = 0
    ) -> tuple[Endpoint, bool]:
        made = Endpoint(
            new_endpoint_id(), tenant, url, new_secret(), description, created=time.time()
        )
        with translated("finding a webhook endpoint"):
            text, new = await self._for_url(
                keys=[self._records(tenant), self._urls(tenant), self._epoch],
                args=_FOR_URL.args(url=url, new_id=made.id, record=made.encoded(), most=most),
            )
        if int(new) == -1:
            raise LimitExceeded(
                f"tenant {tenant!r} holds {most} webhook endpoints, its limit: delete one first"
            )
        return Endpoint.decoded(text), bool(int(new))

    async def count(self, tenant: str) -> int:
        """How many endpoints the tenant holds."""
        with translated("counting webhook endpoints"):
            return int(await self.client.hlen(self._records(tenant)))

    async def create(
        self, tenant: str, url: str, description: str, enabled: bool, most: int = 0
    ) -> Endpoint:
        """A new endpoint (at most ``most`` a tenant; 0: no bound); Conflict if the tenant has
        one for ``url`` already."""
        made, new = await self._find_or_make(tenant, url, description, most)
        if not new:
            raise Conflict(f"endpoint {made.id} has this URL already: update it instead")
        if not enabled:
            made = await self.update(made, enabled=False)
        return made

    async def get(self, tenant: str, endpoint_id: str) -> Endpoint:
        with translated("reading a webhook endpoint"):
            text = await self.client.hget(self._records(tenant), endpoint_id)
        if text is None:
            raise NotFound(f"no endpoint with id {endpoint_id!r}")
        return Endpoint.decoded(text)

    async def of_url(self, tenant: str, url: str) -> Endpoint | None:
        """The tenant's endpoint for ``url``, if it has one (nothing is made)."""
        with translated("reading a webhook endpoint"):
            endpoint_id = await self.client.hget(self._urls(tenant), url)
            if endpoint_id is None:
                return None
            text = await self.client.hget(self._records(tenant), endpoint_id)
        return None if text is None else Endpoint.decoded(text)

    async def list(self, tenant: str) -> list[Endpoint]:
        """Every endpoint of the tenant, oldest first."""
        with translated("listing webhook endpoints"):
            found = await self.client.hvals(self._records(tenant))
        return sorted((Endpoint.decoded(text) for text in found), key=lambda e: (e.created, e.id))

    async def update(self, old: Endpoint, **changes: Any) -> Endpoint:
        """Endpoint ``old`` (as the caller read it) with ``changes`` (url, description, enabled,
        secret…) made; enabling it clears the reason it was disabled, and its failing streak.
        NotFound if it was deleted meanwhile."""
        tenant, endpoint_id = old.tenant, old.id
        if changes.get("enabled"):
            changes.setdefault("disabled_reason", "")
        new = replace(old, **changes)
        with translated("updating a webhook endpoint"):
            done = await self._replace(
                keys=[self._records(tenant), self._urls(tenant), self._epoch],
                args=_REPLACE.args(
                    id=endpoint_id, record=new.encoded(), old_url=old.url, new_url=new.url
                ),
            )
            if changes.get("enabled") and not old.enabled:
                await self.client.hdel(self._health_key(endpoint_id), "failing_since")
        if done == 0:
            raise NotFound(f"no endpoint with id {endpoint_id!r}")
        if done == -1:
            raise Conflict(f"another endpoint of yours has the URL {new.url!r}")
        return new

    async def rotate(self, tenant: str, endpoint_id: str, grace_s: float) -> Endpoint:
        """A new secret; the current one keeps signing for ``grace_s`` seconds."""
        old = await self.get(tenant, endpoint_id)
        return await self.update(
            old,
            secret=new_secret(),
            previous_secret=old.secret,
            previous_until=time.time() + grace_s,
        )

    async def delete(self, tenant: str, endpoint_id: str) -> Endpoint:
        gone = await self.get(tenant, endpoint_id)
        with translated("deleting a webhook endpoint"):
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.hdel(self._records(tenant), endpoint_id)
                pipe.hdel(self._urls(tenant), gone.url)
                pipe.delete(self._health_key(endpoint_id))
                pipe.incr(self._epoch)
                await pipe.execute()
        return gone

    async def epoch(self) -> str:
        """A value that changes whenever an endpoint changes."""
        with translated("reading the endpoints epoch"):
            return str(await self.client.get(self._epoch) or "0")

    async def health(self, endpoint_ids: Iterable[str]) -> dict[str, EndpointHealth]:
        ids = list(endpoint_ids)
        pipe = self.client.pipeline(transaction=False)
        for endpoint_id in ids:
            pipe.hgetall(self._health_key(endpoint_id))
        with translated("reading endpoints' health"):
            replies = await pipe.execute() if ids else []
        return {
            endpoint_id: _health_of(fields)
            for endpoint_id, fields in zip(ids, replies, strict=True)
        }

    async def record_health(
        self, tenant: str, endpoint_id: str, tally: HealthTally, now: float, disable_after_s: float
    ) -> str:
        """Add a dispatcher's tally; returns the reason the endpoint was disabled now, or ""."""
        with translated("recording endpoints' health"):
            reason = await self._add_health(
                keys=[self._health_key(endpoint_id), self._records(tenant), self._epoch],
                args=_HEALTH.args(
                    id=endpoint_id,
                    delivered=tally.delivered,
                    failed=tally.failed,
                    attempts_ok=tally.attempts_ok,
                    attempts_failed=tally.attempts_failed,
                    latency_ms=repr(tally.latency_ms),
                    last_error=tally.last_error,
                    last_error_at=repr(tally.last_error_at),
                    first_failure=repr(tally.first_failure),
                    last_success=repr(tally.last_success),
                    now=repr(now),
                    disable_after_s=repr(disable_after_s),
                ),
            )
        return str(reason or "")


@dataclass(slots=True)
class HealthTally:
    """What one dispatcher saw of an endpoint since it last recorded it."""

    delivered: int = 0
    failed: int = 0
    attempts_ok: int = 0
    attempts_failed: int = 0
    latency_ms: float = 0.0
    last_error: str = ""
    last_error_at: float = 0.0
    first_failure: float = 0.0  # the first failed attempt after the last success seen here
    last_success: float = 0.0


def _health_of(fields: dict[str, str]) -> EndpointHealth:
    ok = int(fields.get("attempts_ok", 0))
    return EndpointHealth(
        delivered=int(fields.get("delivered", 0)),
        failed=int(fields.get("failed", 0)),
        attempts_ok=ok,
        attempts_failed=int(fields.get("attempts_failed", 0)),
        latency_ms=float(fields.get("latency_ms", 0)) / ok if ok else 0.0,
        last_error=fields.get("last_error", ""),
        last_error_at=float(fields.get("last_error_at", 0)),
        failing_since=float(fields.get("failing_since", 0)),
        last_delivered_at=float(fields.get("last_delivered_at", 0)),
    )
