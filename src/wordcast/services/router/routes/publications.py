from __future__ import annotations

from fastapi import APIRouter

from wordcast.errors import RateLimited
from wordcast.services.publication_schemas import PublicationsAccepted, PublicationsIn
from wordcast.services.router.deps import ReadyState, Tenant, TenantRoute
from wordcast.services.schemas import ERRORS

router = APIRouter(
    prefix="/publications", tags=["publications"], responses=ERRORS, route_class=TenantRoute
)


@router.post("", status_code=202, response_model=PublicationsAccepted)
async def publish(body: PublicationsIn, state: ReadyState, tenant: Tenant) -> PublicationsAccepted:
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
    ids, routed = await state.publishing.publish(
        [(p.id, p.text) for p in publications],
        tenant,
        body.stream or "",
        attributes=[p.attributes for p in publications]
        if any(p.attributes for p in publications)
        else None,
        languages=[p.lang for p in publications] if any(p.lang for p in publications) else None,
    )
    return PublicationsAccepted(accepted=len(ids), ids=ids, routed=routed)
