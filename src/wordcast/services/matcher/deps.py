from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from .state import MatcherState

READY_WAIT_S = 5.0


def get_state(request: Request) -> MatcherState:
    state: MatcherState = request.app.state.matcher
    return state


async def get_ready_state(request: Request) -> MatcherState:
    """The state once loaded; a request that arrives while it loads waits a little first."""
    state = get_state(request)
    if not state.ready:
        try:
            await asyncio.wait_for(state.follower.ready.wait(), READY_WAIT_S)
        except TimeoutError:
            raise HTTPException(
                503, "matcher is still loading its subscriptions from Redis"
            ) from None
    return state


State = Annotated[MatcherState, Depends(get_state)]
ReadyState = Annotated[MatcherState, Depends(get_ready_state)]
