from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query

from ....boolean import has_operators, parse_query
from ....errors import InvalidInput, NotFound, StoreUnavailable
from ....schemas import (
    ERRORS,
    AlternativeOut,
    SecretOut,
    SubscriptionIdsIn,
    SubscriptionIn,
    SubscriptionOut,
    SubscriptionPage,
    SubscriptionsDeleted,
    SubscriptionsIn,
    SubscriptionsOut,
)
from ....store import Subscription
from ...common import OrjsonRoute
from ..deps import ReadyState, Tenant

router = APIRouter(
    prefix="/subscriptions", tags=["subscriptions"], responses=ERRORS, route_class=OrjsonRoute
)

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
        alternatives=_alternatives(sub.query),
        callback_url=sub.callback_url,
        matcher=sub.matcher,
    )


def _alternatives(query: str) -> list[AlternativeOut] | None:
    if not has_operators(query):
        return None
    try:
        read = parse_query(query)
    except InvalidInput:  # stored as a plain query by a version that read it so
        return None
    if read.is_plain:
        return None
    return [AlternativeOut(terms=list(c.words), without=list(c.without)) for c in read.clauses]


@router.post("", status_code=201, response_model=SubscriptionOut)
async def create_subscription(
    body: SubscriptionIn, state: ReadyState, tenant: Tenant
) -> SubscriptionOut:
    """Register a subscription; 201 means it is durably stored and in effect."""
    try:
        if body.pattern is not None:
            sub = await state.subscribe_pattern(body.pattern, str(body.callback_url), tenant)
        else:
            assert body.query is not None  # the schema admits exactly one of the two
            sub = await state.subscribe(body.query, str(body.callback_url), tenant)
    except InvalidInput as exc:
        raise HTTPException(422, str(exc)) from exc
    except StoreUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc
    return _out(sub).model_copy(update={"secret": sub.secret})


@router.post("/batch", status_code=201, response_model=SubscriptionsOut)
async def create_subscriptions(
    body: SubscriptionsIn, state: ReadyState, tenant: Tenant
) -> SubscriptionsOut:
    """Register up to 1,000 subscriptions at once; 201 means all are stored and in effect, and
    a refusal (which names the first bad one by its index) means none was stored."""
    items = [
        ("pattern", item.pattern, str(item.callback_url))
        if item.pattern is not None
        else ("query", item.query or "", str(item.callback_url))
        for item in body.subscriptions
    ]
    try:
        subs = await state.subscribe_batch(items, tenant)
    except InvalidInput as exc:
        raise HTTPException(422, str(exc)) from exc
    except StoreUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc
    return SubscriptionsOut(
        subscriptions=[_out(sub).model_copy(update={"secret": sub.secret}) for sub in subs]
    )


@router.post("/batch/delete", response_model=SubscriptionsDeleted)
async def delete_subscriptions(
    body: SubscriptionIdsIn, state: ReadyState, tenant: Tenant
) -> SubscriptionsDeleted:
    """Delete up to 1,000 of your subscriptions at once; a 404 (naming ids that are not yours)
    means none was deleted."""
    try:
        deleted = await state.unsubscribe_batch(body.ids, tenant)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    except StoreUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc
    return SubscriptionsDeleted(deleted=deleted)


@router.get("", response_model=SubscriptionPage)
async def list_subscriptions(
    state: ReadyState,
    tenant: Tenant,
    cursor: Annotated[
        int, Query(ge=0, le=2**64 - 1, description="From the previous page; 0 to start.")
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=1_000)] = 100,
) -> SubscriptionPage:
    """Your subscriptions, a page at a time (about ``limit`` each; next_cursor 0 at the end)."""
    try:
        next_cursor, subs = await state.store.tenant_subscriptions(tenant, cursor, limit)
    except StoreUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc
    return SubscriptionPage(subscriptions=[_out(s) for s in subs], next_cursor=next_cursor)


@router.get("/{sub_id}", response_model=SubscriptionOut)
async def get_subscription(
    sub_id: SubscriptionId, state: ReadyState, tenant: Tenant
) -> SubscriptionOut:
    try:
        return _out(await state.owned(sub_id, tenant))
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    except StoreUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc


@router.delete("/{sub_id}", status_code=204)
async def delete_subscription(sub_id: SubscriptionId, state: ReadyState, tenant: Tenant) -> None:
    try:
        await state.unsubscribe(sub_id, tenant)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    except StoreUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc


@router.post("/{sub_id}/secret", response_model=SecretOut)
async def rotate_secret(sub_id: SubscriptionId, state: ReadyState, tenant: Tenant) -> SecretOut:
    """Replace the signing secret; deliveries carry both signatures during the grace period."""
    try:
        return SecretOut(secret=await state.rotate_secret(sub_id, tenant))
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    except StoreUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc
