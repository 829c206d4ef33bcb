"""The match stream (GET /matches/stream) on a real local cluster: a consumer sees exactly the
oracle's matches, each once, across a 10 s disconnect resumed with Last-Event-ID; a subscription
delivered both ways reaches its webhook and the stream; positions older than what is kept get a
410 (and a consumer overtaken while connected gets 'gone'); idle streams send heartbeats; a
router bounds the streams it serves and the memory a consumer that reads nothing can cost it."""

from __future__ import annotations

import asyncio
import socket
import time
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx
import pytest

from tests.e2e.support import boolean_oracle, publish_posts
from tests.helpers import (
    Receiver,
    RunningCluster,
    eventually,
    extra_router,
    peak_growth,
    service_pid,
)
from wordcast.client import RouterClient, StreamedMatches, StreamLost
from wordcast.corpus.workload import Post, post_boolean_queries, post_queries, sample_posts
from wordcast.storage import Store

AUTH = {"authorization": "Bearer wck_development_only"}
ADMIN = {"authorization": "Bearer wordcast-development-admin-token"}


def _subscribe(cluster: RunningCluster, items: list[dict[str, object]]) -> list[dict[str, object]]:
    answer = httpx.post(
        f"{cluster.router_url}/subscriptions/batch",
        json={"subscriptions": items},
        headers=AUTH,
        timeout=60,
    )
    assert answer.status_code == 201, answer.text
    subs: list[dict[str, object]] = answer.json()["subscriptions"]
    return subs


async def _take(
    stream: AsyncIterator[StreamedMatches], ours: set[str], want: int, got: list[tuple[str, str]]
) -> str:
    """Read until ``want`` matches of ``ours`` are in ``got``; the last message's id."""
    last = ""
    async with asyncio.timeout(120):
        while len(got) < want:
            message = await anext(stream)
            last = message.id
            got += _ours(message, ours)
    return last


async def _following_then_publishing(
    client: RouterClient,
    cluster: RunningCluster,
    posts: list[Post],
    ours: set[str],
    got: list[tuple[str, str]],
) -> AsyncGenerator[StreamedMatches, None]:
    """The stream followed from now, once connected ``posts`` published; the matches of
    ``ours`` in its first message put in ``got``."""
    connected = asyncio.Event()
    stream = client.matches(on_connect=lambda _: connected.set())
    reading = asyncio.ensure_future(anext(stream))
    await asyncio.wait_for(connected.wait(), 30)
    await asyncio.to_thread(publish_posts, cluster, posts)
    got += _ours(await reading, ours)
    return stream


def _ours(message: StreamedMatches, ours: set[str]) -> list[tuple[str, str]]:
    return [
        (m["subscription_id"], m["publication_id"])
        for m in message.matches
        if m["subscription_id"] in ours
    ]


def test_a_consumer_that_leaves_for_10_s_and_resumes_misses_nothing_and_sees_nothing_twice(
    cluster: RunningCluster,
) -> None:
    posts = list({p.text: p for p in sample_posts(2_000, seed=1207)}.values())
    queries = post_queries(posts, 40, seed=1208) + post_boolean_queries(posts, 10, seed=1209)
    subs = _subscribe(cluster, [{"query": q} for q in queries])
    assert all(sub["delivery"] == ["stream"] and sub["callback_url"] is None for sub in subs)
    by_id = {str(sub["id"]): str(sub["query"]) for sub in subs}
    first, second = posts[:1_000], posts[1_000:]
    expected_first = boolean_oracle(by_id, first)
    expected = expected_first | boolean_oracle(by_id, second)
    assert len(expected_first) >= 50
    assert len(expected) - len(expected_first) >= 50

    async def consume() -> list[tuple[str, str]]:
        got: list[tuple[str, str]] = []
        async with RouterClient(cluster.router_url) as client:
            stream = await _following_then_publishing(client, cluster, first, set(by_id), got)
            last = await _take(stream, set(by_id), len(expected_first), got)
            await stream.aclose()  # the connection goes; the matches go on
            away = time.monotonic()
            await asyncio.to_thread(publish_posts, cluster, second)
            await asyncio.sleep(10 - (time.monotonic() - away))
            resumed = client.matches(last)
            await _take(resumed, set(by_id), len(expected), got)
            # Anything more now would be a duplicate: wait a little for one.
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(1.5):
                    await anext(resumed)
            await resumed.aclose()
        return got

    got = asyncio.run(consume())
    counted = Counter(got)
    assert set(counted) == expected
    assert max(counted.values()) == 1


def test_delivery_both_ways_reaches_the_webhook_and_the_stream(
    cluster: RunningCluster, receiver: Receiver
) -> None:
    posts = sample_posts(400, seed=1210)
    queries = post_queries(posts, 10, seed=1211)
    items: list[dict[str, object]] = [
        {"query": q, "callback_url": receiver.hook, "delivery": ["webhook", "stream"]}
        for q in queries
    ]
    subs = _subscribe(cluster, items)
    assert all(sub["delivery"] == ["webhook", "stream"] for sub in subs)
    assert all(sub["callback_url"] == receiver.hook for sub in subs)
    by_id = {str(sub["id"]): str(sub["query"]) for sub in subs}
    expected = boolean_oracle(by_id, posts)
    assert expected
    offset = receiver.count()

    async def consume() -> list[tuple[str, str]]:
        got: list[tuple[str, str]] = []
        async with RouterClient(cluster.router_url) as client:
            stream = await _following_then_publishing(client, cluster, posts, set(by_id), got)
            await _take(stream, set(by_id), len(expected), got)
            await stream.aclose()
        return got

    assert Counter(asyncio.run(consume())) == Counter(expected)
    eventually(lambda: set(receiver.pairs(offset)) >= expected, 60, 0.2, "the webhook copies")
    assert Counter(p for p in receiver.pairs(offset) if p[0] in by_id) == Counter(expected)


def _subscriptions(cluster: RunningCluster) -> list[dict[str, Any]]:
    """The tenant's subscriptions as stored; their counters aside, which deliveries of earlier
    tests' matches may still move."""
    listed = httpx.get(f"{cluster.router_url}/subscriptions", headers=AUTH, timeout=10).json()
    return [{k: v for k, v in sub.items() if k != "counters"} for sub in listed["subscriptions"]]


@pytest.mark.parametrize(
    ("item", "problem"),
    [
        ({"query": "a b", "delivery": ["webhook"]}, "delivery 'webhook' needs a callback_url"),
        (
            {"query": "a b", "callback_url": "http://127.0.0.1:9/h", "delivery": ["stream"]},
            "does not include 'webhook'",
        ),
        ({"query": "a b", "delivery": ["stream", "stream"]}, "names 'stream' twice"),
        ({"query": "a b", "delivery": []}, "at least 1 item"),
        ({"query": "a b", "delivery": ["email"]}, "'webhook' or 'stream'"),
    ],
)
def test_a_delivery_that_cannot_be_made_is_a_422_naming_it(
    cluster: RunningCluster, item: dict[str, object], problem: str
) -> None:
    before = _subscriptions(cluster)
    answer = httpx.post(f"{cluster.router_url}/subscriptions", json=item, headers=AUTH, timeout=10)
    assert answer.status_code == 422
    assert problem in answer.text
    assert _subscriptions(cluster) == before


def _tenant_key(cluster: RunningCluster, tenant: str) -> dict[str, str]:
    answer = httpx.post(
        f"{cluster.router_url}/admin/tenants", json={"tenant": tenant}, headers=ADMIN, timeout=10
    )
    assert answer.status_code == 201, answer.text
    return {"authorization": f"Bearer {answer.json()['api_key']}"}


def test_positions_no_longer_kept_are_a_410_and_an_overtaken_consumer_is_told(
    cluster: RunningCluster, redis_url: str
) -> None:
    headers = _tenant_key(cluster, "lagging")
    url = f"{cluster.router_url}/matches/stream"

    async def fill(count: int, most: int) -> list[str]:
        store = Store.connect(redis_url, cluster.namespace)
        try:
            streams = store.match_streams
            bodies = [
                (f"msg_{time.time_ns()}_{i}", f'{{"matches": [{{"n": {i}}}]}}')
                for i in range(count)
            ]
            await streams.append("lagging", bodies, retention_s=3600, most=most)
            key = streams.key("lagging")
            return [entry_id for entry_id, _ in await streams.client.xrange(key)]
        finally:
            await store.aclose()

    kept = asyncio.run(fill(10, most=4))
    assert len(kept) == 4
    gone = httpx.get(url, headers=headers | {"last-event-id": "1-0"}, timeout=10)
    assert gone.status_code == 410
    assert "no longer kept" in gone.json()["detail"]
    assert "at most 4 messages" in gone.json()["detail"]
    ahead = httpx.get(url, headers=headers | {"last-event-id": "99999999999999-0"}, timeout=10)
    assert ahead.status_code == 410
    assert "past the newest match" in ahead.json()["detail"]
    bad = httpx.get(url, headers=headers | {"last-event-id": "yesterday"}, timeout=10)
    assert bad.status_code == 422
    assert "not a match stream position" in bad.text

    async def oldest_then_overtaken() -> tuple[list[str], str]:
        seen: list[str] = []
        async with RouterClient(cluster.router_url, api_key=headers["authorization"][7:]) as c:
            stream = c.matches("0")  # from the oldest kept: the 4 left
            for _ in range(4):
                seen.append((await anext(stream)).id)
            await stream.aclose()
            # Resuming after the first of them, once 10 more have pushed it out:
            await fill(10, most=4)
            resumed = c.matches(seen[0])
            with pytest.raises(StreamLost) as lost:
                await anext(resumed)
        return seen, str(lost.value)

    seen, lost = asyncio.run(oldest_then_overtaken())
    assert seen == kept
    assert "cannot resume after" in lost


def _raw_stream(url: str, headers: dict[str, str], rcvbuf: int = 0) -> socket.socket:
    """An SSE request on a socket of our own, its answer left unread."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect((host, int(port)))
    lines = ["GET /matches/stream HTTP/1.1", f"host: {host}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    return sock


def test_idle_streams_get_heartbeats_and_a_router_bounds_streams_and_slow_consumers(
    cluster: RunningCluster, redis_url: str
) -> None:
    headers = _tenant_key(cluster, "slow")
    with extra_router(
        cluster, redis_url, stream_heartbeat_s="1", streams_per_tenant="3", streams_max="4"
    ) as router:
        with httpx.stream("GET", f"{router}/matches/stream", headers=headers, timeout=10) as idle:
            assert idle.status_code == 200
            assert idle.headers["content-type"].startswith("text/event-stream")
            started = time.monotonic()
            text = ""
            for chunk in idle.iter_text():
                text += chunk
                if text.count(": heartbeat") >= 2:
                    break
            assert 1.5 < time.monotonic() - started < 10
            assert text.startswith("id: ")

        # 30 MB waiting for a consumer that reads nothing: the router keeps reading only as
        # fast as the socket drains, so its memory stays about one read.
        async def fill() -> None:
            store = Store.connect(redis_url, cluster.namespace)
            try:
                body = '{"matches": [{"text": "' + "x" * 100_000 + '"}]}'
                for batch in range(30):
                    messages = [(f"msg_slow_{batch}_{i}", body) for i in range(10)]
                    await store.match_streams.append("slow", messages, 3600, 100_000)
            finally:
                await store.aclose()

        asyncio.run(fill())
        pid = service_pid(router)
        with peak_growth(pid) as grown:
            sockets = [_raw_stream(router, headers | {"last-event-id": "0"}, 4096)]
            time.sleep(3)
        assert grown[0] < 12, f"the router grew {grown[0]:.1f} MiB for a consumer reading nothing"
        # A tenant's 4th stream on this router, and then any 5th, are refused with a 429.
        sockets += [_raw_stream(router, headers) for _ in range(2)]
        _streams_open(router, 3)
        over = _status_and_detail(router, headers)
        assert over[0] == 429
        assert "WORDCAST_ROUTER_STREAMS_PER_TENANT" in over[1]
        sockets.append(_raw_stream(router, _tenant_key(cluster, "other")))
        _streams_open(router, 4)
        full = _status_and_detail(router, AUTH)
        assert full[0] == 429
        assert "WORDCAST_ROUTER_STREAMS_MAX" in full[1]
        for sock in sockets:
            sock.close()
        # Streams closed by their consumers are counted out again.
        _streams_open(router, 0)
        assert _status_and_detail(router, headers)[0] == 200


def _streams_open(router: str, count: int) -> None:
    eventually(
        lambda: httpx.get(f"{router}/stats", timeout=10).json()["match_streams"] == count,
        15,
        0.05,
        f"{count} match streams open",
    )


def _status_and_detail(router: str, headers: dict[str, str]) -> tuple[int, str]:
    """The answer's status, and its detail when refused (a stream served is left at once)."""
    with httpx.stream("GET", f"{router}/matches/stream", headers=headers, timeout=10) as answer:
        if answer.status_code != 200:
            answer.read()
            return answer.status_code, answer.json()["detail"]
        return answer.status_code, ""
