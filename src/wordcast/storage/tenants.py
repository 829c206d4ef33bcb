"""Tenants' API keys (only their SHA-256 is kept) and shared streams' grants, in Redis."""

from __future__ import annotations

import time
from typing import Any

from wordcast.errors import NotFound
from wordcast.storage.keys import Keys
from wordcast.storage.redis import translated

API_KEY_ID_CHARS = 16  # of the key's SHA-256: names a key without telling anything of it


class TenantStore:
    def __init__(self, client: Any, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    async def add_api_key(self, key_hash: str, tenant: str) -> str:
        """Register the hash of an API key for a tenant (the key itself is never stored); returns
        the key's id, which names it when it is listed or revoked."""
        key_id = key_hash[:API_KEY_ID_CHARS]
        with translated("storing an API key"):
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.set(self.keys.api_key(key_hash), tenant)
                pipe.hset(self.keys.tenant_keys(tenant), key_id, f"{key_hash} {time.time():.3f}")
                await pipe.execute()
        return key_id

    async def has_keys(self, tenant: str) -> bool:
        with translated("reading a tenant's API keys"):
            return bool(await self.client.exists(self.keys.tenant_keys(tenant)))

    async def tenants(self) -> list[tuple[str, int]]:
        """Every tenant that has an API key: (name, keys), by name. A tenant is made with its
        first key, so the keys' hashes are the list (a scan, for the admin)."""
        pattern = self.keys.tenant_keys("*")
        head, _, tail = pattern.partition("*")
        with translated("listing the tenants"):
            names = sorted(
                {
                    key[len(head) : len(key) - len(tail)]
                    async for key in self.client.scan_iter(match=pattern, count=1000)
                }
            )
            pipe = self.client.pipeline(transaction=False)
            for name in names:
                pipe.hlen(self.keys.tenant_keys(name))
            counts = await pipe.execute() if names else []
        return [(name, int(count)) for name, count in zip(names, counts, strict=True)]

    async def api_keys(self, tenant: str) -> dict[str, float]:
        """A tenant's API keys: id -> when it was made (Unix time)."""
        with translated("listing a tenant's API keys"):
            found = await self.client.hgetall(self.keys.tenant_keys(tenant))
        return {key_id: float(value.split()[1]) for key_id, value in found.items()}

    async def revoke_api_key(self, tenant: str, key_id: str) -> str:
        """Forget one of a tenant's API keys; returns its hash. NotFound if the tenant has no key
        with that id."""
        with translated("revoking an API key"):
            value = await self.client.hget(self.keys.tenant_keys(tenant), key_id)
            if value is None:
                raise NotFound(f"tenant {tenant!r} has no API key {key_id!r}; nothing was revoked")
            key_hash = str(value).split()[0]
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.delete(self.keys.api_key(key_hash))
                pipe.hdel(self.keys.tenant_keys(tenant), key_id)
                pipe.incr(self.keys.key_revocations)
                await pipe.execute()
        return key_hash

    async def key_revocations(self) -> int:
        """How many API keys have been revoked so far: routers that see it grow forget the keys
        they remember."""
        with translated("counting revoked API keys"):
            return int(await self.client.get(self.keys.key_revocations) or 0)

    async def tenant_for(self, key_hash: str) -> str | None:
        with translated("checking an API key"):
            tenant = await self.client.get(self.keys.api_key(key_hash))
        return str(tenant) if tenant is not None else None

    # -- shared streams -------------------------------------------------------------------------
    async def create_stream(self, stream: str) -> bool:
        """Make a shared stream with no grants; False if it exists already."""
        with translated("creating a stream"):
            return bool(await self.client.sadd(self.keys.streams, stream))

    async def streams(self) -> dict[str, dict[str, tuple[bool, bool]]]:
        """Every shared stream: tenant -> (may publish, may subscribe)."""
        with translated("listing streams"):
            names = sorted(await self.client.smembers(self.keys.streams))
            pipe = self.client.pipeline(transaction=False)
            for name in names:
                pipe.hgetall(self.keys.stream_grants(name))
            grants = await pipe.execute() if names else []
        return {
            name: {tenant: grant_from_value(value) for tenant, value in found.items()}
            for name, found in zip(names, grants, strict=True)
        }

    async def stream_grants(self, stream: str) -> dict[str, tuple[bool, bool]]:
        """A shared stream's grants: tenant -> (may publish, may subscribe). NotFound if none."""
        with translated("reading a stream"):
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.sismember(self.keys.streams, stream)
                pipe.hgetall(self.keys.stream_grants(stream))
                exists, found = await pipe.execute()
        if not exists:
            raise NotFound(f"no stream named {stream!r}")
        return {tenant: grant_from_value(value) for tenant, value in found.items()}

    async def grant(self, stream: str, tenant: str) -> tuple[bool, bool]:
        """What ``tenant`` may do with ``stream``: (publish, subscribe); nothing for an unknown
        stream."""
        with translated("reading a stream grant"):
            value = await self.client.hget(self.keys.stream_grants(stream), tenant)
        return grant_from_value(value or "")

    async def set_grant(self, stream: str, tenant: str, publish: bool, subscribe: bool) -> None:
        """Give ``tenant`` exactly these rights on ``stream`` (NotFound for an unknown stream).
        Counted as a revocation, so routers forget the grants they remember."""
        value = " ".join(
            name for name, on in (("publish", publish), ("subscribe", subscribe)) if on
        )
        with translated("granting a stream"):
            if not await self.client.sismember(self.keys.streams, stream):
                raise NotFound(f"no stream named {stream!r}")
            async with self.client.pipeline(transaction=True) as pipe:
                if value:
                    pipe.hset(self.keys.stream_grants(stream), tenant, value)
                else:
                    pipe.hdel(self.keys.stream_grants(stream), tenant)
                pipe.incr(self.keys.key_revocations)
                await pipe.execute()

    async def drop_stream(self, stream: str) -> None:
        """Forget a shared stream and its grants (the subscriptions to it are deleted first)."""
        with translated("deleting a stream"):
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.srem(self.keys.streams, stream)
                pipe.delete(self.keys.stream_grants(stream))
                pipe.incr(self.keys.key_revocations)
                await pipe.execute()


def grant_from_value(value: str) -> tuple[bool, bool]:
    words = value.split()
    return "publish" in words, "subscribe" in words
