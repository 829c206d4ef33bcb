"""What the router's routes depend on: its state, and who is asking (checked before the body)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from wordcast.services.common import bearer_token, guarded_route, wait_ready
from wordcast.services.router.state import RouterState

_bearer = HTTPBearer(auto_error=False, description="The tenant's API key (or the admin token).")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def get_state(request: Request) -> RouterState:
    state: RouterState = request.app.state.router
    return state


async def get_ready_state(request: Request) -> RouterState:
    state = get_state(request)
    await wait_ready(state.follower.ready, "loading the subscribed words from Redis")
    return state


State = Annotated[RouterState, Depends(get_state)]
ReadyState = Annotated[RouterState, Depends(get_ready_state)]


async def _authenticate(request: Request) -> str:
    """The tenant of the request's API key (Unauthenticated if none), remembered on the request."""
    tenant: str | None = getattr(request.state, "tenant", None)
    if tenant is None:
        state = await get_ready_state(request)
        tenant = await state.tenants.authenticate(bearer_token(request))
        request.state.tenant = tenant
    return tenant


async def _check_admin(request: Request) -> None:
    get_state(request).tenants.check_admin(bearer_token(request))


# Route classes that authenticate before the body is read (services.common.guarded_route).
TenantRoute = guarded_route(_authenticate)
AdminRoute = guarded_route(_check_admin)


async def get_tenant(request: Request, credentials: Credentials) -> str:
    # ``credentials`` puts the Bearer scheme in the OpenAPI document; the guard already read it.
    return await _authenticate(request)


async def require_admin(request: Request, credentials: Credentials) -> None:
    await _check_admin(request)


Tenant = Annotated[str, Depends(get_tenant)]
Admin = Depends(require_admin)
