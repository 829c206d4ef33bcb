"""Dead letters: messages given up on after the last attempt, for their owner to read and replay."""

from __future__ import annotations

from typing import Annotated

import orjson
from fastapi import APIRouter, Path, Query

from wordcast.errors import InvalidInput
from wordcast.services.router.deps import ReadyState, Tenant, TenantRoute
from wordcast.services.router.routes.admin import admin_router
from wordcast.services.schemas import ERRORS, DeadLetterOut, DeadLetterPage
from wordcast.storage.dead_letters import DeadLetter, is_stream_id

router = APIRouter(
    prefix="/deadletters", tags=["dead letters"], responses=ERRORS, route_class=TenantRoute
)
admin = admin_router("/admin/deadletters")

StreamId = Annotated[str, Path(pattern=r"^\d{1,20}-\d{1,20}$")]
After = Annotated[str | None, Query(pattern=r"^\d{1,20}-\d{1,20}$")]
Limit = Annotated[int, Query(ge=1, le=1_000)]


def _out(letter: DeadLetter) -> DeadLetterOut:
    message = letter.message
    return DeadLetterOut(
        id=letter.id,
        subscription_ids=list(message.subscription_ids),
        webhook_id=message.webhook_id,
        callback_url=message.callback_url,
        reason=letter.reason,
        attempts=letter.attempts,
        failed_at=letter.failed_at,
        payload=orjson.loads(message.body),
    )


async def _page(state: ReadyState, tenant: str, after: str | None, limit: int) -> DeadLetterPage:
    if after is not None and not is_stream_id(after):
        raise InvalidInput(f"after={after!r} is not a dead letter id")
    letters = await state.store.dead_letters.list(tenant, after or "-", limit)
    next_after = letters[-1].id if len(letters) == limit else None
    return DeadLetterPage(dead_letters=[_out(d) for d in letters], next_after=next_after)


@router.get("", response_model=DeadLetterPage)
async def list_dead_letters(
    state: ReadyState, tenant: Tenant, after: After = None, limit: Limit = 100
) -> DeadLetterPage:
    """Your messages that were given up on, oldest first."""
    return await _page(state, tenant, after, limit)


@router.post("/{dead_id}/replay", status_code=202)
async def replay_dead_letter(
    dead_id: StreamId, state: ReadyState, tenant: Tenant
) -> dict[str, str]:
    """Deliver a dead letter again (same body, same webhook-id), from the start of its retries."""
    message = await state.subscribing.replay(tenant, dead_id)
    return {"replayed": dead_id, "webhook_id": message.webhook_id}


AnyTenant = Annotated[str, Query(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]


@admin.get("", response_model=DeadLetterPage)
async def list_any_dead_letters(
    state: ReadyState, tenant: AnyTenant, after: After = None, limit: Limit = 100
) -> DeadLetterPage:
    """Any tenant's dead letters (admin token)."""
    return await _page(state, tenant, after, limit)


@admin.post("/{dead_id}/replay", status_code=202, operation_id="replay_any_dead_letter")
async def replay_any_dead_letter(
    dead_id: StreamId, state: ReadyState, tenant: AnyTenant
) -> dict[str, str]:
    """Deliver any tenant's dead letter again (admin token), as the tenant itself may."""
    message = await state.subscribing.replay(tenant, dead_id)
    return {"replayed": dead_id, "webhook_id": message.webhook_id}
