from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Path, Query, Response
from fastapi.responses import JSONResponse

from wordcast.errors import InvalidInput, NotFound
from wordcast.query.boolean import BooleanQuery, parse_query
from wordcast.query.misreadings import earlier_readings, misreadings
from wordcast.services.router.batches import BatchItem
from wordcast.services.router.deps import ReadyState, Tenant, TenantRoute
from wordcast.services.schemas import (
    ERRORS,
    AlternativeOut,
    CountersOut,
    Delivery,
    SecretOut,
    SubscriptionIdsIn,
    SubscriptionIn,
    SubscriptionOut,
    SubscriptionPage,
    SubscriptionPreview,
    SubscriptionsDeleted,
    SubscriptionsIn,
    SubscriptionsOut,
)
from wordcast.storage.counters import Tally
from wordcast.storage.endpoints import Endpoint
from wordcast.storage.records import Subscription, delivery_of

router = APIRouter(
    prefix="/subscriptions", tags=["subscriptions"], responses=ERRORS, route_class=TenantRoute
)


def _links(id_from: str) -> dict[str, Any]:
    """OpenAPI links from an answer naming a subscription to what can be done with it (they
    let Schemathesis chain calls, and tell readers of the docs where an id goes next)."""
    by_id = {"sub_id": f"$response.body#{id_from}"}
    return {
        "links": {
            name: {"operationId": operation, "parameters": by_id}
            for name, operation in (
                ("GetSubscription", "get_subscription"),
                ("RotateSecret", "rotate_secret"),
                ("DeleteSubscription", "delete_subscription"),
            )
        }
    }


SubscriptionId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]


def _out(sub: Subscription, endpoint: Endpoint | None = None) -> SubscriptionOut:
    """How the API shows a subscription; in a creation answer, with its webhook ``endpoint``
    (whose secret signs its messages).

    Built without validation: every field comes from a stored, checked subscription, and a
    batch answers a thousand (validating them again was a tenth of registering them)."""
    return SubscriptionOut.model_construct(**_shown(sub, endpoint))


# A SubscriptionOut as JSON values, every field in its place with its default: a batch's answer
# is written from these with orjson, byte for byte as the model would be (test_api checks),
# without a model and its serializer for each of a thousand (a tenth of the router's work).
_DEFAULTS: dict[str, Any] = {
    name: None if field.is_required() else field.default
    for name, field in SubscriptionOut.model_fields.items()
}


def _as_json(sub: Subscription, endpoint: Endpoint | None) -> dict[str, Any]:
    shown = _DEFAULTS | _shown(sub, endpoint)
    if shown["alternatives"] is not None:
        shown["alternatives"] = [a.model_dump(mode="json") for a in shown["alternatives"]]
    return shown


def _shown(sub: Subscription, endpoint: Endpoint | None) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "id": sub.id,
        "callback_url": sub.webhook_url or None,
        "endpoint_id": (endpoint.id if endpoint else sub.endpoint_id) or None,
        "delivery": _delivery(sub),
        "stream": sub.stream or None,
        "matcher": sub.matcher,
        "tag": sub.tag or None,
    }
    if endpoint is not None:
        shown["secret"] = endpoint.secret
    if sub.is_pattern:
        shown |= {"kind": "pattern", "pattern": sub.pattern, "anchor": sub.anchor, "terms": []}
        shown["warnings"] = shown["earlier_readings"] = []
    else:
        shown |= {"kind": "keywords", "query": sub.query, "terms": list(sub.terms)}
        read = _read(sub.query)  # once, for its alternatives and its earlier readings
        shown["alternatives"] = _alternatives(read)
        shown["warnings"] = misreadings(sub.query)
        shown["earlier_readings"] = earlier_readings(sub.query, sub.terms, read)
    return shown


Strict = Annotated[
    bool,
    Query(
        description="Refuse (422, storing nothing) a query that X's rules or Lucene's syntax "
        "read otherwise, instead of storing it as read with `warnings`."
    ),
]


def _refuse_misread(queries: list[str | None], batch: bool = False) -> None:
    """With ``strict``: a 422 naming the first query read otherwise (by its index in a
    ``batch``), and how."""
    for n, query in enumerate(queries):
        found = misreadings(query) if query is not None else []
        if found:
            where = f"subscription {n}: " if batch else ""
            raise InvalidInput(
                f"{where}query {query!r} is read otherwise than X's rules or Lucene's syntax "
                f"would read it (strict): {'; '.join(found)}"
            )


def _delivery(sub: Subscription) -> list[Delivery]:
    webhook: list[Delivery] = ["webhook"] if sub.webhook_url else []
    return [*webhook, "stream"] if sub.to_stream else webhook


def _read(query: str) -> BooleanQuery | InvalidInput:
    """The query as it reads now, or why it does not (stored by a version that read it)."""
    try:
        return parse_query(query)
    except InvalidInput as exc:
        return exc


def _alternatives(read: BooleanQuery | InvalidInput) -> list[AlternativeOut] | None:
    if isinstance(read, InvalidInput) or read.is_plain:
        return None
    return [
        AlternativeOut(
            clause=str(c),
            terms=list(c.words),
            without=[*c.without, *map(str, c.not_conditions)],
            spans=[str(span) for span in c.spans] + [f"NOT {span}" for span in c.not_spans],
            filters=[*c.filters, *map(str, c.conditions)],
        )
        for c in read.clauses
    ]


@router.post(
    "",
    status_code=201,
    response_model=SubscriptionOut,
    responses={
        201: _links("/id"),
        200: {"model": SubscriptionPreview, "description": "A dry run's preview."},
    },
)
async def create_subscription(
    body: SubscriptionIn,
    state: ReadyState,
    tenant: Tenant,
    dry_run: Annotated[
        bool,
        Query(
            description="Check the subscription and answer (200) how it would be read and the "
            "matchers it would be placed on now, storing nothing."
        ),
    ] = False,
    strict: Strict = False,
) -> SubscriptionOut | Response:
    """Register a subscription; 201 means it is durably stored and in effect (and its
    backfill, if it asked for one, started). Its answer's ``warnings`` name each piece of the
    query read otherwise than X's rules or Lucene's syntax would (``strict``: refused)."""
    if strict:
        _refuse_misread([body.query])
    minutes = body.backfill_minutes
    address = await _address(body, state, tenant)
    if minutes is not None:
        state.backfill_starter.check(minutes)
    if dry_run:
        preview = await _preview(body, state, tenant, address)
        return JSONResponse(preview.model_dump(mode="json"))
    await state.endpoints.check_room(tenant, [address])
    async with state.endpoints.urls_locked(tenant, [address]):
        sub = await _subscribe(body, state, tenant, address)
        [sub] = await state.endpoints.answered(tenant, [sub])
    update: dict[str, object] = {
        "secret": sub.secret or None,
        "endpoint_id": sub.endpoint_id or None,
    }
    if minutes is not None:
        alternatives = 1 if sub.pattern else len(parse_query(sub.query).clauses)
        update["backfill"] = await state.backfill_starter.start(sub, alternatives, minutes)
    return _out(sub).model_copy(update=update)


async def _subscribe(
    body: SubscriptionIn, state: ReadyState, tenant: Tenant, address: str
) -> Subscription:
    stream = body.stream or ""
    if body.key is not None:  # the batch path finds what an earlier request stored
        kind, text = (
            ("pattern", body.pattern) if body.pattern is not None else ("query", body.query)
        )
        item = BatchItem(kind, text or "", address, stream, body.key, body.tag or "")
        return (await state.subscribing.subscribe_batch([item], tenant))[0]
    if body.pattern is not None:
        return await state.subscribing.subscribe_pattern(
            body.pattern, address, tenant, stream, body.tag or ""
        )
    assert body.query is not None  # the schema admits exactly one of the two
    return await state.subscribing.subscribe(body.query, address, tenant, stream, body.tag or "")


@router.post(
    "/batch",
    status_code=201,
    response_model=SubscriptionsOut,
    responses={201: _links("/subscriptions/0/id")},
)
async def create_subscriptions(
    body: SubscriptionsIn, state: ReadyState, tenant: Tenant, strict: Strict = False
) -> Response:
    """Register up to 1,000 subscriptions at once; 201 means all are stored and in effect, and
    a refusal (which names the first bad one by its index) means none was stored. Each one's
    ``warnings`` name the pieces of its query read otherwise (``strict``: refused)."""
    if strict:
        _refuse_misread([item.query for item in body.subscriptions], batch=True)
    for n, item in enumerate(body.subscriptions):
        if item.backfill_minutes is not None:
            raise InvalidInput(
                f"subscriptions[{n}]: backfill_minutes is for one subscription at a time "
                "(POST /subscriptions)"
            )
    items = []
    for n, item in enumerate(body.subscriptions):
        try:
            address = await _address(item, state, tenant)
        except NotFound as exc:
            raise NotFound(f"subscriptions[{n}]: {exc}") from exc
        items.append(
            BatchItem(
                "pattern" if item.pattern is not None else "query",
                item.pattern if item.pattern is not None else item.query or "",
                address,
                item.stream or "",
                item.key,
                item.tag or "",
            )
        )
    addresses = {item.callback_url for item in items}
    await state.endpoints.check_room(tenant, addresses)
    async with state.endpoints.urls_locked(tenant, addresses):
        subs = await state.subscribing.subscribe_batch(items, tenant)
        endpoints = await state.endpoints.for_addresses(tenant, {s.callback_url for s in subs})
    shown = [_as_json(sub, endpoints.get(sub.webhook_url)) for sub in subs]
    return Response(orjson.dumps({"subscriptions": shown}), 201, media_type="application/json")


@router.post("/batch/delete", response_model=SubscriptionsDeleted)
async def delete_subscriptions(
    body: SubscriptionIdsIn, state: ReadyState, tenant: Tenant
) -> SubscriptionsDeleted:
    """Delete up to 1,000 of your subscriptions at once; a 404 (naming ids that are not yours)
    means none was deleted."""
    deleted = await state.subscribing.unsubscribe_batch(body.ids, tenant)
    return SubscriptionsDeleted(deleted=deleted)


@router.get("", response_model=SubscriptionPage)
async def list_subscriptions(
    state: ReadyState,
    tenant: Tenant,
    cursor: Annotated[
        int, Query(ge=0, le=2**64 - 1, description="From the previous page; 0 to start.")
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=1_000)] = 100,
    q: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=200,
            description="Only those whose query or pattern contains this (any case); a page "
            "may then hold fewer, even none, before the end.",
        ),
    ] = None,
    tag: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=64,
            description="Only those with this tag (exactly); a page may then hold fewer, even "
            "none, before the end.",
        ),
    ] = None,
) -> SubscriptionPage:
    """Your subscriptions, a page at a time (about ``limit`` each; next_cursor 0 at the end)."""
    next_cursor, subs = await state.store.subscriptions.tenant_subscriptions(tenant, cursor, limit)
    if q is not None:
        wanted = q.casefold()
        subs = [s for s in subs if wanted in (s.pattern or s.query).casefold()]
    if tag is not None:
        subs = [s for s in subs if s.tag == tag]
    subs = await state.endpoints.shown(tenant, subs)
    counted = await state.store.counters.read({s.id: s.created for s in subs})
    shown = [_out(s).model_copy(update={"counters": _counters(counted[s.id])}) for s in subs]
    total = await state.store.subscriptions.tenant_total(tenant)
    return SubscriptionPage(subscriptions=shown, next_cursor=next_cursor, total=total)


def _counters(tally: Tally) -> CountersOut:
    return CountersOut(**tally.shown())


@router.get("/{sub_id}", response_model=SubscriptionOut, operation_id="get_subscription")
async def get_subscription(
    sub_id: SubscriptionId, state: ReadyState, tenant: Tenant
) -> SubscriptionOut:
    sub = await state.subscribing.owned(sub_id, tenant)
    counted = await state.store.counters.read({sub.id: sub.created})
    out = _out((await state.endpoints.shown(tenant, [sub]))[0])
    return out.model_copy(update={"counters": _counters(counted[sub.id])})


@router.delete("/{sub_id}", status_code=204, operation_id="delete_subscription")
async def delete_subscription(sub_id: SubscriptionId, state: ReadyState, tenant: Tenant) -> None:
    await state.subscribing.unsubscribe(sub_id, tenant)


@router.post("/{sub_id}/secret", response_model=SecretOut, operation_id="rotate_secret")
async def rotate_secret(sub_id: SubscriptionId, state: ReadyState, tenant: Tenant) -> SecretOut:
    """Replace the signing secret of the subscription's webhook endpoint (every subscription
    delivering there shares it); deliveries carry both signatures during the grace period."""
    sub = await state.subscribing.owned(sub_id, tenant)
    return SecretOut(secret=await state.endpoints.rotate_for(sub))


async def _preview(
    body: SubscriptionIn, state: ReadyState, tenant: str, address: str
) -> SubscriptionPreview:
    kind, text = ("pattern", body.pattern) if body.pattern is not None else ("query", body.query)
    read, anchor, matchers = await state.subscribing.preview(
        kind, text or "", address, tenant, body.stream or ""
    )
    webhook_url, to_stream = delivery_of(address)
    delivery: list[Delivery] = ["webhook"] if webhook_url else []
    shown: dict[str, Any] = {
        "matchers": matchers,
        "callback_url": webhook_url or None,
        "delivery": [*delivery, "stream"] if to_stream else delivery,
        "stream": body.stream or None,
    }
    if read is None:
        shown |= {"kind": "pattern", "pattern": text, "anchor": anchor, "terms": []}
    else:
        shown |= {
            "kind": "keywords",
            "query": text,
            "terms": list(read.clauses[0].words),
            "alternatives": _alternatives(read),
            "warnings": misreadings(text or ""),
        }
    return SubscriptionPreview(**shown)


async def _address(body: SubscriptionIn, state: ReadyState, tenant: str) -> str:
    """Where the subscription delivers, as stored: its endpoint named by id is its URL."""
    if body.endpoint_id is None:
        return body.address()
    return body.address(await state.endpoints.url_of(tenant, body.endpoint_id))
