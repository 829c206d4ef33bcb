"""Who is asking: tenants' API keys and the admin token.

Only a key's SHA-256 is stored (a key is shown once, when it is made). A router remembers the
keys it checked for ``KEY_CACHE_SECONDS``, so a stream of publications costs no Redis call per
request for its key; a revoked key stops working within that time on every router (at once on
the one that revoked it).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

from ...errors import Unauthenticated
from ...store import SubscriptionStore
from .settings import DEVELOPMENT_API_KEY, RouterSettings

KEY_CACHE_SECONDS = 30.0


class Tenants:
    def __init__(self, settings: RouterSettings, store: SubscriptionStore) -> None:
        self.settings = settings
        self.store = store
        self._known_keys: dict[str, tuple[str, float]] = {}  # key hash -> (tenant, checked at)

    async def authenticate(self, api_key: str | None) -> str:
        """The tenant an API key belongs to; raises Unauthenticated."""
        if not api_key:
            raise Unauthenticated("no API key: send Authorization: Bearer <key>")
        if self.settings.environment == "development" and api_key == DEVELOPMENT_API_KEY:
            return "dev"
        key_hash = hashlib.sha256(api_key.encode()).hexdigest()
        known = self._known_keys.get(key_hash)
        if known is not None and time.monotonic() - known[1] < KEY_CACHE_SECONDS:
            return known[0]
        tenant = await self.store.tenant_for(key_hash)
        if tenant is None:
            raise Unauthenticated("unknown API key")
        self._known_keys[key_hash] = (tenant, time.monotonic())
        return tenant

    def check_admin(self, token: str | None) -> None:
        expected = self.settings.admin_token.get_secret_value().encode()
        if not token or not hmac.compare_digest(token.encode(), expected):
            raise Unauthenticated("admin operations need the admin token as a Bearer token")

    async def create_api_key(self, tenant: str) -> tuple[str, str]:
        """A new API key for a tenant, and its id; only its hash is stored, so it is shown once."""
        api_key = "wck_" + secrets.token_urlsafe(32)
        key_id = await self.store.add_api_key(hashlib.sha256(api_key.encode()).hexdigest(), tenant)
        return api_key, key_id

    async def revoke_api_key(self, tenant: str, key_id: str) -> None:
        """Revoke a key (NotFound if the tenant has none with that id). This router forgets it at
        once; the others within ``KEY_CACHE_SECONDS``."""
        self._known_keys.pop(await self.store.revoke_api_key(tenant, key_id), None)
