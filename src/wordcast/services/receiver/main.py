"""The demo webhook receiver: ``wordcast receiver``. Prints matches and keeps them for inspection.

``GET /deliveries`` returns every (subscription id, publication id) pair received, which the
end-to-end tests and the benchmark compare against the oracle, with the ``webhook-id`` each came
under; ``GET /deliveries/raw`` the last requests as received (headers and body, for checking
signatures). ``POST /control`` makes it slow or failing, for the delivery tests.
"""

from __future__ import annotations

import asyncio
import sys
from collections import deque
from typing import Any

import orjson
from fastapi import APIRouter, FastAPI, HTTPException, Query, Request, Response
from pydantic import BaseModel, Field
from pydantic_settings import SettingsConfigDict

from wordcast import limits
from wordcast.services.common import BodySizeLimit, OrjsonRoute, ServiceSettings
from wordcast.services.pages import serve_pages
from wordcast.webhooks.payload import matches_of


class ReceiverSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="WORDCAST_RECEIVER_", extra="ignore")

    port: int = Field(default=8200, description="The port the receiver listens on.")
    quiet: bool = Field(default=False, description="Print nothing per delivery.")
    record: bool = Field(
        default=True,
        description="Keep the (subscription, publication) pairs received, for GET /deliveries.",
    )


class Inbox:
    def __init__(self, settings: ReceiverSettings) -> None:
        self.quiet = settings.quiet
        self.record = settings.record
        self.pairs: list[tuple[str, str]] = []
        self.webhook_ids: list[str] = []  # parallel to pairs
        self.raw: deque[dict[str, Any]] = deque(maxlen=100)
        self.behaviour = Behaviour()
        self.requests = 0
        self.matches = 0
        self.bytes = 0  # of the bodies received

    def take(self, matches: list[dict[str, Any]], webhook_id: str) -> None:
        self.requests += 1
        self.matches += len(matches)
        if self.record:
            self.pairs.extend((m["subscription_id"], m["publication_id"]) for m in matches)
            self.webhook_ids.extend(webhook_id for _ in matches)
        if not self.quiet:
            # A version 2 match names its subscription by id only (version 1 by its query too).
            lines = [f"match  {_label(m):<32} <- {m.get('text', '')[:90]!r}" for m in matches]
            sys.stdout.write("\n".join(lines) + "\n")
            sys.stdout.flush()


def _label(match: dict[str, Any]) -> str:
    written = match.get("query") or match.get("pattern")
    return repr(written) if written else f"subscription {str(match['subscription_id'])[:12]}…"


class Behaviour(BaseModel):
    """How the receiver answers: a status other than 2xx records nothing."""

    status: int = Field(default=204, ge=200, le=599)
    delay_s: float = Field(default=0.0, ge=0, le=60)
    retry_after: str | None = None


router = APIRouter(route_class=OrjsonRoute)


@router.post("/hook", status_code=204)
async def hook(request: Request) -> Response:
    inbox: Inbox = request.app.state.inbox
    behaviour = inbox.behaviour
    if behaviour.delay_s:
        await asyncio.sleep(behaviour.delay_s)
    if behaviour.status >= 300:
        headers = {"retry-after": behaviour.retry_after} if behaviour.retry_after else {}
        return Response(status_code=behaviour.status, headers=headers)
    raw = await request.body()
    try:
        body = orjson.loads(raw)
        if not isinstance(body.get("matches"), list):
            raise TypeError("matches must be a list")
        matches = matches_of(body)
    except (orjson.JSONDecodeError, KeyError, TypeError, IndexError, AttributeError) as exc:
        raise HTTPException(400, f"not a match delivery: {exc}") from exc
    webhook_headers = {k: v for k, v in request.headers.items() if k.startswith("webhook-")}
    inbox.raw.append({"headers": webhook_headers, "body": raw.decode()})
    inbox.bytes += len(raw)
    inbox.take(matches, webhook_headers.get("webhook-id", ""))
    return Response(status_code=behaviour.status)


@router.post("/control")
async def control(behaviour: Behaviour, request: Request) -> Behaviour:
    request.app.state.inbox.behaviour = behaviour
    return behaviour


@router.get("/deliveries")
async def deliveries(request: Request, offset: int = Query(0, ge=0)) -> Response:
    inbox: Inbox = request.app.state.inbox
    # Encoded by orjson directly: FastAPI's encoder walks tens of thousands of pairs slowly.
    body = {
        "total": len(inbox.pairs),
        "pairs": inbox.pairs[offset:],
        "webhook_ids": inbox.webhook_ids[offset:],
    }
    return Response(orjson.dumps(body), media_type="application/json")


@router.get("/deliveries/raw")
async def raw_deliveries(request: Request) -> list[dict[str, Any]]:
    inbox: Inbox = request.app.state.inbox
    return list(inbox.raw)


@router.get("/stats")
async def stats(request: Request) -> dict[str, int]:
    inbox: Inbox = request.app.state.inbox
    return {"requests": inbox.requests, "matches": inbox.matches, "bytes": inbox.bytes}


@router.get("/healthz")
@router.get("/readyz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


def create_app(settings: ReceiverSettings | None = None) -> FastAPI:
    settings = settings or ReceiverSettings()
    app = FastAPI(title="wordcast demo webhook receiver", docs_url=None, redoc_url=None)
    serve_pages(app)
    app.state.inbox = Inbox(settings)
    app.add_middleware(
        BodySizeLimit, max_bytes=limits.MAX_MESSAGE_BYTES, timeout_s=settings.body_timeout_s
    )
    app.include_router(router)
    return app
