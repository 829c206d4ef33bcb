"""The router's admin operations, for a client whose key is the admin token: tenants' API keys
and shared streams (who may publish to them and subscribe to them)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote


class AdminCalls:
    """Mixed into :class:`wordcast.client.RouterClient`, whose ``_call`` they use."""

    async def _call(self, method: str, path: str, **request: Any) -> Any:
        raise NotImplementedError

    async def create_tenant_key(self, tenant: str) -> dict[str, Any]:
        """A new API key for ``tenant`` (made if new): ``{"tenant", "api_key", "key_id",
        "new_tenant"}``."""
        result: dict[str, Any] = await self._call("POST", "/admin/tenants", json={"tenant": tenant})
        return result

    async def tenants(self) -> list[dict[str, Any]]:
        """Every tenant with an API key, by name: ``{"tenant", "keys", "subscriptions"}``."""
        answer = await self._call("GET", "/admin/tenants")
        return list(answer["tenants"])

    async def tenant_keys(self, tenant: str) -> list[dict[str, Any]]:
        """``tenant``'s API keys, oldest first: ``{"key_id", "created"}`` (the keys are not kept)."""
        answer = await self._call("GET", f"/admin/tenants/{quote(tenant, safe='')}/keys")
        return list(answer["keys"])

    async def revoke_tenant_key(self, tenant: str, key_id: str) -> None:
        await self._call(
            "DELETE", f"/admin/tenants/{quote(tenant, safe='')}/keys/{quote(key_id, safe='')}"
        )

    async def create_stream(self, stream: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._call("POST", "/admin/streams", json={"stream": stream})
        return result

    async def streams(self) -> list[dict[str, Any]]:
        """Every shared stream: ``{"stream", "grants": [{"tenant", "publish", "subscribe"}]}``."""
        return list((await self._call("GET", "/admin/streams"))["streams"])

    async def grant(
        self, stream: str, tenant: str, *, publish: bool, subscribe: bool
    ) -> dict[str, Any]:
        """Give ``tenant`` exactly these rights on ``stream`` (taking subscribe away deletes its
        subscriptions to the stream)."""
        path = f"/admin/streams/{quote(stream, safe='')}/grants/{quote(tenant, safe='')}"
        result: dict[str, Any] = await self._call(
            "PUT", path, json={"publish": publish, "subscribe": subscribe}
        )
        return result

    async def delete_stream(self, stream: str) -> None:
        await self._call("DELETE", f"/admin/streams/{quote(stream, safe='')}")
