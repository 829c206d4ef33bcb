"""Reading a tenant's match stream (``GET /matches/stream``, Server-Sent Events) as a client.

What :meth:`wordcast.client.RouterClient.matches` iterates: each message of matches once, in
order, across dropped connections, which it resumes after the last message seen (the stream names
its starting position at once, so even a connection lost before any match resumes without a gap).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from httpx_sse import aconnect_sse

from wordcast.client.errors import RouterUnreachable, raise_for_status
from wordcast.webhooks.payload import matches_of

# No byte for this long (the router sends a heartbeat every 15 s by default) means a dead link.
READ_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class StreamedMatches:
    """One message of the stream: ``body`` is the JSON a webhook would have received."""

    id: str  # its position: resume after it with last_event_id
    body: dict[str, Any]

    @property
    def matches(self) -> list[dict[str, Any]]:
        """Its matches, each with its ``publication_id`` and ``text`` whatever the payload's
        version (:mod:`wordcast.webhooks.payload`)."""
        return matches_of(self.body)


class StreamLost(Exception):
    """The stream no longer holds matches after the position asked for (a 410, or 'gone')."""


async def follow(
    http: httpx.AsyncClient,
    last_event_id: str | None,
    reconnect_s: float,
    on_connect: Callable[[str], None] | None,
) -> AsyncGenerator[StreamedMatches, None]:
    """See :meth:`wordcast.client.RouterClient.matches`."""
    position = last_event_id
    answered = False
    while True:
        headers = {"last-event-id": position} if position is not None else {}
        timeout = httpx.Timeout(10.0, read=READ_TIMEOUT_S)
        try:
            async with aconnect_sse(
                http, "GET", "/matches/stream", headers=headers, timeout=timeout
            ) as source:
                answered = True
                if source.response.status_code >= 400:
                    await source.response.aread()
                    if source.response.status_code == 410:
                        raise StreamLost(source.response.json()["detail"])
                    raise_for_status(source.response)
                async for event in source.aiter_sse():
                    if event.event == "gone":
                        raise StreamLost(orjson.loads(event.data)["detail"])
                    if event.event == "matches":
                        position = event.id
                        yield StreamedMatches(event.id, orjson.loads(event.data))
                    elif event.id and event.event == "message" and not event.data:
                        position = event.id  # where this connection starts
                        if on_connect is not None:
                            on_connect(position)
                    # 'unavailable' (Redis failed) ends the connection: resumed below.
        except (httpx.TransportError, httpx.StreamError) as exc:
            if not answered:  # never reached: a wrong address, not a dropped connection
                raise RouterUnreachable(
                    f"cannot reach the router at {http.base_url}: {exc}"
                ) from exc
        await asyncio.sleep(reconnect_s)
