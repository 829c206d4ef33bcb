"""The SSRF guard: forbidden callback addresses are refused at registration and at delivery."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

import httpx
import orjson
import pytest

from tests.helpers import (
    AUTH,
    Receiver,
    RunningCluster,
    eventually_async,
    start_cluster,
    stop_cluster,
)
from wordcast.services.matcher.dispatcher import Dispatcher
from wordcast.storage import Store
from wordcast.storage.outbox import Message, Outbox, webhook_id
from wordcast.storage.records import Subscription
from wordcast.storage.redis import connect, connect_sync
from wordcast.webhooks.netguard import AddressPolicy

LOOPBACK = AddressPolicy.from_entries(["127.0.0.0/8", "::1"])


@pytest.fixture(scope="module")
def strict_cluster(redis_url: str) -> Iterator[RunningCluster]:
    """A cluster with the production default: no callback network allowed."""
    running = start_cluster(redis_url, "test-ssrf", env={"WORDCAST_CALLBACK_ALLOW": ""})
    yield running
    stop_cluster(running)


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
        "http://[fec0::1]/hook",  # site-local: global to Python 3.11, not to IANA
    ],
)
@pytest.mark.parametrize(
    ("kind", "text"),
    [("query", "white house"), ("query", "(white OR green) house"), ("pattern", "white*house")],
)
def test_registration_refuses_forbidden_callbacks(
    strict_cluster: RunningCluster, redis_url: str, callback: str, kind: str, text: str
) -> None:
    client = connect_sync(redis_url, decode_responses=False)
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
            orjson.dumps({"type": "matches", "matches": [body]}),
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

        async def done() -> int:
            return dispatcher.delivered + dispatcher.failed

        with contextlib.suppress(AssertionError):  # the outcome is checked by the caller
            await eventually_async(done, 10, what="the delivery done")
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
