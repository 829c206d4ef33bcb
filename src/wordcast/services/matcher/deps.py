from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

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
