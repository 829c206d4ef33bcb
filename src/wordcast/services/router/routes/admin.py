"""Admin operations: they need the admin token, not a tenant's API key."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from wordcast.services.admin_schemas import (
    TENANT_PATTERN,
    ApiKeyOut,
    GrantIn,
    GrantOut,
    StreamIn,
    StreamOut,
    StreamsOut,
    TenantIn,
    TenantKey,
    TenantKeys,
    TenantOut,
    TenantsOut,
)
from wordcast.services.router.deps import Admin, AdminRoute, ReadyState
from wordcast.services.schemas import ERRORS, STREAM_PATTERN
from wordcast.storage.tenants import API_KEY_ID_CHARS


def admin_router(prefix: str) -> APIRouter:
    """A router every route of which needs the admin token: made here, so no admin route can be
    added without that check."""
    return APIRouter(
        prefix=prefix,
        tags=["admin"],
        dependencies=[Admin],
        responses=ERRORS,
        route_class=AdminRoute,
    )


router = admin_router("/admin")


TenantName = Annotated[str, Path(min_length=1, max_length=64, pattern=TENANT_PATTERN)]
KeyId = Annotated[str, Path(pattern=rf"^[0-9a-f]{{{API_KEY_ID_CHARS}}}$")]


def _links(**targets: dict[str, str]) -> dict[str, Any]:
    """OpenAPI links: operation id -> its parameters, taken from the answer."""
    return {
        "links": {
            operation: {"operationId": operation, "parameters": parameters}
            for operation, parameters in targets.items()
        }
    }


_TENANT = {"tenant": "$response.body#/tenant"}
_STREAM = {"stream": "$response.body#/stream"}


@router.post(
    "/tenants",
    status_code=201,
    response_model=TenantKey,
    responses={
        201: _links(
            list_tenant_keys=_TENANT,
            revoke_tenant_key=_TENANT | {"key_id": "$response.body#/key_id"},
        )
    },
)
async def create_tenant_key(body: TenantIn, state: ReadyState) -> TenantKey:
    """A new API key for a tenant (created if new: ``new_tenant`` says which). The key is shown
    only in this answer."""
    new_tenant = not await state.store.tenants.has_keys(body.tenant)
    api_key, key_id = await state.tenants.create_api_key(body.tenant)
    return TenantKey(tenant=body.tenant, api_key=api_key, key_id=key_id, new_tenant=new_tenant)


@router.get("/tenants", response_model=TenantsOut, operation_id="list_tenants")
async def list_tenants(state: ReadyState) -> TenantsOut:
    """Every tenant that has an API key or holds a subscription (the development key's, which
    is not stored, among them), by name, with its keys and subscriptions counted."""
    keyed = await state.store.tenants.tenants()
    holding = await state.store.subscriptions.tenants_holding()
    named = {t for t, _ in keyed}
    found = sorted([*keyed, *((t, 0) for t in holding - named)])
    held = await asyncio.gather(*(state.store.subscriptions.tenant_total(t) for t, _ in found))
    return TenantsOut(
        tenants=[
            TenantOut(tenant=t, keys=k, subscriptions=s)
            for (t, k), s in zip(found, held, strict=True)
        ]
    )


@router.get("/tenants/{tenant}/keys", response_model=TenantKeys, operation_id="list_tenant_keys")
async def list_tenant_keys(tenant: TenantName, state: ReadyState) -> TenantKeys:
    """A tenant's API keys, by id (the keys themselves are not kept)."""
    keys = await state.store.tenants.api_keys(tenant)
    ordered = sorted(keys.items(), key=lambda item: (item[1], item[0]))
    return TenantKeys(tenant=tenant, keys=[ApiKeyOut(key_id=k, created=t) for k, t in ordered])


@router.delete("/tenants/{tenant}/keys/{key_id}", status_code=204, operation_id="revoke_tenant_key")
async def revoke_tenant_key(tenant: TenantName, key_id: KeyId, state: ReadyState) -> None:
    """Revoke an API key: refused at once by this router, by the others within about a second."""
    await state.tenants.revoke_api_key(tenant, key_id)


StreamPath = Annotated[str, Path(min_length=1, max_length=64, pattern=STREAM_PATTERN)]


def _stream_out(stream: str, grants: dict[str, tuple[bool, bool]]) -> StreamOut:
    return StreamOut(
        stream=stream,
        grants=[
            GrantOut(tenant=tenant, publish=publish, subscribe=subscribe)
            for tenant, (publish, subscribe) in sorted(grants.items())
        ],
    )


@router.post(
    "/streams",
    status_code=201,
    response_model=StreamOut,
    responses={201: _links(show_stream=_STREAM, set_grant=_STREAM, delete_stream=_STREAM)},
)
async def create_stream(body: StreamIn, state: ReadyState) -> StreamOut:
    """Make a shared stream, with no grants yet (409 if the name is taken)."""
    await state.shared_streams.create(body.stream)
    return _stream_out(body.stream, {})


@router.get("/streams", response_model=StreamsOut)
async def list_streams(state: ReadyState) -> StreamsOut:
    """Every shared stream and who may publish to it and subscribe to it."""
    found = await state.shared_streams.all()
    return StreamsOut(streams=[_stream_out(name, grants) for name, grants in found.items()])


@router.get("/streams/{stream}", response_model=StreamOut, operation_id="show_stream")
async def show_stream(stream: StreamPath, state: ReadyState) -> StreamOut:
    return _stream_out(stream, await state.shared_streams.grants(stream))


@router.put(
    "/streams/{stream}/grants/{tenant}",
    response_model=StreamOut,
    operation_id="set_grant",
    responses={200: _links(revoke_grant=_STREAM, show_stream=_STREAM)},
)
async def set_grant(
    stream: StreamPath, tenant: TenantName, body: GrantIn, state: ReadyState
) -> StreamOut:
    """Give a tenant exactly these rights on the stream. Taking ``subscribe`` away deletes the
    tenant's subscriptions to the stream; routers take a change within about a second."""
    await state.shared_streams.grant(stream, tenant, body.publish, body.subscribe)
    return _stream_out(stream, await state.shared_streams.grants(stream))


@router.delete("/streams/{stream}/grants/{tenant}", status_code=204, operation_id="revoke_grant")
async def revoke_grant(stream: StreamPath, tenant: TenantName, state: ReadyState) -> None:
    """Take every right on the stream away from a tenant (its subscriptions to it are deleted)."""
    await state.shared_streams.grant(stream, tenant, publish=False, subscribe=False)


@router.delete("/streams/{stream}", status_code=204, operation_id="delete_stream")
async def delete_stream(stream: StreamPath, state: ReadyState) -> None:
    """Delete a shared stream: its grants, then every subscription to it."""
    await state.shared_streams.delete(stream)


@router.get("/routing", operation_id="routing_insight")
async def routing_insight(
    state: ReadyState,
    samples: Annotated[int, Query(ge=1, le=50_000)] = 5_000,
    words: Annotated[int, Query(ge=1, le=200)] = 20,
) -> dict[str, Any]:
    """The load per matcher that the latest ``samples`` logged publications put on each matcher
    under hash routing and under the latest learned mapping (with spread and imbalance), and the
    hottest subscribed words: where each is routed, and which matchers hold it."""
    return await state.routing_insight(samples, words)


@router.get("/learning", operation_id="learning_run")
async def learning_run(state: ReadyState) -> dict[str, Any]:
    """The last learning run started on this router: its state, the end of its output, and
    routing measured before and after it (as /admin/routing)."""
    return state.learning.figures()


@router.post("/learning", status_code=202, operation_id="start_learning_run")
async def start_learning_run(state: ReadyState) -> dict[str, Any]:
    """Learn a new mapping from the logged traffic (wordcast learn, a Spark job) on this
    router; 409 while one runs, 503 where this router cannot run it."""
    await state.learning.start()
    return state.learning.figures()
