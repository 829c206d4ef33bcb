"""Pieces every service shares: settings common to all, logging, health and metrics routes."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from wordcast.errors import Unavailable
from wordcast.storage.subscriptions import EVENTS_MAX
from wordcast.webhooks.netguard import AddressPolicy


class OrjsonRequest(Request):
    """A request whose JSON body orjson parses (its errors are ``json.JSONDecodeError``s, which
    FastAPI answers with a 422 as before)."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = orjson.loads(await self.body())
        return self._json


class OrjsonRoute(APIRoute):
    """The route class of every service's routes that take a JSON body.

    orjson refuses what JSON does not allow and the standard library's parser accepts (``NaN``,
    lone surrogates), which otherwise passed parsing and made the 422 itself unrenderable: a 500.
    On the hot paths (publishing, routed batches) the standard parser also took 4–6% of a busy
    router's and matcher's time.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def parse_with_orjson(request: Request) -> Response:
            return await handler(OrjsonRequest(request.scope, request.receive))

        return parse_with_orjson


class ServiceSettings(BaseSettings):
    """Settings every service reads; each service subclasses it with its own env prefix."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    host: str = Field(
        default="127.0.0.1",
        description="The address the service listens on (0.0.0.0 in a container).",
    )
    port: int = Field(default=8000, description="The port the service listens on.")
    redis_url: str = Field(
        default="redis://127.0.0.1:6379/0",
        description="The Redis the cluster keeps its state in: redis://, rediss://, unix://, or "
        "redis+cluster://host:port for a Redis Cluster (one node of it).",
        validation_alias=AliasChoices("WORDCAST_REDIS_URL", "REDIS_URL"),
    )
    namespace: str = Field(
        default="wordcast",
        pattern=r"^(?:[A-Za-z0-9_.-]{1,64}|\{[A-Za-z0-9_.-]{1,64}\})$",
        validation_alias=AliasChoices("WORDCAST_NAMESPACE"),
        description="Prefix of every Redis key, so several clusters can share one Redis. On a "
        "Redis Cluster it is used as a hash tag ({wordcast}), and may be given as one.",
    )
    redis_wait_replicas: int | None = Field(
        default=None,
        ge=0,
        le=16,
        validation_alias=AliasChoices("WORDCAST_REDIS_WAIT_REPLICAS"),
        description="Replicas that must hold a promised write (outbox messages, subscription "
        "changes) before it is acknowledged, by Redis's WAIT; unset: 1 on a Redis Cluster, 0 on "
        "one Redis. Each such write costs a round trip to a replica more.",
    )
    redis_write_deadline_s: float = Field(
        default=5.0,
        gt=0,
        validation_alias=AliasChoices("WORDCAST_REDIS_WRITE_DEADLINE_S"),
        description="A promised write (outbox messages, subscription changes) that Redis has not "
        "confirmed within this is refused with 503 (retrying is safe): a service cut off from "
        "Redis says so instead of holding requests. Keep it above the WAIT timeout (2 s).",
    )
    redis_max_connections: int = Field(
        default=100,
        ge=8,
        le=10_000,
        validation_alias=AliasChoices("WORDCAST_REDIS_MAX_CONNECTIONS"),
        description="Connections a process keeps to Redis at most (to each node of a Redis "
        "Cluster). A command that finds them all busy waits up to 5 s for one. A router's match "
        "streams hold none while they wait, and read on a few more of their own (a quarter of "
        "this, at most 8).",
    )
    log_level: str = Field(
        default="info", description="debug, info, warning or error (uvicorn's levels)."
    )
    events_max: int = Field(
        default=EVENTS_MAX,
        ge=1_000,
        validation_alias=AliasChoices("WORDCAST_EVENTS_MAX"),
        description="A bound on the subscription event stream's entries (a batch of "
        "subscriptions is one): it is trimmed to what every follower has read, and to about this "
        "many whatever they have read. A router or matcher that falls further behind loads a "
        "snapshot again instead of replaying.",
    )
    events_kept_for_s: float = Field(
        default=600.0,
        gt=0,
        validation_alias=AliasChoices("WORDCAST_EVENTS_KEPT_FOR_S"),
        description="How long the event stream keeps what a follower that stopped reading (a "
        "matcher down, a router gone) has not read. A matcher back within it replays the "
        "changes since its checkpoint; one back later loads every record.",
    )
    header_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="A request's line and headers must arrive within this of the connection "
        "opening (or the request's first byte), else the connection is closed.",
    )
    body_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="A request's body must arrive within this of the first read, else 408.",
    )
    callback_allow: Annotated[list[str], NoDecode] = Field(
        default=[],
        validation_alias=AliasChoices("WORDCAST_CALLBACK_ALLOW"),
        description="Networks (CIDR, comma-separated) callbacks may reach although they are "
        "loopback, private or link-local; empty in production. `wordcast up` allows loopback.",
    )

    @field_validator("callback_allow", mode="before")
    @classmethod
    def _split_networks(cls, value: object) -> object:
        if isinstance(value, str):
            return [entry.strip() for entry in value.split(",") if entry.strip()]
        return value

    @field_validator("callback_allow")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        AddressPolicy.from_entries(value)  # refuses to start on an entry that is not a network
        return value

    @property
    def address_policy(self) -> AddressPolicy:
        return AddressPolicy.from_entries(self.callback_allow)


@asynccontextmanager
async def in_background(work: Coroutine[Any, Any, None], name: str) -> AsyncIterator[None]:
    """Run ``work`` as a task for the duration of the block, then cancel it and wait for it.

    The cancellation is repeated until the task ends: one that lands in a Redis read can come
    back as a connection error, which a retry loop takes for an outage and carries on (a matcher
    being stopped went on delivering until it was killed)."""
    task = asyncio.create_task(work, name=name)
    try:
        yield
    finally:
        while not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=0.5)
        await asyncio.gather(task, return_exceptions=True)


READY_WAIT_S = 5.0


async def wait_ready(ready: asyncio.Event, loading: str) -> None:
    """Let a request that arrives while the service loads wait a little, then answer 503."""
    if ready.is_set():
        return
    try:
        await asyncio.wait_for(ready.wait(), READY_WAIT_S)
    except TimeoutError:
        raise Unavailable(f"still {loading}") from None


# CPython collects its youngest generation after every 700 new containers. A batch of publications
# makes tens of thousands (each publication's dict, terms and routed copies), and the batches in
# flight across awaits survive into the older generations, so full collections re-scanned the app
# and the index over and over: in bench.e2e a fifth of the router's and of each matcher's CPU was
# the collector. Reference counting frees nearly all of it. The cycles are httpx's: every request
# and its response form one, holding the request's body, so collecting them rarely costs memory
# (at 50,000 a router grew from 110 to 245 MB under load); 20,000 keeps memory flat and the
# collector at 4-7% of a service's CPU (BENCHMARKS.md).
GC_THRESHOLDS = (20_000, 10, 10)


def tune_garbage_collection() -> None:
    """Collect cycles less often, and never re-scan what the service built to start with.

    ``WORDCAST_GC_THRESHOLDS`` ("20000,10,10") overrides the thresholds of ``gc.set_threshold``.
    """
    text = os.environ.get("WORDCAST_GC_THRESHOLDS")
    thresholds = tuple(int(part) for part in text.split(",")) if text else GC_THRESHOLDS
    gc.set_threshold(*thresholds)
    gc.freeze()


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        format=f"%(asctime)s %(levelname)s [{os.getpid()}] %(name)s: %(message)s",
    )
    # One line per internal request would drown everything else.
    logging.getLogger("httpx").setLevel(max(logging.WARNING, logging.getLogger().level))


# A refused value longer than this (as JSON) is not sent back whole in a 422.
MAX_ECHOED_CHARS = 200


def _echoed(error: dict[str, Any]) -> dict[str, Any]:
    value = error.get("input")
    if isinstance(value, str):
        if len(value) > MAX_ECHOED_CHARS:
            return error | {"input": value[:MAX_ECHOED_CHARS] + f"… ({len(value):,} characters)"}
        return error
    try:
        size = len(orjson.dumps(value, default=str))
    except TypeError:  # orjson's own refusals (integers past 64 bits, say)
        size = len(repr(value))
    if size > MAX_ECHOED_CHARS:
        return {k: v for k, v in error.items() if k != "input"}
    return error


async def validation_refused(request: Request, exc: Exception) -> Response:
    """FastAPI's 422 for a request that fails validation, except that a long refused value is
    cut short: a 3 MB text refused for its length was echoed back whole."""
    assert isinstance(exc, RequestValidationError)
    errors = [_echoed(dict(error)) for error in exc.errors()]
    return JSONResponse({"detail": jsonable_encoder(errors)}, status_code=422)


BODY_TIMEOUT_S = 30.0  # from the first read of a request's body to its last byte


class BodySizeLimit:
    """Bounds every request body as it streams in, on every service.

    A body declared (``Content-Length``) over ``max_bytes`` is refused with a 413 before anything
    reads it. A body sent without a length (chunked) is counted as it arrives: the read that
    takes it past the limit raises a 413, so at most ``max_bytes`` of it is ever held. A body
    that takes longer than ``timeout_s`` to arrive is refused with a 408, so a client trickling
    a byte at a time cannot hold a request open for ever. Once the body is complete, ``receive``
    is passed through untouched (a streaming response waits on it for the client to leave).

    The refusals are raised from inside the app's own ``receive`` calls, so the app's exception
    handlers answer them as any other HTTP error.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float = BODY_TIMEOUT_S) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            response = JSONResponse(
                {"detail": self._too_large(f"request body of {int(declared)} bytes")},
                status_code=413,
            )
            await response(scope, receive, send)
            return
        received = 0
        complete = False
        deadline: float | None = None

        async def bounded_receive() -> Message:
            nonlocal received, complete, deadline
            if complete:
                return await receive()
            loop = asyncio.get_running_loop()
            if deadline is None:
                deadline = loop.time() + self.timeout_s
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise HTTPException(
                    408, f"the request body did not arrive within {self.timeout_s:g} s"
                ) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise HTTPException(
                        413, self._too_large(f"request body of over {received} bytes")
                    )
                complete = not message.get("more_body", False)
            else:
                complete = True  # disconnected
            return message

        await self.app(scope, bounded_receive, send)

    def _too_large(self, what: str) -> str:
        return f"{what} is larger than the {self.max_bytes}-byte limit"


ABORT_CONNECTION = "wordcast.abort_connection"  # in a request's scope: resets its connection


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol with a deadline for each request's headers.

    uvicorn bounds how long an idle kept-alive connection stays open, but not how long a client
    may take to send a request line and headers: a fresh connection that sends nothing, or a
    header a byte at a time, stayed open for ever (500 such sockets held 500 descriptors for as
    long as the clients liked). Here the headers must be complete within ``HEADER_TIMEOUT_S`` of
    the connection opening or of the request's first byte, else the connection is closed.
    :func:`header_timeout` makes the class for another deadline.
    """

    header_timeout_s = 10.0
    _header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_deadline()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_header_deadline()
        # A response that must give up on a consumer that reads nothing resets the connection:
        # uvicorn's close would wait for the socket's buffer to drain, for ever.
        self.scope[ABORT_CONNECTION] = self.transport.abort  # type: ignore[literal-required]

    def on_headers_complete(self) -> None:
        self._disarm_header_deadline()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)

    def _arm_header_deadline(self) -> None:
        self._disarm_header_deadline()
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _disarm_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_late(self) -> None:
        self._header_deadline = None
        if not self.transport.is_closing():
            self.transport.close()


# Worker processes import their protocol by name (uvicorn spawns them): its deadline comes from
# the environment the serving process gave them.
WORKER_HEADER_TIMEOUT_ENV = "WORDCAST_WORKER_HEADER_TIMEOUT_S"


class WorkerHeaderTimeoutProtocol(HeaderTimeoutProtocol):
    """:class:`HeaderTimeoutProtocol` for a worker process, the deadline read at import."""

    header_timeout_s = float(os.environ.get(WORKER_HEADER_TIMEOUT_ENV, "10"))


def header_timeout(seconds: float) -> type[HeaderTimeoutProtocol]:
    """:class:`HeaderTimeoutProtocol` with a deadline of ``seconds`` (uvicorn takes a class)."""
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,), {"header_timeout_s": seconds})


Guard = Callable[[Request], Awaitable[object]]


def bearer_token(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer …`` header, as HTTPBearer reads it."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def guarded_route(guard: Guard) -> type[APIRoute]:
    """An :class:`OrjsonRoute` that runs ``guard`` (authentication) before the body is read.

    FastAPI reads and parses a request's body before it resolves any dependency, so a check made
    as a dependency comes after a stranger's body has been taken in whole: a 200 MB body with no
    key was parsed, then refused with a 401. The guard runs first and raises to refuse; what it
    learns it leaves in ``request.state`` for the dependencies to pick up.
    """

    class GuardedRoute(OrjsonRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handler = super().get_route_handler()

            async def guarded(request: Request) -> Response:
                await guard(request)
                return await handler(request)

            return guarded

    return GuardedRoute


def probes_router(
    is_ready: Callable[[Request], bool], not_ready: str | Callable[[Request], str]
) -> APIRouter:
    """Liveness (the process answers) and readiness (its replica of Redis state is loaded);
    ``not_ready`` says why not, or works it out."""
    router = APIRouter(tags=["operations"])

    @router.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @router.get("/readyz")
    async def readyz(request: Request) -> dict[str, str]:
        if not is_ready(request):
            raise HTTPException(
                503, not_ready if isinstance(not_ready, str) else not_ready(request)
            )
        return {"status": "ready"}

    return router


def metrics_router() -> APIRouter:
    router = APIRouter(tags=["operations"])

    @router.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            # Worker processes: whichever answers the scrape speaks for all of them.
            registry = CollectorRegistry()
            MultiProcessCollector(registry)
            return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return router
