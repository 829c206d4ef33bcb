"""The demo webhook receiver: ``wordcast receiver``. Prints matches and keeps them for inspection.

``GET /deliveries`` returns every (subscription id, publication id) pair received, which the
end-to-end tests and the benchmark compare against the oracle.
"""

from __future__ import annotations

import sys
from typing import Any

import orjson
from fastapi import APIRouter, FastAPI, HTTPException, Query, Request
from pydantic_settings import SettingsConfigDict

from ..common import ServiceSettings


class ReceiverSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="WORDCAST_RECEIVER_", extra="ignore")

    port: int = 8200
    quiet: bool = False
    record: bool = True


class Inbox:
    def __init__(self, settings: ReceiverSettings) -> None:
        self.quiet = settings.quiet
        self.record = settings.record
        self.pairs: list[tuple[str, str]] = []
        self.requests = 0
        self.matches = 0

    def take(self, matches: list[dict[str, Any]]) -> None:
        self.requests += 1
        self.matches += len(matches)
        if self.record:
            self.pairs.extend((m["subscription_id"], m["publication_id"]) for m in matches)
        if not self.quiet:
            lines = [
                f"match  {m.get('query') or m.get('pattern', '')!r:<32} <- {m.get('text', '')[:90]!r}"
                for m in matches
            ]
            sys.stdout.write("\n".join(lines) + "\n")
            sys.stdout.flush()


router = APIRouter()


@router.post("/hook", status_code=204)
async def hook(request: Request) -> None:
    try:
        body = orjson.loads(await request.body())
        matches = body["matches"]
        if not isinstance(matches, list):
            raise TypeError("matches must be a list")
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise HTTPException(400, f"not a match delivery: {exc}") from exc
    request.app.state.inbox.take(matches)


@router.get("/deliveries")
async def deliveries(request: Request, offset: int = Query(0, ge=0)) -> dict[str, Any]:
    inbox: Inbox = request.app.state.inbox
    return {"total": len(inbox.pairs), "pairs": inbox.pairs[offset:]}


@router.get("/stats")
async def stats(request: Request) -> dict[str, int]:
    inbox: Inbox = request.app.state.inbox
    return {"requests": inbox.requests, "matches": inbox.matches}


@router.get("/healthz")
@router.get("/readyz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


def create_app(settings: ReceiverSettings | None = None) -> FastAPI:
    settings = settings or ReceiverSettings()
    app = FastAPI(title="wordcast demo webhook receiver")
    app.state.inbox = Inbox(settings)
    app.include_router(router)
    return app
