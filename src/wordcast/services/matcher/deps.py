from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request

from .state import MatcherState


def get_state(request: Request) -> MatcherState:
    state: MatcherState = request.app.state.matcher
    return state


def get_ready_state(request: Request) -> MatcherState:
    state = get_state(request)
    if not state.ready:
        raise HTTPException(503, "matcher is still loading its subscriptions from Redis")
    return state


State = Annotated[MatcherState, Depends(get_state)]
ReadyState = Annotated[MatcherState, Depends(get_ready_state)]
