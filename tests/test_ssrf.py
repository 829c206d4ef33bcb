"""The SSRF guard: forbidden callback addresses are refused at registration and at delivery."""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import Iterator

import httpx
import orjson
import pytest
import redis

from wordcast.errors import UnresolvableCallback, UnsafeCallback
from wordcast.services.matcher.dispatcher import Dispatcher
from wordcast.storage import Store
from wordcast.storage.outbox import Message, Outbox, webhook_id
from wordcast.storage.records import Subscription
from wordcast.storage.redis import connect
from wordcast.webhooks.netguard import AddressPolicy, resolve

from .conftest import AUTH, Receiver, RunningCluster, start_cluster, stop_cluster

LOOPBACK = AddressPolicy.from_entries(["127.0.0.0/8", "::1"])


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "0.0.0.0",
        "224.0.0.1",
        "240.0.0.1",
        "100.64.0.1",
        "::1",
        "fe80::1",
        "fc00::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        # IPv6 forms that carry a private IPv4 address are as private as it is.
        "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "2002:c0a8:101::1",  # 6to4 of 192.168.1.1
        "64:ff9b::a9fe:a9fe",  # NAT64
        "64:ff9b::7f00:1",
        "::ffff:0:a9fe:a9fe",  # IPv4-translated
        "::a9fe:a9fe",  # IPv4-compatible
        "2001:0:a9fe:a9fe::1",  # Teredo, server 169.254.169.254
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
    ],
)
def test_forbidden_addresses(address: str) -> None:
    assert not AddressPolicy().permits(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "address",
    [
        "93.184.216.34",
        "8.8.8.8",
        "2606:4700:4700::1111",
        "2002:808:808::1",  # 6to4 of a public address
        "64:ff9b::808:808",  # NAT64 of a public address: DNS64 gives these on IPv6-only networks
        "::ffff:8.8.8.8",
    ],
)
def test_public_addresses(address: str) -> None:
    assert AddressPolicy().permits(ipaddress.ip_address(address))


def test_allow_list_admits_exactly_its_networks() -> None:
    assert LOOPBACK.permits(ipaddress.ip_address("127.0.0.1"))
    assert LOOPBACK.permits(ipaddress.ip_address("::1"))
    assert not LOOPBACK.permits(ipaddress.ip_address("10.0.0.1"))
    with pytest.raises(ValueError, match="not a network"):
        AddressPolicy.from_entries(["localhost"])


def test_credentials_in_a_callback_url_are_refused() -> None:
    """They would go to the receiver as HTTP Basic auth with every delivery."""
    for url in ("http://user:secret@example.com/hook", "https://token@example.com/hook"):
        with pytest.raises(UnsafeCallback, match="carries credentials"):
            asyncio.run(resolve(url, LOOPBACK))


def test_names_are_resolved_and_checked() -> None:
    async def scenario() -> None:
        with pytest.raises(UnsafeCallback, match=r"127\.0\.0\.1|::1"):
            await resolve("http://localhost:8080/hook", AddressPolicy())
        target = await resolve("http://localhost:8080/hook?x=1", LOOPBACK)
        assert target.address in ("127.0.0.1", "::1")
        assert target.connect_url.host == target.address
        assert target.connect_url.path == "/hook" and target.host_header == "localhost:8080"
        with pytest.raises(UnresolvableCallback):
            await resolve("http://no-such-host.invalid/hook", LOOPBACK)

    asyncio.run(scenario())


@pytest.fixture(scope="module")
def strict_cluster(redis_url: str) -> Iterator[RunningCluster]:
    """A cluster with the production default: no callback network allowed."""
    running = start_cluster(redis_url, "test-ssrf", env={"WORDCAST_CALLBACK_ALLOW": ""})
    yield running
    stop_cluster(running)


@pytest.mark.e2e
@pytest.mark.parametrize(
    "callback",
    [
        "http://127.0.0.1:9/hook",
        "http://10.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://localhost:9/hook",
        "http://user:secret@93.184.216.34/hook",
        "http://[::1]:9/hook",
        "http://[2002:a9fe:a9fe::1]/latest/meta-data/",
        "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",
    ],
)
@pytest.mark.parametrize(
    ("kind", "text"),
    [("query", "white house"), ("query", "(white OR green) house"), ("pattern", "white*house")],
)
def test_registration_refuses_forbidden_callbacks(
    strict_cluster: RunningCluster, redis_url: str, callback: str, kind: str, text: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    before = sorted(client.scan_iter(match="test-ssrf:*"))
    body = {kind: text, "callback_url": callback}
    response = httpx.post(
        f"{strict_cluster.router_url}/subscriptions", json=body, timeout=30, headers=AUTH
    )
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert "does not call" in detail or "carries credentials" in detail
    assert not detail.startswith("subscription 0"), "one subscription is not numbered"
    assert sorted(client.scan_iter(match="test-ssrf:*")) == before


@pytest.mark.e2e
def test_delivery_checks_the_address_it_connects_to(
    receiver: Receiver, redis_url: str, namespace: str
) -> None:
    """A host that resolves to a forbidden address at delivery time gets nothing sent."""
    port = httpx.URL(receiver.url).port
    by_name = f"http://localhost:{port}/hook"

    async def deliver(policy: AddressPolicy, publication: str) -> Dispatcher:
        client = connect(redis_url)
        store = Store(client, namespace)
        sub = Subscription(f"s-{publication}", "x", ("x",), by_name, 0, secret="whsec_" + "A" * 32)
        await store.subscriptions.add(sub)
        outbox = Outbox(client, namespace, 0)
        body = {"subscription_id": sub.id, "publication_id": publication, "text": "x"}
        message = Message(
            (sub.id,),
            "",
            by_name,
            webhook_id([(sub.id, publication)]),
            orjson.dumps({"type": "matches", "matches": [body]}).decode(),
            1,
            time.time(),
        )
        await outbox.put([message])
        dispatcher = Dispatcher(
            outbox,
            store,
            concurrency=2,
            attempts=3,
            timeout_s=5,
            backoff_s=0.01,
            max_backoff_s=0.05,
            address_policy=policy,
        )
        runner = asyncio.create_task(dispatcher.run())
        deadline = time.monotonic() + 10
        while (dispatcher.delivered + dispatcher.failed) == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        await dispatcher.close()
        await client.aclose()
        return dispatcher

    refused = asyncio.run(deliver(AddressPolicy(), "p-refused"))
    assert (refused.delivered, refused.failed) == (0, 1)
    allowed = asyncio.run(deliver(LOOPBACK, "p-allowed"))
    assert (allowed.delivered, allowed.failed) == (1, 0)
    pairs = receiver.pairs()
    assert ("s-p-allowed", "p-allowed") in pairs
    assert ("s-p-refused", "p-refused") not in pairs
