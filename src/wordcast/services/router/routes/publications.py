from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query, Response

from wordcast.errors import RateLimited
from wordcast.services.publication_schemas import (
    PublicationsAccepted,
    PublicationsDryRun,
    PublicationsIn,
)
from wordcast.services.router.deps import ReadyState, Tenant, TenantRoute
from wordcast.services.schemas import ERRORS

router = APIRouter(
    prefix="/publications", tags=["publications"], responses=ERRORS, route_class=TenantRoute
)


@router.post(
    "",
    status_code=202,
    response_model=PublicationsAccepted,
    responses={200: {"model": PublicationsDryRun, "description": "A dry run's matches."}},
)
async def publish(
    body: PublicationsIn,
    state: ReadyState,
    tenant: Tenant,
    dry_run: Annotated[
        bool,
        Query(
            description="Answer (200) with the matches the publications would bring your own "
            "subscriptions, each with its `matched`; nothing is delivered, logged, kept for "
            "backfills or counted (the rate limit still applies)."
        ),
    ] = False,
) -> PublicationsAccepted | Response:
    """Publish one publication or a batch; 202 means every matcher concerned has accepted it.

    Without ``stream`` the publications meet only your own tenant's subscriptions; with one, the
    subscriptions to that shared stream (your tenant needs its publish grant)."""
    await state.publishing.check_publish_grant(tenant, body.stream)
    wait = await state.rate_limiter.take(tenant, len(body.publications))
    if wait > 0:
        raise RateLimited(
            f"tenant {tenant!r} is over its rate limit of "
            f"{state.settings.publications_per_second:g} publications/s; retry after {wait:.2f} s",
            wait,
        )
    publications = body.publications
    given: dict[str, Any] = {
        "publications": [(p.id, p.text) for p in publications],
        "publisher": tenant,
        "stream": body.stream or "",
        "attributes": [p.attributes for p in publications]
        if any(p.attributes for p in publications)
        else None,
        "languages": [p.lang for p in publications] if any(p.lang for p in publications) else None,
    }
    if dry_run:
        ids, found = await state.publishing.dry_run(
            **given, max_bytes=state.settings.dry_run_max_bytes
        )
        matches = [
            {
                "publication_id": ids[k],
                "subscription_id": sub_id,
                "matched": orjson.Fragment(matched),
            }
            for sub_id, k, matched in found
        ]
        answer = {"dry_run": True, "ids": ids, "matches": matches}
        return Response(orjson.dumps(answer), media_type="application/json")
    ids, routed = await state.publishing.publish(**given)
    return PublicationsAccepted(accepted=len(ids), ids=ids, routed=routed)
