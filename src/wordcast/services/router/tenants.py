"""Who is asking, and what they may do: tenants' API keys, shared streams' grants, the admin token.

Only a key's SHA-256 is stored (a key is shown once, when it is made). A router remembers the
keys it checked for ``KEY_CACHE_SECONDS``, so a stream of publications costs no Redis call per
request for its key. Revoking a key counts one more revocation in Redis; every router reads that
count every ``key_revocation_poll_s`` and forgets the keys it remembers when it grows, so a revoked
key stops working within about that time everywhere (at once on the router that revoked it), and
within ``KEY_CACHE_SECONDS`` on a router that cannot reach Redis meanwhile.

A shared stream's grants are remembered the same way, and forgotten on the same count: changing
a grant counts as a revocation.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import time

from wordcast.errors import Forbidden, StoreUnavailable, Unauthenticated
from wordcast.services.router.settings import DEVELOPMENT_API_KEY, RouterSettings
from wordcast.storage import Store

log = logging.getLogger(__name__)

KEY_CACHE_SECONDS = 30.0
KNOWN_GRANTS_MAX = 10_000  # (stream, tenant) pairs remembered; past it, forgotten all at once


class Tenants:
    def __init__(self, settings: RouterSettings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self._known_keys: dict[str, tuple[str, float]] = {}  # key hash -> (tenant, checked at)
        # (stream, tenant) -> ((may publish, may subscribe), read at)
        self._known_grants: dict[tuple[str, str], tuple[tuple[bool, bool], float]] = {}
        self._revocations_seen: int | None = None
        self._forgotten = 0  # times the remembered keys were forgotten

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
        forgotten = self._forgotten
        tenant = await self.store.tenants.tenant_for(key_hash)
        if tenant is None:
            raise Unauthenticated("unknown API key")
        # Read before a revocation that was noticed while the read was under way: not kept.
        if forgotten == self._forgotten:
            self._known_keys[key_hash] = (tenant, time.monotonic())
        return tenant

    async def check_grant(self, tenant: str, stream: str, publish: bool) -> None:
        """Raise Forbidden unless ``tenant`` may publish to (``publish``) or subscribe to shared
        ``stream``; one that does not exist is refused alike, so as not to tell it exists."""
        now = time.monotonic()
        known = self._known_grants.get((stream, tenant))
        if known is not None and now - known[1] < KEY_CACHE_SECONDS:
            rights = known[0]
        else:
            forgotten = self._forgotten
            rights = await self.store.tenants.grant(stream, tenant)
            if forgotten == self._forgotten:
                if len(self._known_grants) >= KNOWN_GRANTS_MAX:
                    self._known_grants.clear()
                self._known_grants[(stream, tenant)] = (rights, now)
        if not rights[0 if publish else 1]:
            action = "publish to" if publish else "subscribe to"
            raise Forbidden(
                f"tenant {tenant!r} may not {action} stream {stream!r}: an admin grants it "
                f"(PUT /admin/streams/{stream}/grants/{tenant})"
            )

    def forget_grants(self) -> None:
        """After this router changed a grant: read it afresh (the others do on the count)."""
        self._known_grants.clear()
        self._forgotten += 1

    def check_admin(self, token: str | None) -> None:
        expected = self.settings.admin_token.get_secret_value().encode()
        if not token or not hmac.compare_digest(token.encode(), expected):
            raise Unauthenticated("admin operations need the admin token as a Bearer token")

    async def create_api_key(self, tenant: str) -> tuple[str, str]:
        """A new API key for a tenant, and its id; only its hash is stored, so it is shown once."""
        api_key = "wck_" + secrets.token_urlsafe(32)
        key_id = await self.store.tenants.add_api_key(
            hashlib.sha256(api_key.encode()).hexdigest(), tenant
        )
        return api_key, key_id

    async def revoke_api_key(self, tenant: str, key_id: str) -> None:
        """Revoke a key (NotFound if the tenant has none with that id). This router forgets it at
        once; the others when they next read the revocations."""
        self._known_keys.pop(await self.store.tenants.revoke_api_key(tenant, key_id), None)
        self._forgotten += 1

    @property
    def generation(self) -> int:
        """Grows whenever keys may have been revoked: what holders of a checked key (an open
        match stream) watch, to check it again."""
        return self._forgotten

    async def forget_revoked(self) -> None:
        """Forget every remembered key if a key was revoked (on any router) since the last look."""
        revocations = await self.store.tenants.key_revocations()
        if self._revocations_seen is not None and revocations != self._revocations_seen:
            self._known_keys.clear()
            self._known_grants.clear()
            self._forgotten += 1
        self._revocations_seen = revocations

    async def follow_revocations(self) -> None:
        """:meth:`forget_revoked` every ``key_revocation_poll_s``, for as long as the router runs."""
        while True:
            try:
                await self.forget_revoked()
            except StoreUnavailable as exc:
                log.warning("could not read the API key revocations: %s", exc)
            # The loop must outlive surprises: without it revoked keys live on in the cache.
            except Exception:
                log.exception("following the API key revocations failed")
            await asyncio.sleep(self.settings.key_revocation_poll_s)
