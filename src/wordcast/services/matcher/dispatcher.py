"""Delivers matches to webhooks: batched per callback URL, keep-alive connections, bounded queue.

A bounded queue gives back-pressure: when subscribers are slower than matching, ``put`` waits, the
matcher answers the router later, and the router's clients slow down instead of memory growing.
Before every attempt the callback host is resolved and checked (:mod:`wordcast.netguard`) and the
request goes to the checked address, so a host that now resolves to a private address is refused;
redirects are never followed.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from dataclasses import dataclass

import httpx
import orjson
from prometheus_client import Counter

from ...errors import UnresolvableCallback, UnsafeCallback
from ...netguard import AddressPolicy, resolve

log = logging.getLogger(__name__)

DELIVERED = Counter("wordcast_matches_delivered", "Matches a webhook acknowledged with a 2xx")
FAILED = Counter("wordcast_matches_failed", "Matches given up on after the last attempt")
ATTEMPTS = Counter("wordcast_delivery_attempts", "Webhook POSTs made", ["outcome"])


@dataclass(frozen=True, slots=True)
class PendingMatch:
    callback_url: str
    body: dict[str, str]


class Dispatcher:
    def __init__(
        self,
        *,
        queue_size: int,
        batch: int,
        concurrency: int,
        attempts: int,
        timeout_s: float,
        address_policy: AddressPolicy,
    ) -> None:
        self._policy = address_policy
        self._queue: asyncio.Queue[PendingMatch] = asyncio.Queue(maxsize=queue_size)
        self._batch = batch
        self._concurrency = concurrency
        self._attempts = attempts
        self._client = httpx.AsyncClient(
            timeout=timeout_s,
            follow_redirects=False,
            limits=httpx.Limits(
                max_connections=concurrency * 2, max_keepalive_connections=concurrency
            ),
        )
        self._workers: list[asyncio.Task[None]] = []
        self._in_flight = 0
        self.delivered = 0
        self.failed = 0

    @property
    def pending(self) -> int:
        """Matches found but not yet acknowledged or given up on."""
        return self._queue.qsize() + self._in_flight

    async def put_many(self, matches: list[PendingMatch]) -> None:
        for match in matches:
            try:
                self._queue.put_nowait(match)
            except asyncio.QueueFull:
                await self._queue.put(match)

    def start(self) -> None:
        self._workers = [
            asyncio.create_task(self._work(), name=f"dispatch-{n}")
            for n in range(self._concurrency)
        ]

    async def close(self) -> None:
        for worker in self._workers:
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        await self._client.aclose()

    def _take_batch(self, first: PendingMatch) -> list[PendingMatch]:
        taken = [first]
        while len(taken) < self._batch * 4:
            try:
                taken.append(self._queue.get_nowait())
            except asyncio.QueueEmpty:
                break
        return taken

    async def _work(self) -> None:
        while True:
            taken = self._take_batch(await self._queue.get())
            self._in_flight += len(taken)
            try:
                by_url: dict[str, list[dict[str, str]]] = defaultdict(list)
                for match in taken:
                    by_url[match.callback_url].append(match.body)
                for url, bodies in by_url.items():
                    for start in range(0, len(bodies), self._batch):
                        await self._deliver(url, bodies[start : start + self._batch])
            finally:
                self._in_flight -= len(taken)

    async def _deliver(self, url: str, bodies: list[dict[str, str]]) -> None:
        payload = orjson.dumps({"type": "matches", "matches": bodies})
        headers = {"content-type": "application/json"}
        delay = 0.2
        for attempt in range(1, self._attempts + 1):
            try:
                target = await resolve(url, self._policy)
                request_headers = headers | {"host": target.host_header}
                extensions = {"sni_hostname": target.host} if target.url.scheme == "https" else {}
                response = await self._client.post(
                    target.connect_url,
                    content=payload,
                    headers=request_headers,
                    extensions=extensions,
                )
                if response.is_success:
                    ATTEMPTS.labels("success").inc()
                    DELIVERED.inc(len(bodies))
                    self.delivered += len(bodies)
                    return
                ATTEMPTS.labels(f"http_{response.status_code}").inc()
                reason = f"HTTP {response.status_code}"
            except UnresolvableCallback as exc:
                ATTEMPTS.labels("unresolvable").inc()
                reason = str(exc)
            except UnsafeCallback as exc:
                ATTEMPTS.labels("refused_address").inc()
                reason = str(exc)
                break  # the address will not become acceptable by asking again
            except httpx.HTTPError as exc:
                ATTEMPTS.labels("network").inc()
                reason = f"{type(exc).__name__}: {exc}"
            if attempt < self._attempts:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
        log.error(
            "giving up on %d matches for %s after %d attempts: %s",
            len(bodies),
            url,
            self._attempts,
            reason,
        )
        FAILED.inc(len(bodies))
        self.failed += len(bodies)
