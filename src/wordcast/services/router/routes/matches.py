"""The tenant's match stream: its stream-delivered subscriptions' matches as Server-Sent Events."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Request
from fastapi.responses import StreamingResponse

from wordcast.services.common import bearer_token
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
            "reconnect with Last-Event-ID), 'revoked' (the API key was revoked), and heartbeat "
            "comments. A consumer that takes nothing for WORDCAST_ROUTER_STREAM_DRAIN_TIMEOUT_S "
            "is dropped; it resumes with Last-Event-ID.",
        },
        410: {"description": "Last-Event-ID is older than what is kept; the detail says what."},
    },
)
async def stream_matches(
    request: Request, state: ReadyState, tenant: Tenant, last_event_id: LastEventId = None
) -> StreamingResponse:
    """Your matches as they are found, from subscriptions delivered to the stream."""
    return await state.match_streams.serve(tenant, bearer_token(request), last_event_id)
