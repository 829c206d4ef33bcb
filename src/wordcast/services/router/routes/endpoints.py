"""Webhook endpoints: where a tenant's matches are POSTed, each signed with one secret."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from wordcast.services.endpoint_schemas import (
    EndpointHealthOut,
    EndpointIn,
    EndpointOut,
    EndpointPage,
    EndpointUpdate,
)
from wordcast.services.router.deps import ReadyState, Tenant, TenantRoute
from wordcast.services.schemas import ERRORS
from wordcast.storage.endpoints import Endpoint, EndpointHealth

router = APIRouter(
    prefix="/endpoints", tags=["endpoints"], responses=ERRORS, route_class=TenantRoute
)

EndpointId = Annotated[str, Path(pattern=r"^ep_[0-9a-f]{24}$")]


def _out(
    endpoint: Endpoint,
    health: EndpointHealth | None = None,
    subscriptions: int | None = None,
    secret: bool = False,
) -> EndpointOut:
    return EndpointOut(
        id=endpoint.id,
        url=endpoint.url,
        description=endpoint.description,
        enabled=endpoint.enabled,
        disabled_reason=endpoint.disabled_reason or None,
        created=endpoint.created,
        subscriptions=subscriptions,
        health=None if health is None else _health(health),
        secret=endpoint.secret if secret else None,
    )


def _health(health: EndpointHealth) -> EndpointHealthOut:
    return EndpointHealthOut(
        delivered=health.delivered,
        failed=health.failed,
        attempts_ok=health.attempts_ok,
        attempts_failed=health.attempts_failed,
        latency_ms=round(health.latency_ms, 3),
        last_error=health.last_error or None,
        last_error_at=health.last_error_at or None,
        failing_since=health.failing_since or None,
        last_delivered_at=health.last_delivered_at or None,
    )


@router.post("", status_code=201, response_model=EndpointOut)
async def create_endpoint(body: EndpointIn, state: ReadyState, tenant: Tenant) -> EndpointOut:
    """Register an endpoint; the answer holds its signing secret. One endpoint per URL: a 409
    names the one that has it."""
    made = await state.endpoints.create(tenant, str(body.url), body.description, body.enabled)
    return _out(made, EndpointHealth(), 0, secret=True)


@router.get("", response_model=EndpointPage)
async def list_endpoints(
    state: ReadyState,
    tenant: Tenant,
    cursor: Annotated[
        int, Query(ge=0, description="Where the page starts: 0, or the last page's next_cursor.")
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=1_000)] = 100,
) -> EndpointPage:
    """Your endpoints, oldest first, each with its health, ``limit`` at a time (next_cursor 0
    at the end), and how many you have in all."""
    endpoints = await state.store.endpoints.list(tenant)
    page = endpoints[cursor : cursor + limit]
    health = await state.store.endpoints.health(e.id for e in page)
    after = cursor + len(page)
    return EndpointPage(
        endpoints=[_out(e, health[e.id]) for e in page],
        total=len(endpoints),
        next_cursor=after if after < len(endpoints) else 0,
    )


@router.get("/{endpoint_id}", response_model=EndpointOut)
async def get_endpoint(endpoint_id: EndpointId, state: ReadyState, tenant: Tenant) -> EndpointOut:
    """One endpoint, with its health and how many subscriptions deliver to it."""
    endpoint = await state.store.endpoints.get(tenant, endpoint_id)
    health = await state.store.endpoints.health([endpoint_id])
    held = await state.endpoints.subscriptions_of(endpoint)
    return _out(endpoint, health[endpoint_id], held)


@router.get("/{endpoint_id}/secret", response_model=EndpointOut)
async def get_endpoint_secret(
    endpoint_id: EndpointId, state: ReadyState, tenant: Tenant
) -> EndpointOut:
    """The endpoint with its signing secret."""
    return _out(await state.store.endpoints.get(tenant, endpoint_id), secret=True)


@router.patch("/{endpoint_id}", response_model=EndpointOut)
async def update_endpoint(
    endpoint_id: EndpointId, body: EndpointUpdate, state: ReadyState, tenant: Tenant
) -> EndpointOut:
    """Change its description, enable or disable it, or (with no subscriptions) its URL."""
    changes: dict[str, Any] = body.model_dump(exclude_none=True)
    if "url" in changes:
        changes["url"] = str(body.url)
    return _out(await state.endpoints.update(tenant, endpoint_id, **changes))


@router.post("/{endpoint_id}/secret", response_model=EndpointOut)
async def rotate_endpoint_secret(
    endpoint_id: EndpointId, state: ReadyState, tenant: Tenant
) -> EndpointOut:
    """A new signing secret; messages carry the old one's signature too for the grace period
    (WORDCAST_ROUTER_SECRET_GRACE_S)."""
    return _out(await state.endpoints.rotate(tenant, endpoint_id), secret=True)


@router.delete("/{endpoint_id}", status_code=204)
async def delete_endpoint(
    endpoint_id: EndpointId,
    state: ReadyState,
    tenant: Tenant,
    cascade: Annotated[
        bool, Query(description="Delete the subscriptions that deliver there too.")
    ] = False,
) -> None:
    """Delete an endpoint: a 409 while subscriptions deliver there, unless cascade."""
    await state.endpoints.delete(tenant, endpoint_id, cascade)
