"""The dispatcher's connection slots: reuse per endpoint, fresh clients across endpoints, waiting.

Pure logic (no request is sent): which client a delivery gets. The delivery tests post through them.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from wordcast.services.matcher.connections import Connections, endpoint
from wordcast.webhooks.netguard import Target


def _target(url: str, address: str = "10.0.0.1") -> Target:
    parsed = httpx.URL(url)
    return Target(parsed, parsed.host, address)


def test_two_names_on_one_address_are_two_endpoints() -> None:
    a, b = _target("https://a.example/hook"), _target("https://b.example/hook")
    assert a.connect_url == b.connect_url  # the same address and port...
    assert endpoint(a) != endpoint(b)  # ...but not one TLS connection
    assert endpoint(a) == endpoint(_target("https://a.example/other-path"))
    assert endpoint(a) != endpoint(_target("http://a.example/hook"))
    assert endpoint(a) != endpoint(_target("https://a.example:8443/hook"))


def test_a_client_goes_back_to_the_endpoint_it_last_served() -> None:
    async def scenario() -> None:
        connections = Connections(3, timeout_s=1)
        a, b = _target("http://a.example/hook"), _target("http://b.example/hook")
        async with connections.client(a) as first:
            pass
        async with connections.client(b) as second:
            assert second is not first  # a never used client, not a's
        for _ in range(3):
            async with connections.client(a) as again:
                assert again is first
        async with connections.client(b) as again:
            assert again is second
        assert connections.replaced == 0
        await connections.aclose()

    asyncio.run(scenario())


def test_another_endpoint_gets_a_fresh_client_once_all_were_used() -> None:
    async def scenario() -> None:
        connections = Connections(2, timeout_s=1)
        a, b, c = (_target(f"https://{name}.example/hook") for name in "abc")
        async with connections.client(a) as for_a:
            pass
        async with connections.client(b) as for_b:
            pass
        async with connections.client(c) as for_c:
            # Both were used: the one of the endpoint put back first (a) is closed and replaced.
            assert for_c is not for_a
            assert for_c is not for_b
            assert for_a.is_closed
            assert not for_b.is_closed
        assert connections.replaced == 1
        async with connections.client(c) as again:
            assert again is for_c
        async with connections.client(b) as again:
            assert again is for_b
        await connections.aclose()

    asyncio.run(scenario())


def test_a_delivery_waits_while_every_slot_is_busy() -> None:
    async def scenario() -> None:
        connections = Connections(1, timeout_s=1)
        target = _target("http://a.example/hook")
        order: list[str] = []
        release = asyncio.Event()

        async def holder() -> None:
            async with connections.client(target):
                order.append("first in")
                await release.wait()
                order.append("first out")

        async def waiter() -> None:
            async with connections.client(target):
                order.append("second in")

        first = asyncio.create_task(holder())
        await asyncio.sleep(0)  # the holder takes the one client
        second = asyncio.create_task(waiter())
        for _ in range(5):  # the waiter runs until it waits; no time passes, only turns
            await asyncio.sleep(0)
        assert order == ["first in"]
        release.set()
        await asyncio.gather(first, second)
        assert order == ["first in", "first out", "second in"]
        await connections.aclose()

    asyncio.run(scenario())


@pytest.mark.parametrize("slots", [1, 4])
def test_a_failed_post_gives_its_client_back(slots: int) -> None:
    async def scenario() -> None:
        connections = Connections(slots, timeout_s=1)
        target = _target("http://a.example/hook")
        for _ in range(slots + 2):
            with pytest.raises(httpx.ConnectError):
                async with connections.client(target):
                    raise httpx.ConnectError("refused")
        async with asyncio.timeout(1):  # not stuck: every slot was given back
            for _ in range(slots):
                async with connections.client(target):
                    pass
        await connections.aclose()

    asyncio.run(scenario())
