"""A tenant's webhook endpoints: where its matches are POSTed, each with one signing secret; and
its dead letters, the messages given up on there."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any


class EndpointCalls:
    """Mixed into :class:`wordcast.client.RouterClient`, whose ``_call`` they use."""

    async def _call(self, method: str, path: str, **request: Any) -> Any:
        raise NotImplementedError

    async def endpoints(self) -> list[dict[str, Any]]:
        """The tenant's endpoints, oldest first, each with its health."""
        answer = await self._call("GET", "/endpoints")
        return list(answer["endpoints"])

    async def create_endpoint(
        self, url: str, description: str = "", enabled: bool = True
    ) -> dict[str, Any]:
        """A new endpoint, with its ``secret``."""
        body = {"url": url, "description": description, "enabled": enabled}
        result: dict[str, Any] = await self._call("POST", "/endpoints", json=body)
        return result

    async def endpoint(self, endpoint_id: str, secret: bool = False) -> dict[str, Any]:
        """One endpoint, with its health and number of subscriptions (or with its secret)."""
        path = f"/endpoints/{endpoint_id}" + ("/secret" if secret else "")
        result: dict[str, Any] = await self._call("GET", path)
        return result

    async def update_endpoint(self, endpoint_id: str, **changes: Any) -> dict[str, Any]:
        """Change ``url``, ``description`` or ``enabled``."""
        result: dict[str, Any] = await self._call(
            "PATCH", f"/endpoints/{endpoint_id}", json=changes
        )
        return result

    async def rotate_endpoint_secret(self, endpoint_id: str) -> dict[str, Any]:
        """A new secret (in the answer); the old one keeps signing for the grace period."""
        result: dict[str, Any] = await self._call("POST", f"/endpoints/{endpoint_id}/secret")
        return result

    async def delete_endpoint(self, endpoint_id: str, cascade: bool = False) -> None:
        """Delete it; with ``cascade`` the subscriptions delivering there too."""
        params = {"cascade": "true"} if cascade else {}
        await self._call("DELETE", f"/endpoints/{endpoint_id}", params=params)

    async def dead_letters(self, page: int = 500) -> AsyncIterator[dict[str, Any]]:
        """This key's tenant's dead letters (messages given up on), oldest first."""
        after = None
        while True:
            params: dict[str, Any] = {"limit": page} | ({"after": after} if after else {})
            answer = await self._call("GET", "/deadletters", params=params)
            for letter in answer["dead_letters"]:
                yield letter
            after = answer["next_after"]
            if not after:
                return
