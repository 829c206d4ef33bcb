from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ...errors import StoreUnavailable
from ..common import wait_ready
from .state import MatcherState


def get_state(request: Request) -> MatcherState:
    state: MatcherState = request.app.state.matcher
    return state


async def get_ready_state(request: Request) -> MatcherState:
    state = get_state(request)
    await wait_ready(state.follower.ready, "loading its subscriptions from Redis")
    return state


State = Annotated[MatcherState, Depends(get_state)]
ReadyState = Annotated[MatcherState, Depends(get_ready_state)]

_bearer = HTTPBearer(
    auto_error=False, description="The cluster's internal token (routers read it from Redis)."
)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


async def require_router(state: ReadyState, credentials: Credentials) -> None:
    """Only routers call /internal: they show the token every service of the cluster reads
    from Redis (``{ns}:cluster:internal_token``)."""
    try:
        accepted = await state.accepts(credentials.credentials if credentials else None)
    except StoreUnavailable as exc:  # reading the token again, to see whether it was rotated
        raise HTTPException(503, str(exc)) from exc
    if not accepted:
        raise HTTPException(
            401,
            "the internal endpoints answer only routers of this cluster: send its internal "
            "token as a Bearer token",
            headers={"WWW-Authenticate": "Bearer"},
        )
