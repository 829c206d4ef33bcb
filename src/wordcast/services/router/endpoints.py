"""A tenant's webhook endpoints (:mod:`wordcast.storage.endpoints`): registered, listed, changed,
their secrets rotated, deleted (refused while subscriptions deliver there, unless they go too).

A subscription delivers to an endpoint by its URL: one given as ``callback_url`` finds or makes
the tenant's endpoint for it (so clients from before endpoints keep working, and are answered
with the endpoint's secret), one given as ``endpoint_id`` takes that endpoint's URL.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence

from wordcast.errors import Conflict
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
        self._subscriptions = store.subscriptions
        self._delete_subscriptions = delete_subscriptions

    async def create(self, tenant: str, url: str, description: str, enabled: bool) -> Endpoint:
        await resolve(url, self.settings.address_policy)
        return await self.store.create(tenant, url, description, enabled)

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
        if isinstance(url, str) and url != old.url:
            await resolve(url, self.settings.address_policy)
            held = await self.delivering(tenant, old.url)
            if held:
                raise Conflict(
                    f"{len(held)} subscriptions deliver to endpoint {endpoint_id}, by its URL: "
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
        held = await self.delivering(tenant, endpoint.url)
        if held and not cascade:
            raise Conflict(
                f"{len(held)} subscriptions deliver to endpoint {endpoint_id}: delete them "
                "first, or ask for them to go too (?cascade=true)"
            )
        if held:
            await self._delete_subscriptions(held)
        await self.store.delete(tenant, endpoint_id)
        return held


def _with_endpoint(sub: Subscription, endpoints: dict[str, Endpoint]) -> Subscription:
    endpoint = endpoints.get(sub.webhook_url)
    if endpoint is None:
        return sub
    return sub.answered(endpoint.id, endpoint.secret)
