"""Endpoints only routers call: match a routed batch, catch up with subscription events."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from ....errors import StoreUnavailable
from ....schemas import MatchRequest, MatchResponse, SyncRequest
from ..deps import ReadyState

router = APIRouter(prefix="/internal", tags=["internal"])


@router.post("/match", response_model=MatchResponse)
async def match(batch: MatchRequest, state: ReadyState) -> MatchResponse:
    found = state.match([(p.id, p.text, p.terms, p.patterns) for p in batch.publications])
    await state.dispatcher.put_many(found)
    return MatchResponse(matches=len(found))


@router.post("/sync", status_code=204)
async def sync(request: SyncRequest, state: ReadyState) -> None:
    try:
        await state.follower.catch_up(until=request.until)
    except StoreUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc
