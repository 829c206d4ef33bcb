from __future__ import annotations

import os
from typing import Any

from fastapi import APIRouter

from wordcast.services.common import probes_router
from wordcast.services.router.deps import Admin, State, get_state
from wordcast.services.schemas import ERRORS

router = APIRouter(tags=["operations"])
probes = probes_router(
    lambda request: get_state(request).ready,
    lambda request: (
        "loading subscribed words"
        if not get_state(request).follower.ready.is_set()
        else "cannot report its mapping version to Redis"
    ),
)


@router.get("/stats")
async def stats(state: State) -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "ready": state.ready,
        "matchers": state.view.active.matchers,
        "matchers_in_use": state.view.span,
        "matchers_wanted": state.versions.scale.wanted,
        "awaiting_matcher": state.versions.scale.awaited,
        "awaiting_matcher_s": round(state.versions.scale.awaited_for, 1),
        "mapping": {
            **state.publishing.stats.figures(),
            "latest": state.versions.latest,
            "window": list(state.view.window),
            "active": state.view.active.version,
        },
        "shedding": state.shedder.figures(),
        "subscribed_words": len(state.replica.held),
        "event_position": state.follower.position,
    }


@router.get("/stats/matchers", dependencies=[Admin], responses=ERRORS)
async def matcher_stats(state: State) -> dict[str, Any]:
    """Each matcher's own /stats (subscriptions held, engine, deliveries pending, its URL and
    process), asked by this router at most once a second; one that does not answer is listed
    with the reason. Operators only: it needs the admin token."""
    return {"matchers": await state.links.stats(state.view.span)}
