from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ...errors import StoreUnavailable, Unauthenticated
from .state import RouterState

_bearer = HTTPBearer(auto_error=False, description="The tenant's API key (or the admin token).")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


READY_WAIT_S = 5.0


def get_state(request: Request) -> RouterState:
    state: RouterState = request.app.state.router
    return state


async def get_ready_state(request: Request) -> RouterState:
    """The state once loaded; a request that arrives while it loads waits a little first."""
    state = get_state(request)
    if not state.ready:
        try:
            await asyncio.wait_for(state.follower.ready.wait(), READY_WAIT_S)
        except TimeoutError:
            raise HTTPException(
                503, "router is still loading the subscribed words from Redis"
            ) from None
    return state


State = Annotated[RouterState, Depends(get_state)]
ReadyState = Annotated[RouterState, Depends(get_ready_state)]


def _unauthorized(exc: Unauthenticated) -> HTTPException:
    return HTTPException(401, str(exc), headers={"WWW-Authenticate": "Bearer"})


async def get_tenant(state: ReadyState, credentials: Credentials) -> str:
    try:
        return await state.authenticate(credentials.credentials if credentials else None)
    except Unauthenticated as exc:
        raise _unauthorized(exc) from exc
    except StoreUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc


def require_admin(state: State, credentials: Credentials) -> None:
    try:
        state.check_admin(credentials.credentials if credentials else None)
    except Unauthenticated as exc:
        raise _unauthorized(exc) from exc


Tenant = Annotated[str, Depends(get_tenant)]
Admin = Depends(require_admin)
