from __future__ import annotations

import math

from fastapi import APIRouter, HTTPException

from ....errors import MatcherUnavailable, StoreUnavailable
from ....schemas import ERRORS, PublicationsAccepted, PublicationsIn
from ...common import OrjsonRoute
from ..deps import ReadyState, Tenant

router = APIRouter(
    prefix="/publications", tags=["publications"], responses=ERRORS, route_class=OrjsonRoute
)


@router.post("", status_code=202, response_model=PublicationsAccepted)
async def publish(body: PublicationsIn, state: ReadyState, tenant: Tenant) -> PublicationsAccepted:
    """Publish one publication or a batch; 202 means every matcher concerned has accepted it."""
    try:
        wait = await state.rate_limiter.take(tenant, len(body.publications))
    except StoreUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc
    if wait > 0:
        raise HTTPException(
            429,
            f"tenant {tenant!r} is over its rate limit of "
            f"{state.settings.publications_per_second:g} publications/s; retry after {wait:.2f} s",
            headers={"retry-after": str(max(1, math.ceil(wait)))},
        )
    try:
        ids, routed = await state.publish([(p.id, p.text) for p in body.publications])
    except (MatcherUnavailable, StoreUnavailable) as exc:
        raise HTTPException(503, f"{exc}; retry the batch (ids make retries safe)") from exc
    return PublicationsAccepted(accepted=len(ids), ids=ids, routed=routed)
