from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request

from .state import RouterState


def get_state(request: Request) -> RouterState:
    state: RouterState = request.app.state.router
    return state


def get_ready_state(request: Request) -> RouterState:
    state = get_state(request)
    if not state.ready:
        raise HTTPException(503, "router is still loading the subscribed words from Redis")
    return state


State = Annotated[RouterState, Depends(get_state)]
ReadyState = Annotated[RouterState, Depends(get_ready_state)]
