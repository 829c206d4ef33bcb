"""The tenant's match stream: its stream-delivered subscriptions' matches as Server-Sent Events."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header
from fastapi.responses import StreamingResponse

from wordcast.services.router.deps import ReadyState, Tenant, TenantRoute
from wordcast.services.schemas import ERRORS

router = APIRouter(prefix="/matches", tags=["matches"], responses=ERRORS, route_class=TenantRoute)

LastEventId = Annotated[
    str | None,
    Header(
        alias="Last-Event-ID",
        max_length=45,
        description="Resume after this event's id (what a browser's EventSource sends by "
        "itself); 0 for the oldest match kept; none to follow from now.",
    ),
]


@router.get(
    "/stream",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {"text/event-stream": {}},
            "description": "Events 'matches' (id: the position; data: the JSON a webhook "
            "receives), 'gone' (fell behind what is kept), 'unavailable' (Redis failed: "
            "reconnect with Last-Event-ID), and heartbeat comments.",
        },
        410: {"description": "Last-Event-ID is older than what is kept; the detail says what."},
    },
)
async def stream_matches(
    state: ReadyState, tenant: Tenant, last_event_id: LastEventId = None
) -> StreamingResponse:
    """Your matches as they are found, from subscriptions delivered to the stream."""
    after = await state.match_streams.start(tenant, last_event_id)
    return StreamingResponse(
        state.match_streams.events(tenant, after),
        media_type="text/event-stream",
        headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
    )
