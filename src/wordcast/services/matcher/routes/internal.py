"""Endpoints only routers call (with the cluster's internal token): match a routed batch, catch up
with subscription events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from fastapi import APIRouter, Depends, Response

from wordcast.errors import Overloaded
from wordcast.services.matcher.deps import ReadyState, RouterRoute, require_router
from wordcast.services.matcher.explanations import explained_matches
from wordcast.services.matcher.index import Batch
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
    """Match a routed batch; 200 means its matches are recorded in the outbox (durable).

    A batch is matched and recorded a slice at a time (:func:`_slices`): the messages of a
    large batch of long texts, each text in a message per endpoint, would otherwise all be
    held at once. A batch retried after a failure part-way is recorded again whole, under the
    same webhook-ids (the slices and the messages are the same each time)."""
    dispatcher, outbox_max = state.dispatcher, state.settings.outbox_max
    refused = dispatcher.pressure.refusal(outbox_max)
    if refused is not None:
        raise Overloaded(refused)
    routed = _routed(batch)
    matches = 0
    for start, end in _slices(routed.texts):
        messages = state.match(routed.slice(start, end) if end - start < len(routed) else routed)
        size = sum(len(m.body) for m in messages)
        refused = dispatcher.pressure.refusal(outbox_max, size)
        if refused is not None and not matches:  # nothing recorded yet: refused whole
            raise Overloaded(refused)
        dispatcher.pressure.recorded(size)
        await state.outbox.put(messages)
        state.counting.matched(messages)
        matches += sum(m.matches for m in messages)
    return MatchResponse(matches=matches)


SLICE_CHARS = 256 * 1024  # the text a slice of a routed batch holds at most (one text may pass)


def _slices(texts: Sequence[str]) -> list[tuple[int, int]]:
    """The (start, end) of consecutive slices of a batch whose ``texts`` hold at most
    ``SLICE_CHARS`` characters each (a longer text is a slice of its own)."""
    slices, start, held = [], 0, 0
    for k, text in enumerate(texts):
        size = len(text)
        if held and held + size > SLICE_CHARS:
            slices.append((start, k))
            start, held = k, 0
        held += size
    slices.append((start, len(texts)))
    return slices


@router.post("/dry-run")
async def dry_run(batch: MatchRequest, state: ReadyState) -> Response:
    """The matches of the publisher's own subscriptions in a routed batch, each with its
    ``matched`` as JSON text (the router passes it on unread): ``{"matches": [[subscription id,
    position, matched], ...], "complete": true}``; past ``answer_max_bytes`` no matches and
    ``"complete": false``. Nothing is recorded, delivered or counted."""
    routed = _routed(batch)
    index, publisher = state.index, batch.publisher
    found, complete = explained_matches(
        index.pairs(routed),
        routed,
        index.subscriptions,
        index.alternatives,
        publisher,
        batch.answer_max_bytes,
    )
    matches = [[sub_id, position, matched.decode()] for sub_id, position, matched in found]
    answer = {"matches": matches, "complete": complete}
    return Response(orjson.dumps(answer), media_type="application/json")


def _routed(batch: MatchRequest) -> Batch:
    """The request as the matcher's batch: its columns as they were decoded."""
    return Batch(
        batch.ids,
        batch.texts,
        batch.terms,
        batch.publisher,
        batch.stream,
        batch.version,
        languages=batch.languages,
        flagged=frozenset(batch.patterns),
        drawn=batch.drawn,
        accepted=batch.accepted,
    )


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
