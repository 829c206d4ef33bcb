"""Endpoints only routers call (with the cluster's internal token): match a routed batch, catch up
with subscription events."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Depends, Response

from wordcast.errors import Overloaded
from wordcast.services.matcher.deps import ReadyState, RouterRoute, require_router
from wordcast.services.matcher.index import RoutedPublication
from wordcast.services.matcher.messages import Batch, explained_matches
from wordcast.services.schemas import (
    ERRORS,
    BackfillRequest,
    MatchRequest,
    MatchResponse,
    SyncRequest,
)

router = APIRouter(
    prefix="/internal",
    tags=["internal"],
    responses=ERRORS,
    route_class=RouterRoute,
    dependencies=[Depends(require_router)],
)


@router.post("/match", response_model=MatchResponse)
async def match(batch: MatchRequest, state: ReadyState) -> MatchResponse:
    """Match a routed batch; 200 means its matches are recorded in the outbox (durable)."""
    dispatcher, outbox_max = state.dispatcher, state.settings.outbox_max
    refused = dispatcher.pressure.refusal(outbox_max)
    if refused is not None:
        raise Overloaded(refused)
    routed, drawn = _routed(batch)
    messages = state.match(
        routed,
        batch.version,
        drawn,
        publisher=batch.publisher,
        stream=batch.stream,
        accepted=batch.accepted,
    )
    size = sum(len(m.body) for m in messages)
    refused = dispatcher.pressure.refusal(outbox_max, size)
    if refused is not None:
        raise Overloaded(refused)
    dispatcher.pressure.recorded(size)
    await state.outbox.put(messages)
    state.counting.matched(messages, state.index.subscriptions)
    return MatchResponse(matches=sum(m.matches for m in messages))


@router.post("/dry-run")
async def dry_run(batch: MatchRequest, state: ReadyState) -> Response:
    """The matches of the publisher's own subscriptions in a routed batch, each with its
    ``matched``: ``{"matches": [[subscription id, position, matched], ...]}``. Nothing is
    recorded, delivered or counted."""
    routed, drawn = _routed(batch)
    index, publisher = state.index, batch.publisher
    pairs = index.pairs(routed, batch.version, drawn, publisher, batch.stream)
    found = explained_matches(
        pairs,
        Batch(routed, publisher, batch.stream),
        index.subscriptions,
        index.alternatives,
        publisher,
    )
    matches = [[sub_id, position, orjson.Fragment(matched)] for sub_id, position, matched in found]
    return Response(orjson.dumps({"matches": matches}), media_type="application/json")


def _routed(batch: MatchRequest) -> tuple[list[RoutedPublication], list[dict[str, int]] | None]:
    """The batch's (id, text, terms, has an anchor here) rows, and the hot-word copies drawn for
    each (None: none drawn)."""
    flagged = set(batch.patterns)
    routed: list[RoutedPublication] = [
        (pub_id, text, terms, k in flagged)
        for k, (pub_id, text, terms) in enumerate(
            zip(batch.ids, batch.texts, batch.terms, strict=True)
        )
    ]
    hot = batch.hot
    return routed, [hot.get(k, {}) for k in range(len(routed))] if hot else None


@router.post("/backfill", status_code=202)
async def backfill(request: BackfillRequest, state: ReadyState) -> None:
    """Backfill these records of a new subscription from the recent publications, in the
    background (:mod:`wordcast.services.matcher.backfill`)."""
    # The router sent this after the subscription took effect here: its records are held.
    await state.follower.catch_up(until=request.until_event)
    state.backfills.start(request.records, request.since, request.until)


@router.get("/backfills")
async def backfills(state: ReadyState) -> list[dict[str, Any]]:
    """Each backfill this matcher ran or runs: its subscription's records, window and progress."""
    return state.backfills.stats()


@router.post("/sync", status_code=204)
async def sync(request: SyncRequest, state: ReadyState) -> None:
    await state.follower.catch_up(until=request.until)
