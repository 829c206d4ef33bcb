from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ...errors import StoreUnavailable, Unauthenticated
from ..common import wait_ready
from .state import RouterState

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


def _unauthorized(exc: Unauthenticated) -> HTTPException:
    return HTTPException(401, str(exc), headers={"WWW-Authenticate": "Bearer"})


async def get_tenant(state: ReadyState, credentials: Credentials) -> str:
    try:
        return await state.tenants.authenticate(credentials.credentials if credentials else None)
    except Unauthenticated as exc:
        raise _unauthorized(exc) from exc
    except StoreUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc


def require_admin(state: State, credentials: Credentials) -> None:
    try:
        state.tenants.check_admin(credentials.credentials if credentials else None)
    except Unauthenticated as exc:
        raise _unauthorized(exc) from exc


Tenant = Annotated[str, Depends(get_tenant)]
Admin = Depends(require_admin)
