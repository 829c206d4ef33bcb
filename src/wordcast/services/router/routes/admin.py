"""Admin operations: they need the admin token, not a tenant's API key."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from ....errors import StoreUnavailable
from ....schemas import ERRORS, TenantIn, TenantKey
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


@router.post("/tenants", status_code=201, response_model=TenantKey)
async def create_tenant_key(body: TenantIn, state: ReadyState) -> TenantKey:
    """A new API key for a tenant (created if new). The key is shown only in this answer."""
    try:
        api_key = await state.tenants.create_api_key(body.tenant)
    except StoreUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc
    return TenantKey(tenant=body.tenant, api_key=api_key)
