"""``wordcast watch``: subscribe, show each match as it is delivered, unsubscribe on the way out.

By default the watch follows its tenant's match stream (``GET /matches/stream``): it connects
first, then registers the queries and patterns it is given for delivery to the stream, and prints
every match of theirs that the stream carries. It needs nothing but the router's address, so it
works against a remote cluster as well as a local one, and a dropped connection is resumed
without a gap.

With ``--webhook`` it serves a webhook of its own on a local port instead, registers the
subscriptions with that webhook as their callback, and checks each delivery's Standard Webhooks
signature against the secrets its subscriptions were given: a delivery that no secret of theirs
signed gets ``401`` and is not shown. The matchers must reach that webhook: a local cluster
(``wordcast up``) allows loopback callbacks; against a remote cluster, serve on an address it
reaches (``--host``, ``--callback-host``).

Either way it deletes its subscriptions when it stops (Ctrl-C, ``--count`` matches shown, or
``--seconds`` passed), unless told to keep them.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import uvicorn
from standardwebhooks import Webhook, WebhookVerificationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from wordcast import limits
from wordcast.client import RouterClient, RouterUnreachable
from wordcast.services.common import BodySizeLimit, header_timeout
from wordcast.webhooks.payload import matches_of

# A delivery can arrive before the answer that names its subscription (a publication routed
# meanwhile); it waits this long for the registration to finish, then is refused for a retry.
REGISTRATION_WAIT_S = 30.0


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # Ctrl-C belongs to the watch, which deletes its subscriptions and then stops the server.
        yield


@dataclass(frozen=True)
class Watched:
    id: str
    label: str  # the query or pattern, as given
    verifier: Webhook | None  # None: delivered to the match stream only, which nobody signs


class _Watch:
    """What both ways of watching share: the subscriptions registered, the matches shown."""

    def __init__(self, router_url: str, out: Callable[[str], None]) -> None:
        self.router_url = router_url
        self.out = out
        self.watched: dict[str, Watched] = {}
        self.shown = 0
        self._registered = asyncio.Event()
        self._enough = asyncio.Event()
        self._limit: int | None = None

    def _show(self, match: dict[str, Any]) -> None:
        if self._enough.is_set():
            return  # delivered after the last one asked for: acknowledged, not shown
        watched = self.watched.get(str(match.get("subscription_id")))
        label = watched.label if watched else str(match.get("query") or match.get("pattern"))
        text = " ".join(str(match.get("text", "")).split())
        self.out(f"{label!r:<30} <- {text[:100]!r}")
        self.shown += 1
        if self._limit is not None and self.shown >= self._limit:
            self._enough.set()

    async def _register(
        self,
        client: RouterClient,
        queries: Sequence[str],
        patterns: Sequence[str],
        callback_url: str | None,
    ) -> None:
        for kind, items in (("query", queries), ("pattern", patterns)):
            if not items:
                continue
            created = await client.subscribe_many(items, callback_url, kind=kind, progress=False)
            for item, sub in zip(items, created, strict=True):
                secret = sub.get("secret")
                verifier = Webhook(secret) if secret else None
                self.watched[sub["id"]] = Watched(sub["id"], item, verifier)
        self._registered.set()

    async def _finish(self, client: RouterClient, keep: bool) -> None:
        self._registered.set()  # a delivery still waiting may be answered
        if not keep:
            await asyncio.shield(self._unregister(client))
        elif self.watched:
            self.out(f"kept the subscriptions of this watch: {' '.join(self.watched)}")

    async def _unregister(self, client: RouterClient) -> None:
        ids = list(self.watched)
        await asyncio.gather(*(client.unsubscribe(sub_id) for sub_id in ids))
        if ids:
            self.out(f"deleted the {len(ids)} subscriptions of this watch")


class StreamWatcher(_Watch):
    """Follows the tenant's match stream; needs only the router's address."""

    def __init__(self, router_url: str, *, out: Callable[[str], None] = print) -> None:
        super().__init__(router_url, out)

    async def run(
        self,
        queries: Sequence[str],
        patterns: Sequence[str],
        *,
        count: int | None = None,
        seconds: float | None = None,
        keep: bool = False,
    ) -> int:
        """Watch until ``count`` matches were shown, ``seconds`` passed or the task is cancelled
        (Ctrl-C); returns the number shown. Raises what ended the stream (StreamLost, ApiError,
        RouterUnreachable)."""
        self._limit = count
        async with RouterClient(self.router_url) as client:
            connected = asyncio.Event()
            following = asyncio.create_task(self._follow(client, connected))
            try:
                await _first(connected.wait(), following, None)
                await self._register(client, queries, patterns, None)
                self.out(
                    f"watching {_subscriptions(len(self.watched))} on the match stream of "
                    f"{self.router_url}"
                    + (" (Ctrl-C stops)" if seconds is None and count is None else "")
                )
                await _first(self._enough.wait(), following, seconds)
            finally:
                following.cancel()
                await asyncio.gather(following, return_exceptions=True)
                await self._finish(client, keep)
        return self.shown

    async def _follow(self, client: RouterClient, connected: asyncio.Event) -> None:
        async for message in client.matches(on_connect=lambda _: connected.set()):
            # A match can come before the answer that names its subscription.
            await self._registered.wait()
            for match in message.matches:
                if str(match.get("subscription_id")) in self.watched:
                    self._show(match)


async def _first(
    awaited: Coroutine[Any, Any, Any], following: asyncio.Task[None], seconds: float | None
) -> None:
    """Until ``awaited`` is done or ``seconds`` passed; what ended ``following`` first is raised."""
    waiting = asyncio.ensure_future(awaited)
    try:
        await asyncio.wait({waiting, following}, timeout=seconds, return_when="FIRST_COMPLETED")
    finally:
        waiting.cancel()
    if following.done():
        following.result()  # raises what ended it
        raise RouterUnreachable("the match stream ended")


class Watcher(_Watch):
    """Serves a webhook of its own (``--webhook``): the matchers must reach it."""

    def __init__(
        self,
        router_url: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        callback_host: str | None = None,
        out: Callable[[str], None] = print,
    ) -> None:
        super().__init__(router_url, out)
        self.refused = 0
        # Bound now, so that the callback URL is known before anything is registered.
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        bound = self._socket.getsockname()[1]
        shown_host = callback_host or host
        if ":" in shown_host:
            shown_host = f"[{shown_host}]"
        self.callback_url = f"http://{shown_host}:{bound}/hook"

    # -- the webhook --------------------------------------------------------------------------
    async def _hook(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body = orjson.loads(raw)
            if not isinstance(body.get("matches"), list):
                raise TypeError("matches must be a list")
            matches = matches_of(body)
            ids = {str(match["subscription_id"]) for match in matches}
        except (orjson.JSONDecodeError, KeyError, TypeError, IndexError, AttributeError) as exc:
            return Response(f"not a match delivery: {exc}", status_code=400)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._registered.wait(), REGISTRATION_WAIT_S)
        if not self._signed_by_ours(raw, dict(request.headers), ids):
            self.refused += 1
            self.out(f"refused a delivery no subscription of this watch signed ({len(matches)})")
            return Response("signature not verified", status_code=401)
        for match in matches:
            self._show(match)
        return Response(status_code=204)

    def _signed_by_ours(self, raw: bytes, headers: dict[str, str], ids: set[str]) -> bool:
        for sub_id in ids:
            watched = self.watched.get(sub_id)
            if watched is None or watched.verifier is None:
                continue
            try:
                watched.verifier.verify(raw, headers, json_parse=False)
            except WebhookVerificationError:
                continue
            return True
        return False

    # -- the whole watch ----------------------------------------------------------------------
    async def run(
        self,
        queries: Sequence[str],
        patterns: Sequence[str],
        *,
        count: int | None = None,
        seconds: float | None = None,
        keep: bool = False,
    ) -> int:
        """Watch until ``count`` matches were shown, ``seconds`` passed or the task is cancelled
        (Ctrl-C); returns the number shown."""
        self._limit = count
        app = Starlette(
            routes=[Route("/hook", self._hook, methods=["POST"])],
            middleware=[Middleware(BodySizeLimit, max_bytes=limits.MAX_MESSAGE_BYTES)],
        )
        config = uvicorn.Config(app, log_level="warning", lifespan="off", http=header_timeout(10.0))
        server = _Server(config)
        serving = asyncio.create_task(server.serve(sockets=[self._socket]))
        try:
            async with RouterClient(self.router_url) as client:
                try:
                    await self._register(client, queries, patterns, self.callback_url)
                    self.out(
                        f"watching {_subscriptions(len(self.watched))} at {self.callback_url}"
                        + (" (Ctrl-C stops)" if seconds is None and count is None else "")
                    )
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._enough.wait(), seconds)
                finally:
                    await self._finish(client, keep)
        finally:
            server.should_exit = True
            await serving
        return self.shown


def _subscriptions(n: int) -> str:
    return f"{n:,} subscription{'' if n == 1 else 's'}"
