"""A tenant's webhook endpoints (:mod:`wordcast.storage.endpoints`): registered, listed, changed,
their secrets rotated, deleted (refused while subscriptions deliver there, unless they go too).

A subscription delivers to an endpoint by its URL: one given as ``callback_url`` finds or makes
the tenant's endpoint for it (so clients from before endpoints keep working, and are answered
with the endpoint's secret), one given as ``endpoint_id`` takes that endpoint's URL.

Subscribing to a URL holds the URL's lock shared (:meth:`Endpoints.urls_locked`); changing an
endpoint's URL or deleting it holds it exclusive, so the check that no subscription delivers
there (a count kept by the record scripts, not a scan) and the change are one step: a
subscription made meanwhile cannot be left with the secret of an endpoint that moved away.
A tenant holds at most ``max_endpoints_per_tenant`` endpoints, and makes at most
``endpoint_creations_per_second`` a second (over a burst of ten times that).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext

from wordcast.errors import Conflict, LimitExceeded, RateLimited
from wordcast.services.router.locking import locked
from wordcast.services.router.settings import RouterSettings
from wordcast.storage import Store
from wordcast.storage.endpoints import Endpoint
from wordcast.storage.records import Subscription, delivery_of
from wordcast.webhooks.netguard import resolve


class Endpoints:
    def __init__(
        self,
        settings: RouterSettings,
        store: Store,
        delete_subscriptions: Callable[[Sequence[str]], Awaitable[None]],
    ) -> None:
        self.settings = settings
        self.store = store.endpoints
        self._locks = store.locks
        self._subscriptions = store.subscriptions
        self._delete_subscriptions = delete_subscriptions
        per_second = settings.endpoint_creations_per_second
        self._creations = store.rate_limiter(per_second, 10 * per_second, "endpoint-creations")

    async def create(self, tenant: str, url: str, description: str, enabled: bool) -> Endpoint:
        await resolve(url, self.settings.address_policy)
        wait = await self._creations.take(tenant, 1)
        if wait > 0:
            raise RateLimited(
                f"tenant {tenant!r} is over its rate of "
                f"{self.settings.endpoint_creations_per_second:g} new endpoints/s; retry after "
                f"{wait:.2f} s",
                wait,
            )
        limit = self.settings.max_endpoints_per_tenant
        return await self.store.create(tenant, url, description, enabled, limit)

    async def check_room(self, tenant: str, addresses: Iterable[str]) -> None:
        """LimitExceeded if subscribing to ``addresses`` would make the tenant more endpoints
        than it may hold (checked before storing; requests at once may pass it by a few)."""
        urls = {delivery_of(address)[0] for address in addresses} - {""}
        limit = self.settings.max_endpoints_per_tenant
        if not urls:
            return
        held = await self.store.count(tenant)
        if held + len(urls) <= limit:  # room even if every URL is new: one round trip
            return
        new = [url for url in urls if await self.store.of_url(tenant, url) is None]
        if new and held + len(new) > limit:
            raise LimitExceeded(
                f"tenant {tenant!r} may hold {limit} webhook endpoints, and this would make "
                f"{len(new)} more: deliver to an endpoint you have, or delete one; nothing was "
                "stored"
            )

    def urls_locked(
        self, tenant: str, addresses: Iterable[str], shared: bool = True
    ) -> AbstractAsyncContextManager[None]:
        """Hold the locks of the webhook URLs among ``addresses`` for the block (module
        docstring): shared to subscribe there, exclusive to change or delete an endpoint."""
        urls = {delivery_of(address)[0] for address in addresses} - {""}
        if not urls:
            return nullcontext()
        names = [_lock_name(tenant, url) for url in urls]
        return locked(
            lambda token, ttl_ms: self._locks.take(names, token, ttl_ms, shared),
            lambda token: self._locks.give_back(names, token),
            "another request has been changing this endpoint"
            if shared
            else "subscriptions to this URL have been registering",
        )

    async def subscriptions_of(self, endpoint: Endpoint) -> int:
        """How many of its tenant's subscriptions deliver to the endpoint (a count, no scan)."""
        return await self._subscriptions.url_subscriptions(endpoint.tenant, endpoint.url)

    async def url_of(self, tenant: str, endpoint_id: str) -> str:
        """The URL a subscription naming this endpoint delivers to (NotFound if not the
        tenant's)."""
        return (await self.store.get(tenant, endpoint_id)).url

    async def for_addresses(self, tenant: str, addresses: Iterable[str]) -> dict[str, Endpoint]:
        """The endpoint of each webhook URL among stored delivery addresses (made if new)."""
        found: dict[str, Endpoint] = {}
        for address in addresses:
            url, _ = delivery_of(address)
            if url and url not in found:
                found[url] = await self.store.for_url(tenant, url)
        return found

    async def answered(self, tenant: str, subs: Sequence[Subscription]) -> list[Subscription]:
        """The subscriptions as a creation answer shows them: each with its endpoint's secret."""
        endpoints = await self.for_addresses(tenant, [sub.callback_url for sub in subs])
        return [_with_endpoint(sub, endpoints) for sub in subs]

    async def shown(self, tenant: str, subs: Sequence[Subscription]) -> list[Subscription]:
        """The subscriptions with their endpoints' ids (none is made, no secret shown)."""
        ids: dict[str, str] = {}
        for url in {sub.webhook_url for sub in subs} - {""}:
            endpoint = await self.store.of_url(tenant, url)
            ids[url] = endpoint.id if endpoint is not None else ""
        return [sub._replace(endpoint_id=ids.get(sub.webhook_url, "")) for sub in subs]

    async def delivering(self, tenant: str, url: str) -> list[str]:
        """The ids of the tenant's subscriptions that deliver to ``url``."""
        found: list[str] = []
        cursor = None
        while cursor != 0:
            cursor, subs = await self._subscriptions.tenant_subscriptions(tenant, cursor or 0, 1000)
            found += [sub.id for sub in subs if sub.webhook_url == url]
        return found

    async def update(self, tenant: str, endpoint_id: str, **changes: object) -> Endpoint:
        old = await self.store.get(tenant, endpoint_id)
        url = changes.get("url")
        if not isinstance(url, str) or url == old.url:
            return await self.store.update(old, **changes)
        await resolve(url, self.settings.address_policy)
        async with self.urls_locked(tenant, [old.url, url], shared=False):
            old = await self.store.get(tenant, endpoint_id)  # as it is now, under the lock
            held = await self.subscriptions_of(old)
            if held:
                raise Conflict(
                    f"{held} subscriptions deliver to endpoint {endpoint_id}, by its URL: "
                    "make a new endpoint for the new URL and subscribe there instead"
                )
            return await self.store.update(old, **changes)

    async def rotate(self, tenant: str, endpoint_id: str) -> Endpoint:
        return await self.store.rotate(tenant, endpoint_id, self.settings.secret_grace_s)

    async def rotate_for(self, sub: Subscription) -> str:
        """A subscription's secret is its endpoint's: rotated for every subscription there."""
        if not sub.webhook_url:
            raise Conflict(f"subscription {sub.id} delivers to the match stream only: no secret")
        endpoint = await self.store.for_url(sub.tenant, sub.webhook_url)
        return (await self.rotate(sub.tenant, endpoint.id)).secret

    async def delete(self, tenant: str, endpoint_id: str, cascade: bool) -> list[str]:
        """Delete the endpoint; its subscriptions too if ``cascade`` (Conflict if it has some
        and not). Returns the ids of the subscriptions deleted."""
        endpoint = await self.store.get(tenant, endpoint_id)
        async with self.urls_locked(tenant, [endpoint.url], shared=False):
            endpoint = await self.store.get(tenant, endpoint_id)
            count = await self.subscriptions_of(endpoint)
            if count and not cascade:
                raise Conflict(
                    f"{count} subscriptions deliver to endpoint {endpoint_id}: delete them "
                    "first, or ask for them to go too (?cascade=true)"
                )
            held = await self.delivering(tenant, endpoint.url) if count else []
            if held:
                await self._delete_subscriptions(held)
            await self.store.delete(tenant, endpoint_id)
        return held


def _with_endpoint(sub: Subscription, endpoints: dict[str, Endpoint]) -> Subscription:
    endpoint = endpoints.get(sub.webhook_url)
    if endpoint is None:
        return sub
    return sub.answered(endpoint.id, endpoint.secret)


def _lock_name(tenant: str, url: str) -> str:
    return "url:" + hashlib.sha256(f"{tenant}\0{url}".encode()).hexdigest()[:32]
