from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path

from ....errors import InvalidInput, NotFound, StoreUnavailable
from ....schemas import SubscriptionIn, SubscriptionOut
from ....store import Subscription
from ..deps import ReadyState

router = APIRouter(prefix="/subscriptions", tags=["subscriptions"])

SubscriptionId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]


def _out(sub: Subscription) -> SubscriptionOut:
    if sub.is_pattern:
        return SubscriptionOut(
            id=sub.id,
            kind="pattern",
            pattern=sub.pattern,
            anchor=sub.anchor,
            terms=[],
            callback_url=sub.callback_url,
            matcher=sub.matcher,
        )
    return SubscriptionOut(
        id=sub.id,
        kind="keywords",
        query=sub.query,
        terms=list(sub.terms),
        callback_url=sub.callback_url,
        matcher=sub.matcher,
    )


@router.post("", status_code=201, response_model=SubscriptionOut)
async def create_subscription(body: SubscriptionIn, state: ReadyState) -> SubscriptionOut:
    """Register a subscription; 201 means it is durably stored and in effect."""
    try:
        if body.pattern is not None:
            sub = await state.subscribe_pattern(body.pattern, str(body.callback_url))
        else:
            assert body.query is not None  # the schema admits exactly one of the two
            sub = await state.subscribe(body.query, str(body.callback_url))
    except InvalidInput as exc:
        raise HTTPException(422, str(exc)) from exc
    except StoreUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc
    return _out(sub)


@router.get("/{sub_id}", response_model=SubscriptionOut)
async def get_subscription(sub_id: SubscriptionId, state: ReadyState) -> SubscriptionOut:
    try:
        return _out(await state.store.get(sub_id))
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    except StoreUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc


@router.delete("/{sub_id}", status_code=204)
async def delete_subscription(sub_id: SubscriptionId, state: ReadyState) -> None:
    try:
        await state.unsubscribe(sub_id)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    except StoreUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc
