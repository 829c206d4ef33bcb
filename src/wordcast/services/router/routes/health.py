from __future__ import annotations

import os
from typing import Any

from fastapi import APIRouter, Request

from wordcast.errors import Unauthenticated
from wordcast.services.common import bearer_token, probes_router
from wordcast.services.router.deps import Admin, Credentials, ReadyState, State, get_state
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
        "subscribed_words": len(state.routing_table.held),
        "match_streams": state.match_streams.open,
        "event_position": state.follower.position,
    }


@router.get("/stats/matchers", dependencies=[Admin], responses=ERRORS)
async def matcher_stats(state: State) -> dict[str, Any]:
    """Each matcher's own /stats (subscriptions held, engine, deliveries pending, its URL and
    process), asked by this router at most once a second; one that does not answer is listed
    with the reason. Operators only: it needs the admin token."""
    return {"matchers": await state.matcher_client.stats(state.view.span)}


@router.get("/stats/history", dependencies=[Admin], responses=ERRORS)
async def history(state: State) -> dict[str, Any]:
    """The last 15 minutes' rates, a point every ``WORDCAST_ROUTER_HISTORY_EVERY_S``: this
    router's publications, the matchers' matches and deliveries per second, and their backlog
    (:mod:`wordcast.services.router.history`). Operators only."""
    return state.history.shown()


@router.get("/whoami", responses=ERRORS)
async def whoami(request: Request, state: ReadyState, credentials: Credentials) -> dict[str, str]:
    """Whose key the request carries: the admin's token, or a tenant's API key (401 for
    neither). The console asks it to know what to show."""
    token = bearer_token(request)
    try:
        state.tenants.check_admin(token)
    except Unauthenticated:
        return {"role": "tenant", "tenant": await state.tenants.authenticate(token)}
    return {"role": "admin"}
