from __future__ import annotations

from fastapi import APIRouter, HTTPException

from ....errors import MatcherUnavailable
from ....schemas import PublicationsAccepted, PublicationsIn
from ..deps import ReadyState, Tenant

router = APIRouter(prefix="/publications", tags=["publications"])


@router.post("", status_code=202, response_model=PublicationsAccepted)
async def publish(body: PublicationsIn, state: ReadyState, tenant: Tenant) -> PublicationsAccepted:
    """Publish one publication or a batch; 202 means every matcher concerned has accepted it."""
    try:
        ids, routed = await state.publish([(p.id, p.text) for p in body.publications])
    except MatcherUnavailable as exc:
        raise HTTPException(503, f"{exc}; retry the batch (ids make retries safe)") from exc
    return PublicationsAccepted(accepted=len(ids), ids=ids, routed=routed)
