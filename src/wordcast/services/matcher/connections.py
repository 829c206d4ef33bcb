"""The dispatcher's HTTP clients: one connection per delivery slot, reused for the same endpoint.

Why not one ``httpx.AsyncClient`` with a pool of ``concurrency`` connections: httpcore's pool does
work in proportion to its connections on every request (it polls each idle socket, and counts the
idle ones for each of them), and at 64 connections that cost a matcher a fifth of its time, more
than the POSTs themselves. A client of one connection has no such work.

A client is handed back out for the endpoint it last posted to, so its connection is reused as a
pool would reuse it. It goes to another endpoint only as a fresh client: connections are opened to
the checked address (:mod:`wordcast.webhooks.netguard`), so two host names on one address would otherwise
share a TLS connection set up, and its certificate checked, for the first name only.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from wordcast.webhooks.netguard import Target


def endpoint(target: Target) -> tuple[str, str, str]:
    """What a connection is good for: scheme, the name the receiver sees, the address used."""
    return target.url.scheme, target.host_header, str(target.connect_url.netloc, "ascii")


class Connections:
    """``slots`` HTTP clients of one connection each; :meth:`client` waits while all are busy."""

    def __init__(self, slots: int, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._tls: ssl.SSLContext = httpx.create_ssl_context()  # loading the CAs takes 50 ms
        self._free = asyncio.Semaphore(slots)
        # Idle clients by the endpoint they last posted to (None: never used); no empty lists,
        # so any idle client is the first of the first list.
        self._idle: dict[tuple[str, str, str] | None, list[httpx.AsyncClient]] = {
            None: [self._new() for _ in range(slots)]
        }
        self.replaced = 0  # clients closed to serve another endpoint

    def _new(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            timeout=self._timeout_s,
            follow_redirects=False,
            verify=self._tls,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        )

    @asynccontextmanager
    async def client(self, target: Target) -> AsyncIterator[httpx.AsyncClient]:
        """A client for ``target``: one whose connection is open to it if any is idle."""
        key = endpoint(target)
        async with self._free:
            client = self._take(key)
            if client is None:
                # No idle client knows this endpoint: a never used one if any is left, else one
                # of the endpoint whose idle clients were put back first (dicts keep that order).
                other = next(iter(self._idle))
                client = self._take(other)
                assert client is not None  # the semaphore leaves an idle client to every holder
                if other is not None:
                    await client.aclose()
                    client = self._new()
                    self.replaced += 1
            try:
                yield client
            finally:
                self._idle.setdefault(key, []).append(client)

    def _take(self, key: tuple[str, str, str] | None) -> httpx.AsyncClient | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        client = idle.pop()  # the last used: its connection is the likeliest to be open still
        if not idle:
            del self._idle[key]
        return client

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for client in idle:
                await client.aclose()
        self._idle.clear()
