"""A small asynchronous client of the router API, with bulk helpers that show progress.

What it owns: :class:`RouterClient` (its admin calls in :mod:`.admin`), what a call raises
(:mod:`.errors`), and the reading of the match stream (:mod:`.matches`). May import: the
foundation (:mod:`wordcast.errors`, :mod:`wordcast.limits`, :mod:`wordcast.defaults`) and
:mod:`wordcast.webhooks`; it speaks to a router over HTTP only, never to Redis or a service's code.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Sequence
from typing import Any

import httpx
import orjson

from wordcast.backoff import Backoff
from wordcast.client.admin import AdminCalls
from wordcast.client.endpoints import EndpointCalls
from wordcast.client.errors import ApiError, RouterUnreachable, raise_for_status
from wordcast.client.matches import StreamedMatches, StreamLost, follow

__all__ = ["ApiError", "RouterClient", "RouterUnreachable", "StreamLost", "StreamedMatches"]

# Subscriptions per request of subscribe_many: within the router's limit of 1,000, and small
# enough that the progress line moves and a refused batch is quick to find.
SUBSCRIBE_BATCH = 500
# publish_many sends a batch refused for a passing reason (429, 503, no answer) again: this many
# tries at most, the pauses doubling between these two (about 45 s in all).
PUBLISH_TRIES = 8
FIRST_PAUSE_S = 0.5
MAX_PAUSE_S = 10.0


class ProgressLine:
    """Prints ``label: done/total (rate/s)`` to stderr, redrawn on a terminal, a line every 5 s
    when the output goes to a file or a CI log."""

    def __init__(self, label: str, total: int, enabled: bool = True) -> None:
        self.label, self.total, self.enabled = label, total, enabled
        self.tty = sys.stderr.isatty()
        self.every = 0.5 if self.tty else 5.0
        self.done = 0
        self.started = self._last = time.perf_counter()

    def note(self, message: str) -> None:
        """A line of its own, under the progress line."""
        if self.enabled:
            below = "\n" if self.tty else ""  # off the progress line being redrawn
            sys.stderr.write(f"{below}{self.label}: {message}\n")
            sys.stderr.flush()

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if self.enabled and (now - self._last >= self.every or self.done >= self.total):
            self._last = now
            rate = self.done / max(now - self.started, 1e-9)
            end = "\n" if self.done >= self.total or not self.tty else ""
            start = "\r" if self.tty else ""
            sys.stderr.write(
                f"{start}{self.label}: {self.done:,}/{self.total:,} ({rate:,.0f}/s){end}"
            )
            sys.stderr.flush()


class RouterClient(AdminCalls, EndpointCalls):
    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        concurrency: int = 16,
        timeout: float = 60.0,
    ) -> None:
        """``api_key`` defaults to $WORDCAST_API_KEY, else a development cluster's key."""
        from wordcast.defaults import DEVELOPMENT_API_KEY

        self.base_url = base_url.rstrip("/")
        self.answered = False  # has the router ever answered this client
        self._limit = asyncio.Semaphore(concurrency)
        api_key = api_key or os.environ.get("WORDCAST_API_KEY") or DEVELOPMENT_API_KEY
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers={"authorization": f"Bearer {api_key}"},
            timeout=timeout,
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        )

    async def __aenter__(self) -> RouterClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.aclose()

    async def subscribe(
        self,
        query: str,
        callback_url: str | None = None,
        *,
        kind: str = "query",
        stream: str | None = None,
        delivery: Sequence[str] | None = None,
        backfill_minutes: int | None = None,
        tag: str | None = None,
        strict: bool = False,
    ) -> dict[str, Any]:
        """Register a keyword subscription, or a wildcard pattern with ``kind="pattern"``; to the
        publications of shared ``stream`` if given, else to the tenant's own. Its matches go to
        ``callback_url``, else to the tenant's match stream (:meth:`matches`); ``delivery``
        chooses (``["webhook", "stream"]`` for both). ``backfill_minutes`` asks for the matches
        of the publications of the last minutes too (when the cluster keeps them); ``tag`` is
        echoed in each of its matches. ``warnings`` in the answer name the pieces of a query
        read otherwise than X's rules or Lucene would; ``strict`` refuses it (ApiError, 422)."""
        body = _item(kind, query, callback_url, stream)
        given = {"tag": tag, "delivery": delivery, "backfill_minutes": backfill_minutes}
        body |= {name: value for name, value in given.items() if value is not None}
        result: dict[str, Any] = await self._call(
            "POST", "/subscriptions", json=body, **_strict(strict)
        )
        return result

    def matches(
        self,
        last_event_id: str | None = None,
        *,
        reconnect_s: float = 1.0,
        on_connect: Callable[[str], None] | None = None,
    ) -> AsyncGenerator[StreamedMatches, None]:
        """The tenant's stream-delivered matches as they are found, a message at a time: after
        ``last_event_id`` (a message's id; "0" for the oldest kept), else from now. A dropped
        connection is resumed after the last message seen; raises StreamLost when matches after
        it are no longer kept. ``on_connect`` hears each connection's starting position."""
        return follow(self._http, last_event_id, reconnect_s, on_connect)

    async def unsubscribe(self, sub_id: str) -> None:
        await self._call("DELETE", f"/subscriptions/{sub_id}")

    async def subscription(self, sub_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._call("GET", f"/subscriptions/{sub_id}")
        return result

    async def subscriptions(self, page: int = 500) -> AsyncIterator[dict[str, Any]]:
        """Every subscription of this key's tenant, read a page at a time, each once."""
        cursor, seen = 0, set[str]()
        while True:
            answer = await self._call(
                "GET", "/subscriptions", params={"cursor": cursor, "limit": page}
            )
            for sub in answer["subscriptions"]:
                # The listing walks a Redis set, which may return an id twice.
                if sub["id"] not in seen:
                    seen.add(sub["id"])
                    yield sub
            cursor = answer["next_cursor"]
            if not cursor:
                return

    async def rotate_secret(self, sub_id: str) -> str:
        """A new signing secret; the old one stays valid for the router's grace period."""
        answer = await self._call("POST", f"/subscriptions/{sub_id}/secret")
        return str(answer["secret"])

    async def replay(self, dead_id: str) -> dict[str, Any]:
        """Deliver a dead letter again (same body, same webhook-id)."""
        result: dict[str, Any] = await self._call("POST", f"/deadletters/{dead_id}/replay")
        return result

    async def publish(
        self,
        publications: Sequence[dict[str, Any]],
        *,
        stream: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Publish a batch to the tenant's own subscriptions, or to shared ``stream``; with
        ``dry_run``, answer the matches it would bring the tenant's subscriptions (each with its
        ``matched``) and publish nothing."""
        body: dict[str, Any] = {"publications": list(publications)}
        if stream:
            body["stream"] = stream
        result: dict[str, Any] = await self._call(
            "POST",
            "/publications",
            params={"dry_run": "true"} if dry_run else None,
            content=orjson.dumps(body),
            headers={"content-type": "application/json"},
        )
        return result

    async def _call(self, method: str, path: str, **request: Any) -> Any:
        """One request within the concurrency limit; the answer's JSON (None if it has none).
        Raises ApiError for a refusal, RouterUnreachable when no answer came."""
        try:
            async with self._limit:
                response = await self._http.request(method, path, **request)
        except httpx.TransportError as exc:
            raise RouterUnreachable(f"cannot reach the router at {self.base_url}: {exc}") from exc
        self.answered = True
        raise_for_status(response)
        return orjson.loads(response.content) if response.content else None

    async def subscribe_many(
        self,
        queries: Sequence[str],
        callback_url: str | None,
        *,
        kind: str = "query",
        progress: bool = True,
        stream: str | None = None,
        batch: int = SUBSCRIBE_BATCH,
    ) -> list[dict[str, Any]]:
        """Register many subscriptions through the batch endpoint, ``batch`` to a request (at
        most 1,000), in order."""
        bar = ProgressLine("subscribing", len(queries), enabled=progress)

        async def one(chunk: Sequence[str]) -> list[dict[str, Any]]:
            items = [_item(kind, q, callback_url, stream) for q in chunk]
            created = await self.subscribe_items(items)
            bar.advance(len(chunk))
            return created

        done = await asyncio.gather(*(one(c) for c in chunks(queries, batch)))
        return [created for chunk in done for created in chunk]

    async def subscribe_items(
        self, items: Sequence[dict[str, Any]], *, strict: bool = False
    ) -> list[dict[str, Any]]:
        """Register up to 1,000 subscriptions, given as the batch endpoint's items (``query``
        or ``pattern``, ``callback_url``, optional ``stream`` and idempotency ``key``), in one
        request: all or none (``strict``: as :meth:`subscribe`)."""
        answer = await self._call(
            "POST",
            "/subscriptions/batch",
            content=orjson.dumps({"subscriptions": list(items)}),
            headers={"content-type": "application/json"},
            **_strict(strict),
        )
        created: list[dict[str, Any]] = answer["subscriptions"]
        return created

    async def unsubscribe_many(
        self, sub_ids: Sequence[str], *, progress: bool = True, batch: int = SUBSCRIBE_BATCH
    ) -> None:
        """Make sure none of ``sub_ids`` is subscribed any more, through the batch endpoint.

        The endpoint deletes nothing of a request naming an id that is not the tenant's; here
        that means one was deleted meanwhile (or never was), so that request's ids are deleted
        one by one, each 404 taken as done. Check ids first where an unknown one is an error.
        """
        bar = ProgressLine("deleting", len(sub_ids), enabled=progress)

        async def one(chunk: Sequence[str]) -> None:
            try:
                await self._call("POST", "/subscriptions/batch/delete", json={"ids": list(chunk)})
            except ApiError as exc:
                if exc.status != 404:
                    raise
                for sub_id in chunk:
                    try:
                        await self.unsubscribe(sub_id)
                    except ApiError as missing:
                        if missing.status != 404:
                            raise
            bar.advance(len(chunk))

        await asyncio.gather(*(one(c) for c in chunks(sub_ids, batch)))

    async def publish_many(
        self,
        publications: Sequence[dict[str, Any]],
        *,
        batch: int = 500,
        progress: bool = True,
        tries: int = PUBLISH_TRIES,
        stream: str | None = None,
    ) -> int:
        """Publish in batches of ``batch``, ``tries`` times at most each.

        A batch the router could not route now (``503``: a matcher restarting, Redis away) or
        would not take yet (``429``: over the tenant's rate), or whose answer never came from a
        router that has answered this client before, is sent again after a pause that doubles
        from half a second to 10 s (or what ``Retry-After`` asks), with the same ids: a
        publication without one gets one here first, so that a batch sent twice is the same
        publications. Matches of a batch that reached some matchers before it failed may be
        delivered again.
        """
        bar = ProgressLine("publishing", len(publications), enabled=progress)

        async def one(chunk: Sequence[dict[str, str]]) -> None:
            named = [p if p.get("id") else {**p, "id": uuid.uuid4().hex} for p in chunk]
            backoff = Backoff(FIRST_PAUSE_S, MAX_PAUSE_S)
            for attempt in range(1, tries + 1):
                try:
                    await self.publish(named, stream=stream)
                    break
                except (ApiError, RouterUnreachable) as exc:
                    refused = exc if isinstance(exc, ApiError) else None
                    # A router that never answered is a wrong address, not a passing failure.
                    passing = refused.status in (429, 503) if refused else self.answered
                    if not passing or attempt == tries:
                        raise
                    asked = refused.retry_after if refused else None
                    bar.note(f"{exc}; sending that batch again in {asked or backoff.delay_s:g} s")
                    await backoff.wait(asked)
            bar.advance(len(chunk))

        await asyncio.gather(*(one(chunk) for chunk in chunks(publications, batch)))
        return len(publications)


def _strict(strict: bool) -> dict[str, Any]:
    """The request's parameters asking for a strict reading of its queries."""
    return {"params": {"strict": "true"}} if strict else {}


def _item(kind: str, text: str, callback_url: str | None, stream: str | None) -> dict[str, Any]:
    """A subscription as the API takes it; without a callback its matches go to the stream."""
    item: dict[str, Any] = {kind: text}
    if callback_url is not None:
        item["callback_url"] = callback_url
    if stream:
        item["stream"] = stream
    return item


def chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
