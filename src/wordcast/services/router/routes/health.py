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
        raise HTTPException(503, "loading subscribed words")
    return {"status": "ready"}


@router.get("/stats")
async def stats(state: State) -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "ready": state.ready,
        "matchers": len(state.matcher_urls),
        "mapping": "hash",
        "subscribed_words": len(state.subscribed),
        "event_position": state.follower.position,
    }
