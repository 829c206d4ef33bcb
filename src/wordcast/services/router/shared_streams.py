"""Shared streams: named streams an admin makes, with publish and subscribe grants per tenant.

By default a tenant's publications meet only that tenant's own subscriptions. A shared stream is
the explicit way across: a tenant granted ``publish`` may send publications to it, a tenant
granted ``subscribe`` may register subscriptions to it, and every match says which stream and
which publisher it came from. Taking a subscribe grant away (or the stream) deletes the tenant's
subscriptions to the stream, so nothing keeps listening without a grant.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from wordcast.errors import Conflict
from wordcast.services.router.tenants import Tenants
from wordcast.storage import Store

Delete = Callable[[Sequence[str]], Awaitable[None]]
PAGE = 1_000


class SharedStreams:
    def __init__(self, store: Store, tenants: Tenants, delete: Delete) -> None:
        self.store = store
        self.tenants = tenants
        self._delete = delete

    async def create(self, stream: str) -> None:
        if not await self.store.tenants.create_stream(stream):
            raise Conflict(f"stream {stream!r} exists already")

    async def grants(self, stream: str) -> dict[str, tuple[bool, bool]]:
        """tenant -> (may publish, may subscribe); NotFound for an unknown stream."""
        return await self.store.tenants.stream_grants(stream)

    async def all(self) -> dict[str, dict[str, tuple[bool, bool]]]:
        return await self.store.tenants.streams()

    async def grant(self, stream: str, tenant: str, publish: bool, subscribe: bool) -> int:
        """Set what ``tenant`` may do with ``stream``; returns how many of its subscriptions to
        the stream were deleted because it may no longer subscribe."""
        await self.store.tenants.set_grant(stream, tenant, publish, subscribe)
        self.tenants.forget_grants()
        return 0 if subscribe else await self._unsubscribe_all(stream, tenant)

    async def delete(self, stream: str) -> int:
        """Forget a stream: its grants first, then every subscription to it; returns how many
        subscriptions were deleted."""
        grants = await self.store.tenants.stream_grants(stream)
        for tenant in grants:
            await self.store.tenants.set_grant(stream, tenant, False, False)
        self.tenants.forget_grants()
        deleted = 0
        for tenant, (_, subscribe) in grants.items():
            if subscribe:
                deleted += await self._unsubscribe_all(stream, tenant)
        await self.store.tenants.drop_stream(stream)
        return deleted

    async def _unsubscribe_all(self, stream: str, tenant: str) -> int:
        """Delete every subscription of ``tenant`` to ``stream`` (the grant is gone already)."""
        found: list[str] = []
        cursor = 0
        while True:
            cursor, page = await self.store.subscriptions.tenant_subscriptions(tenant, cursor, PAGE)
            found += [sub.id for sub in page if sub.stream == stream]
            if not cursor:
                break
        for start in range(0, len(found), PAGE):
            await self._delete(found[start : start + PAGE])
        return len(found)
