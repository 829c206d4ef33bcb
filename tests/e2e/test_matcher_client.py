"""The router's requests to a matcher when the connection fails: real sockets, a real Redis.

The "matcher" here is a raw TCP server that drops connections on purpose (an RST, as a server
closing a connection with a request unread sends), which a real matcher cannot be made to do; it
also stands in for matchers that only need to answer (:func:`serving`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest

from tests.e2e.support import DroppingServer, serving
from wordcast.errors import MatcherUnavailable
from wordcast.services.router.matchers import MatcherClient, RoutedBatch
from wordcast.services.router.settings import RouterSettings
from wordcast.storage import Store
from wordcast.storage.redis import connect


@asynccontextmanager
async def client_of(
    server: DroppingServer, redis_url: str, namespace: str
) -> AsyncIterator[MatcherClient]:
    async with serving(server) as url:
        settings = RouterSettings(
            environment="development", matcher_urls=[url], matcher_timeout_s=1.0
        )
        redis = connect(redis_url)
        client = MatcherClient(settings, Store(redis, namespace))
        try:
            yield client
        finally:
            await client.aclose()
            await redis.aclose()


BATCH = RoutedBatch()
BATCH.add("p1", "hello", ["hello"], "en", {}, False)


def test_a_batch_whose_connection_drops_is_sent_once_more(redis_url: str, namespace: str) -> None:
    async def scenario() -> None:
        server = DroppingServer(drops=1)
        async with client_of(server, redis_url, namespace) as client:
            await client.send(0, 3, BATCH, accepted=1764201234.5)
        assert len(server.bodies) == 2
        assert server.bodies[0] == server.bodies[1]
        assert orjson.loads(server.bodies[1]) == {  # by columns (schemas.MatchRequest)
            "version": 3,
            "publisher": "",
            "stream": "",
            "accepted": 1764201234.5,
            "ids": ["p1"],
            "texts": ["hello"],
            "terms": [["hello"]],
            "patterns": [],
            "drawn": {},
            "languages": ["en"],
        }

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("server_kind", "error", "tries"),
    [
        # Dropped twice: the matcher is unavailable, and the batch was not sent a third time.
        ({"drops": 100}, "matcher 0 did not accept the batch: ReadError", 2),
        # A timeout is not repeated: the matcher may still be matching the batch.
        ({"drops": 0, "silent": True}, "ReadTimeout", 1),
    ],
    ids=["keeps-dropping", "times-out"],
)
def test_a_batch_that_fails_is_tried_at_most_twice_and_a_timeout_once(
    redis_url: str, namespace: str, server_kind: dict[str, Any], error: str, tries: int
) -> None:
    async def scenario() -> None:
        server = DroppingServer(**server_kind)
        async with client_of(server, redis_url, namespace) as client:
            with pytest.raises(MatcherUnavailable, match=error):
                await client.send(0, 3, BATCH)
        assert len(server.bodies) == tries

    asyncio.run(scenario())


def test_a_sync_whose_connection_drops_is_sent_once_more(redis_url: str, namespace: str) -> None:
    async def scenario() -> None:
        server = DroppingServer(drops=1)
        async with client_of(server, redis_url, namespace) as client:
            await client.sync(0, "5-0")
        assert [orjson.loads(b) for b in server.bodies] == [{"until": "5-0"}] * 2

    asyncio.run(scenario())
