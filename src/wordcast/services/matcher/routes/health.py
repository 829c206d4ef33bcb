from __future__ import annotations

import os
from typing import Any

from fastapi import APIRouter

from wordcast.errors import StoreUnavailable
from wordcast.services.common import probes_router
from wordcast.services.matcher.deps import State, get_state

router = APIRouter(tags=["operations"])
probes = probes_router(lambda request: get_state(request).ready, "loading subscriptions")


@router.get("/stats")
async def stats(state: State) -> dict[str, Any]:
    return {
        "ordinal": state.ordinal,
        "pid": os.getpid(),
        "ready": state.ready,
        "engine": state.engine,
        "pattern_engine": state.settings.pattern_engine,
        "subscriptions": len(state.index),
        "pattern_subscriptions": len(state.index.patterns),
        "index_nodes": getattr(state.index.terms, "node_count", None),
        "publications": state.publications,
        "matches": state.matches,
        "deliveries_pending": await _outbox_depth(state),
        "deliveries_in_flight": state.dispatcher.in_flight,
        "deliveries_waiting": state.dispatcher.waiting,
        "redis_memory_used": state.dispatcher.backlog.redis_used,
        "redis_memory_limit": state.dispatcher.backlog.redis_limit,
        "delivered": state.dispatcher.delivered,
        "delivery_failures": state.dispatcher.failed,
        "streamed": state.dispatcher.match_streams.streamed,
        "event_position": state.follower.position,
        "loaded_from": state.loaded_from,
        "checkpoint_position": state.checkpoints.written if state.checkpoints else None,
        # Counts only: the list names subscriptions, so it answers routers alone
        # (GET /internal/backfills).
        "backfills": state.backfills.summary(),
    }


async def _outbox_depth(state: Any) -> int | None:
    try:
        depth: int = await state.outbox.depth()
    except StoreUnavailable:
        return None
    return depth
