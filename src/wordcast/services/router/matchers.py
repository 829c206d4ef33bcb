"""The router's connections to the matchers: where each one answers, catching up, batches.

A matcher's URL comes from the configuration (a list, or a template with the StatefulSet ordinal);
matchers the list does not name, added by scaling, registered theirs in Redis when they started.
Every request shares one connection pool and carries the cluster's internal token, which matchers
ask of every call to ``/internal`` (:meth:`MatcherClient.authorize`). A matcher that refuses it
(401: the token was rotated in Redis since it was read) gets the request once more with the token
Redis holds now. A request whose connection dropped before an answer came is sent once more.
Transport and HTTP errors become :class:`~wordcast.errors.MatcherUnavailable` here, at the
boundary.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import httpx
import orjson

from wordcast.errors import MappingError, MatcherUnavailable
from wordcast.services.router.settings import RouterSettings
from wordcast.storage import Store

log = logging.getLogger(__name__)

# What httpx raises when a connection fails after it was established but before an answer arrived
# (reset, closed, or a response cut short).
DROPPED_CONNECTION = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)
MATCHER_CONNECT_TIMEOUT_S = 2.0
STATS_FRESH_S = 1.0  # how long the matchers' /stats, once asked, answer every caller


class RoutedBatch:
    """The publications routed to one matcher, by columns as the matcher takes them
    (:class:`wordcast.services.schemas.MatchRequest`): built a column at a time, no object per
    publication."""

    __slots__ = ("drawn", "ids", "languages", "patterns", "terms", "texts")

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.texts: list[str] = []
        self.terms: list[list[str]] = []
        self.languages: list[str] = []  # "" where not known
        self.patterns: list[int] = []  # positions where an anchor of the matcher's occurs
        self.drawn: dict[int, dict[str, int]] = {}  # position -> the hot-word copies drawn

    def __len__(self) -> int:
        return len(self.ids)

    def add(
        self,
        pub_id: str,
        text: str,
        terms: list[str],
        language: str,
        drawn: dict[str, int],
        flagged: bool,
    ) -> None:
        position = len(self.ids)
        self.ids.append(pub_id)
        self.texts.append(text)
        self.terms.append(terms)
        self.languages.append(language)
        if flagged:
            self.patterns.append(position)
        if drawn:
            self.drawn[position] = drawn


class MatcherClient:
    def __init__(self, settings: RouterSettings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self.configured = [] if settings.url_template else list(settings.matcher_urls)
        self._registered: dict[int, str] = {}  # matchers the configuration does not name
        self._recent_stats: tuple[float, int, asyncio.Future[list[dict[str, Any]]]] | None = None
        # A matcher cut off is known by a connect that does not complete: on one network that
        # takes a millisecond, so waiting for it as long as for a batch's answer only holds the
        # publications back.
        timeout = httpx.Timeout(settings.matcher_timeout_s, connect=MATCHER_CONNECT_TIMEOUT_S)
        self.client = httpx.AsyncClient(
            timeout=timeout,
            limits=httpx.Limits(max_keepalive_connections=4 * max(settings.initial_matchers, 8)),
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    def authorize(self, internal_token: str) -> None:
        """Show the cluster's internal token (read from Redis) on every request from now on."""
        self.client.headers["authorization"] = f"Bearer {internal_token}"

    def url(self, matcher: int) -> str:
        template = self.settings.url_template
        if template:
            return template.format(ordinal=matcher)
        if matcher < len(self.configured):
            return self.configured[matcher]
        return self._registered[matcher]

    async def reach(self, matchers: int) -> None:
        """Know the URL of every matcher below ``matchers``. Read again for every new mapping
        version: a matcher removed and added again may answer elsewhere."""
        if self.settings.url_template:
            return
        for matcher in range(len(self.configured), matchers):
            url = await self.store.membership.matcher_url(matcher)
            if url is None:
                raise MappingError(
                    f"matcher {matcher} has not registered its URL in Redis: start it (a mapping "
                    f"version for {matchers} matchers needs matchers 0 to {matchers - 1})"
                )
            self._registered[matcher] = url

    async def _post(self, matcher: int, path: str, **request: Any) -> httpx.Response:
        url = f"{self.url(matcher)}/internal/{path}"
        response = await self._post_once_more_if_dropped(matcher, url, request)
        if response.status_code == 401:
            self.authorize(await self.store.membership.internal_token())
            response = await self._post_once_more_if_dropped(matcher, url, request)
        return response

    async def _post_once_more_if_dropped(
        self, matcher: int, url: str, request: dict[str, Any]
    ) -> httpx.Response:
        """POST, and once more if the connection failed before an answer came back.

        A pooled connection the matcher has just closed, or reset, fails that way; a second try
        goes out on another connection. Repeating is safe: a sync is idempotent, and a batch
        matched twice records the same messages with the same ``webhook-id``s (delivery is at
        least once), which is what the publisher's own retry of a refused batch would do anyway,
        at every matcher instead of one. A timeout is not repeated: the matcher may still be
        working on the batch, and a second copy would only add to its load.
        """
        try:
            return await self.client.post(url, **request)
        except DROPPED_CONNECTION as exc:
            log.warning(
                "matcher %d dropped the connection (%s: %s); sending once more",
                matcher,
                type(exc).__name__,
                exc,
            )
        return await self.client.post(url, **request)

    async def sync(self, matcher: int, event_id: str) -> None:
        """Matcher ``matcher`` has applied every subscription event up to ``event_id``."""
        try:
            response = await self._post(
                matcher, "sync", json={"until": event_id}, timeout=self.settings.sync_timeout_s
            )
            response.raise_for_status()
        except httpx.HTTPError as exc:
            raise MatcherUnavailable(matcher, str(exc), "could not catch up") from exc

    async def start_backfill(self, matcher: int, body: dict[str, object]) -> None:
        """Matcher ``matcher`` has started the backfill ``body`` describes."""
        try:
            response = await self._post(
                matcher, "backfill", json=body, timeout=self.settings.sync_timeout_s
            )
            response.raise_for_status()
        except httpx.HTTPError as exc:
            raise MatcherUnavailable(
                matcher,
                str(exc),
                "did not start the backfill (the subscription is stored and in effect; delete "
                "it and subscribe again to backfill)",
            ) from exc

    async def sync_all(self, event_id: str, matchers: int) -> None:
        """Matchers 0 … ``matchers`` - 1 have applied every event up to ``event_id`` (raises if
        one cannot)."""
        await asyncio.gather(*(self.sync(m, event_id) for m in range(matchers)))

    async def sync_those_answering(
        self, matchers: Sequence[int], event_id: str, meanwhile: str
    ) -> None:
        """As :meth:`sync`, for each matcher that answers; the others are logged, with what
        happens ``meanwhile``."""
        results = await asyncio.gather(
            *(self.sync(m, event_id) for m in matchers), return_exceptions=True
        )
        for matcher, result in zip(matchers, results, strict=True):
            if isinstance(result, Exception):
                log.warning(
                    "matcher %d not told of event %s now (%s); %s",
                    matcher,
                    event_id,
                    result,
                    meanwhile,
                )

    async def stats(self, matchers: int, timeout_s: float = 2.0) -> list[dict[str, Any]]:
        """What matchers 0 … ``matchers`` - 1 say of themselves (``/stats``), asked at once; one
        that does not answer within ``timeout_s`` is listed with the reason.

        Callers within ``STATS_FRESH_S`` of each other share one round of questions, so a flood
        of requests to the router does not become a flood of requests to every matcher."""
        loop = asyncio.get_running_loop()
        recent = self._recent_stats
        if recent is not None:
            asked_at, asked_of, answers = recent
            fresh = not answers.done() or loop.time() - asked_at < STATS_FRESH_S
            if asked_of == matchers and fresh:
                return await asyncio.shield(answers)
        answers = asyncio.ensure_future(self.ask_stats(matchers, timeout_s))
        self._recent_stats = (loop.time(), matchers, answers)
        return await asyncio.shield(answers)

    async def ask_stats(self, matchers: int, timeout_s: float = 2.0) -> list[dict[str, Any]]:
        """What matchers 0 … ``matchers`` - 1 say of themselves now (as :meth:`stats`, never a
        shared answer)."""

        async def one(matcher: int) -> dict[str, Any]:
            where: dict[str, Any] = {"ordinal": matcher}
            try:
                where["url"] = url = self.url(matcher)
                response = await self.client.get(f"{url}/stats", timeout=timeout_s)
                response.raise_for_status()
                return where | {"reachable": True} | response.json()
            except (httpx.HTTPError, KeyError, ValueError) as exc:
                reason = "its URL is not registered" if isinstance(exc, KeyError) else str(exc)
                return where | {"reachable": False, "error": reason or type(exc).__name__}

        return list(await asyncio.gather(*(one(m) for m in range(matchers))))

    async def send(
        self,
        matcher: int,
        version: int,
        batch: RoutedBatch,
        publisher: str = "",
        stream: str = "",
        accepted: float = 0.0,
    ) -> None:
        """One batch of publications, routed with mapping ``version``, to be matched against the
        subscriptions of tenant ``publisher`` (or of shared ``stream``); ``accepted``: when the
        router took them (Unix seconds)."""
        await self._send_batch(matcher, "match", version, batch, publisher, stream, accepted)

    async def dry_run(
        self,
        matcher: int,
        version: int,
        batch: RoutedBatch,
        publisher: str,
        stream: str = "",
        max_bytes: int = 0,
    ) -> list[tuple[str, int, str]] | None:
        """What matcher ``matcher`` would deliver to tenant ``publisher`` of ``batch``, as
        (subscription id, position in the batch, JSON text of ``matched``), recording nothing;
        None if their JSON would pass ``max_bytes``."""
        response = await self._send_batch(
            matcher, "dry-run", version, batch, publisher, stream, answer_max_bytes=max_bytes
        )
        answer = orjson.loads(response.content)
        if not answer.get("complete", True):
            return None
        return [tuple(match) for match in answer["matches"]]

    async def _send_batch(
        self,
        matcher: int,
        path: str,
        version: int,
        batch: RoutedBatch,
        publisher: str,
        stream: str,
        accepted: float = 0.0,
        answer_max_bytes: int = 0,
    ) -> httpx.Response:
        body = {
            "version": version,
            "publisher": publisher,
            "stream": stream,
            "accepted": accepted,
            # By columns (schemas.MatchRequest): the matcher validates them faster than rows.
            "ids": batch.ids,
            "texts": batch.texts,
            "terms": batch.terms,
            "patterns": batch.patterns,
            "drawn": batch.drawn,
            "languages": batch.languages,
        }
        if answer_max_bytes:
            body["answer_max_bytes"] = answer_max_bytes
        try:
            response = await self._post(
                matcher,
                path,
                content=orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS),
                headers={"content-type": "application/json"},
            )
        except httpx.TimeoutException as exc:
            waited = self.client.timeout.connect if isinstance(exc, httpx.ConnectTimeout) else None
            what = "connect" if waited else "answer"
            waited = waited or self.settings.matcher_timeout_s
            raise MatcherUnavailable(
                matcher, f"it did not {what} within {waited:g} s ({type(exc).__name__})"
            ) from exc
        except httpx.HTTPError as exc:
            raise MatcherUnavailable(matcher, f"{type(exc).__name__}: {exc}") from exc
        if not response.is_success:
            raise MatcherUnavailable(matcher, f"HTTP {response.status_code}: {response.text[:200]}")
        return response
