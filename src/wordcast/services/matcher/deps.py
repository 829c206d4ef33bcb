from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from wordcast.errors import Unauthenticated
from wordcast.services.common import bearer_token, guarded_route, wait_ready
from wordcast.services.matcher.state import MatcherState


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


async def _check_router(request: Request) -> None:
    """Only routers call /internal: they show the token every service of the cluster reads
    from Redis (``{ns}:cluster:internal_token``)."""
    if getattr(request.state, "router_checked", False):
        return
    state = await get_ready_state(request)
    if not await state.accepts(bearer_token(request)):
        raise Unauthenticated(
            "the internal endpoints answer only routers of this cluster: send its internal "
            "token as a Bearer token"
        )
    request.state.router_checked = True


# Checks the token before the body is read (services.common.guarded_route).
RouterRoute = guarded_route(_check_router)


async def require_router(request: Request, credentials: Credentials) -> None:
    # ``credentials`` puts the Bearer scheme in the OpenAPI document; the guard already checked.
    await _check_router(request)
