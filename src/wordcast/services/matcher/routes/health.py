from __future__ import annotations

import os
from typing import Any

from fastapi import APIRouter, HTTPException

from ..deps import State

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(state: State) -> dict[str, str]:
    if not state.ready:
        raise HTTPException(503, "loading subscriptions")
    return {"status": "ready"}


@router.get("/stats")
async def stats(state: State) -> dict[str, Any]:
    return {
        "ordinal": state.ordinal,
        "pid": os.getpid(),
        "ready": state.ready,
        "engine": state.engine,
        "subscriptions": len(state.subscriptions),
        "index_nodes": getattr(state.index, "node_count", None),
        "publications": state.publications,
        "matches": state.matches,
        "deliveries_pending": state.dispatcher.pending,
        "delivered": state.dispatcher.delivered,
        "delivery_failures": state.dispatcher.failed,
        "event_position": state.follower.position,
    }
