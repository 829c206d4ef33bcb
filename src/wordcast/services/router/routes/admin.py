"""Admin operations: they need the admin token, not a tenant's API key."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path

from ....errors import NotFound, StoreUnavailable
from ....schemas import ERRORS, TENANT_PATTERN, ApiKeyOut, TenantIn, TenantKey, TenantKeys
from ....store import API_KEY_ID_CHARS
from ...common import OrjsonRoute
from ..deps import Admin, ReadyState


def admin_router(prefix: str) -> APIRouter:
    """A router every route of which needs the admin token: made here, so no admin route can be
    added without that check."""
    return APIRouter(
        prefix=prefix,
        tags=["admin"],
        dependencies=[Admin],
        responses=ERRORS,
        route_class=OrjsonRoute,
    )


router = admin_router("/admin")


TenantName = Annotated[str, Path(min_length=1, max_length=64, pattern=TENANT_PATTERN)]
KeyId = Annotated[str, Path(pattern=rf"^[0-9a-f]{{{API_KEY_ID_CHARS}}}$")]


@router.post("/tenants", status_code=201, response_model=TenantKey)
async def create_tenant_key(body: TenantIn, state: ReadyState) -> TenantKey:
    """A new API key for a tenant (created if new). The key is shown only in this answer."""
    try:
        api_key, key_id = await state.tenants.create_api_key(body.tenant)
    except StoreUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc
    return TenantKey(tenant=body.tenant, api_key=api_key, key_id=key_id)


@router.get("/tenants/{tenant}/keys", response_model=TenantKeys)
async def list_tenant_keys(tenant: TenantName, state: ReadyState) -> TenantKeys:
    """A tenant's API keys, by id (the keys themselves are not kept)."""
    try:
        keys = await state.store.api_keys(tenant)
    except StoreUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc
    ordered = sorted(keys.items(), key=lambda item: (item[1], item[0]))
    return TenantKeys(tenant=tenant, keys=[ApiKeyOut(key_id=k, created=t) for k, t in ordered])


@router.delete("/tenants/{tenant}/keys/{key_id}", status_code=204)
async def revoke_tenant_key(tenant: TenantName, key_id: KeyId, state: ReadyState) -> None:
    """Revoke an API key: refused at once by this router, by the others within about a second."""
    try:
        await state.tenants.revoke_api_key(tenant, key_id)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    except StoreUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc
