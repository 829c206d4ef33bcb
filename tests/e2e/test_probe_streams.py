"""The second outside probe's defects (issue 39), each against real processes and sockets:
simultaneous stream opens stay within the limits; streams hold no Redis connection while they
wait, so many of them cannot starve a router with a small pool; consumers that read nothing
cost a router bounded memory and are dropped after the drain deadline; a revoked key ends its
streams; 8 MB requests from one tenant do not stall another; input the probe found lenient is
refused; an IPv6 literal callback gets a bracketed Host header; one learning run at a time."""

from __future__ import annotations

import asyncio
import random
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import orjson
import pytest

from tests.helpers import (
    ADMIN,
    RunningCluster,
    eventually,
    extra_router,
    peak_growth,
    service_pid,
    start_cluster,
    status_kib,
    stop_cluster,
)
from wordcast.client import RouterClient

DRAIN_S = 3.0
POOL = 16  # the extra router's Redis connections: far fewer than the streams it serves
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"]


@pytest.fixture(scope="module")
def probed(redis_url: str) -> Iterator[RunningCluster]:
    running = start_cluster(
        redis_url,
        "test-probe-streams",
        matchers=1,
        # Backfill on, so that a lenient backfill_minutes would be taken rather than refused.
        env={
            "WORDCAST_ROUTER_STREAM_DRAIN_TIMEOUT_S": str(DRAIN_S),
            "WORDCAST_ROUTER_BACKFILL_S": "600",
        },
    )
    yield running
    stop_cluster(running)


@pytest.fixture(scope="module")
def small_pool(probed: RunningCluster, redis_url: str) -> Iterator[str]:
    """A second router with a Redis pool of ``POOL`` connections and the default stream limits."""
    with extra_router(
        probed, redis_url, env={"WORDCAST_REDIS_MAX_CONNECTIONS": str(POOL)}
    ) as router:
        yield router


def _key(cluster: RunningCluster, tenant: str) -> tuple[str, str]:
    """A new API key of ``tenant``, and its id."""
    made = httpx.post(
        f"{cluster.router_url}/admin/tenants", json={"tenant": tenant}, headers=ADMIN, timeout=30
    )
    assert made.status_code == 201, made.text
    return made.json()["api_key"], made.json()["key_id"]


def _bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def _subscribe(router: str, key: str, queries: list[str]) -> None:
    answer = httpx.post(
        f"{router}/subscriptions/batch",
        json={"subscriptions": [{"query": q} for q in queries]},
        headers=_bearer(key),
        timeout=60,
    )
    assert answer.status_code == 201, answer.text


def _publish(router: str, key: str, texts: list[str], timeout: float = 120) -> httpx.Response:
    return httpx.post(
        f"{router}/publications",
        json={"publications": [{"text": t} for t in texts]},
        headers=_bearer(key),
        timeout=timeout,
    )


def _open_streams(router: str) -> int:
    count: int = httpx.get(f"{router}/stats", timeout=10).json()["match_streams"]
    return count


def _request(router: str, key: str, last_event_id: str | None = None) -> bytes:
    host = router.removeprefix("http://")
    lines = ["GET /matches/stream HTTP/1.1", f"host: {host}", f"authorization: Bearer {key}"]
    if last_event_id is not None:
        lines.append(f"last-event-id: {last_event_id}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _open(router: str, key: str) -> tuple[int, asyncio.StreamReader, asyncio.StreamWriter]:
    """A stream opened on a connection of our own: its status, and the connection."""
    host, port = router.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(_request(router, key))
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    return status, reader, writer


async def _until_match(reader: asyncio.StreamReader) -> None:
    seen = b""
    while b"event: matches" not in seen:
        seen = seen[-64:] + await reader.read(65536)
        assert seen, "the stream ended before its match"


# -- 1 and 2: admission counted at once; streams hold no Redis connection while they wait --------
def test_simultaneous_opens_stay_within_the_limits_and_streams_do_not_starve_the_pool(
    probed: RunningCluster, small_pool: str
) -> None:
    tenants = [f"crowd{n}" for n in range(8)]
    keys = {t: _key(probed, t)[0] for t in tenants}
    for n, tenant in enumerate(tenants):
        _subscribe(small_pool, keys[tenant], [f"crowdword{n}"])
    bystander = _key(probed, "bystander")[0]
    _subscribe(small_pool, bystander, ["bystanding"])

    async def crowd() -> tuple[Counter[int], list[float]]:
        # 400 opens at once, 50 a tenant: exactly 16 each may stand (the default limit), and the
        # 128 that do hold no Redis connection of the router's 16.
        opened = await asyncio.gather(
            *(_open(small_pool, keys[t]) for t in tenants for _ in range(50)),
            return_exceptions=True,
        )
        statuses = Counter(o[0] if isinstance(o, tuple) else -1 for o in opened)
        standing = [o for o in opened if isinstance(o, tuple) and o[0] == 200]
        # Meanwhile another tenant publishes and lists its subscriptions, as if alone.
        took = []
        for _ in range(5):
            started = time.monotonic()
            published = await asyncio.to_thread(_publish, small_pool, bystander, ["bystanding"])
            assert published.status_code == 202, published.text
            listed = await asyncio.to_thread(
                httpx.get, f"{small_pool}/subscriptions", headers=_bearer(bystander), timeout=30
            )
            assert listed.status_code == 200, listed.text
            took.append(time.monotonic() - started)
        # Each standing stream gets its tenant's next match.
        for n, tenant in enumerate(tenants):
            assert _publish(small_pool, keys[tenant], [f"crowdword{n}"]).status_code == 202
        async with asyncio.timeout(60):
            await asyncio.gather(*(_until_match(reader) for _, reader, _ in standing))
        for _, _, writer in standing:
            writer.close()
        return statuses, took

    statuses, took = asyncio.run(crowd())
    assert statuses == {200: 8 * 16, 429: 8 * 34}, statuses
    assert max(took) < 5, took
    eventually(lambda: _open_streams(small_pool) == 0, 15, 0.1, "the streams counted out")

    async def one_tenant_at_once() -> Counter[int]:
        opened = await asyncio.gather(*(_open(small_pool, keys["crowd0"]) for _ in range(60)))
        for _, _, writer in opened:
            writer.close()
        return Counter(status for status, _, _ in opened)

    assert asyncio.run(one_tenant_at_once()) == {200: 16, 429: 44}
    eventually(lambda: _open_streams(small_pool) == 0, 15, 0.1, "the streams counted out")


# -- 3: consumers that read nothing cost bounded memory and are dropped ------------------------------
def _text(rng: random.Random, word: str, chars: int) -> str:
    words, length = [word], len(word)
    while length < chars - 10:
        words.append(rng.choice(WORDS))
        length += len(words[-1]) + 1
    return " ".join(words)


def _unread_stream(router: str, key: str) -> socket.socket:
    """A stream from the oldest match kept, on a socket with a small buffer that is never read."""
    host, port = router.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(_request(router, key, "0"))
    return sock


def test_consumers_that_read_nothing_cost_bounded_memory_and_are_dropped(
    probed: RunningCluster,
) -> None:
    router = probed.router_url
    key = _key(probed, "slowreader")[0]
    # 20 subscriptions on one word and 200 posts of 16 KB: 4,000 matches, about 70 MB of them.
    _subscribe(router, key, ["zebra"] * 20)
    rng = random.Random(39)
    answer = _publish(router, key, [_text(rng, "zebra", 16_000) for _ in range(200)])
    assert answer.status_code == 202, answer.text

    async def read_all() -> int:
        got = 0
        async with RouterClient(router, api_key=key) as client:
            stream = client.matches("0")
            async with asyncio.timeout(120):
                while got < 4_000:
                    message = await anext(stream)
                    got += len(message.matches)
                    size = len(orjson.dumps(message.body))
                    assert size <= (1 << 20) + 20_000 or len(message.matches) == 1
            await stream.aclose()
        return got

    # A consumer that reads gets every match (in messages of at most about 1 MiB).
    assert asyncio.run(read_all()) == 4_000
    pid = service_pid(router)
    # Each consumer costs the router at most a message's worth (about 1 MiB) and a piece while
    # it is served; once dropped, what it took is used again by the next ones, so the router's
    # memory stays where the first ones took it.
    # The first round also pays for the router's first use of 16 streams' buffers at once
    # (measured 27–31 MiB; 32.2 once on a loaded machine): it gets half a message more each.
    # The allocator settles over the first two rounds (after the module's other tests the second
    # kept 10 MiB more; a run of ten rounds then stayed within 3 MiB), so what is kept is
    # measured from there, over three more rounds.
    warm = 0
    for round_ in range(5):
        with peak_growth(pid) as grown:
            _unread_streams_dropped(router, key, 16)
        bound = 16 * (2.5 if round_ == 0 else 2)
        assert grown[0] < bound, f"16 consumers reading nothing grew the router {grown[0]:.1f} MiB"
        if round_ == 1:
            warm = status_kib(pid, "VmRSS")
    kept = (status_kib(pid, "VmRSS") - warm) / 1024
    assert kept < 8, f"the router kept {kept:.1f} MiB more after 48 more consumers"


def _unread_streams_dropped(router: str, key: str, count: int) -> None:
    """``count`` streams that read nothing, each dropped within the drain deadline although its
    socket stays open."""
    sockets = [_unread_stream(router, key) for _ in range(count)]
    eventually(lambda: _open_streams(router) == count, 15, 0.05, f"{count} streams open")
    eventually(lambda: _open_streams(router) == 0, DRAIN_S + 10, 0.1, "the unread streams dropped")
    assert all(_reset_or_ended(sock) for sock in sockets)


def _reset_or_ended(sock: socket.socket) -> bool:
    """Whether the router gave up the connection: reading what it sent ends in a reset or EOF."""
    sock.settimeout(10)
    try:
        while sock.recv(1 << 20):
            pass
    except ConnectionResetError:
        return True
    finally:
        sock.close()
    return True


# -- 4: a revoked key ends its streams within the revocation poll ----------------------------------
def test_a_revoked_key_ends_its_stream_on_another_router_within_2_s(
    probed: RunningCluster, small_pool: str
) -> None:
    key, key_id = _key(probed, "revoking")
    _subscribe(probed.router_url, key, ["walrus"])
    events: list[tuple[float, str]] = []
    connected = threading.Event()

    def follow() -> None:
        with httpx.stream(
            "GET", f"{small_pool}/matches/stream", headers=_bearer(key), timeout=30
        ) as stream:
            assert stream.status_code == 200
            for line in stream.iter_lines():
                connected.set()
                if line.startswith("event: "):
                    events.append((time.monotonic(), line.removeprefix("event: ")))

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    assert connected.wait(15)
    assert _publish(probed.router_url, key, ["walrus"]).status_code == 202
    eventually(lambda: [e for _, e in events] == ["matches"], 15, 0.05, "the match streamed")
    revoked = httpx.delete(
        f"{probed.router_url}/admin/tenants/revoking/keys/{key_id}", headers=ADMIN, timeout=10
    )
    assert revoked.status_code == 204
    at = time.monotonic()
    reader.join(10)
    assert not reader.is_alive(), "the stream of a revoked key went on"
    assert [e for _, e in events] == ["matches", "revoked"]
    assert events[-1][0] - at <= 2.0, f"ended {events[-1][0] - at:.2f} s after the revocation"
    # The key opens nothing any more.
    refused = httpx.get(f"{small_pool}/matches/stream", headers=_bearer(key), timeout=10)
    assert refused.status_code == 401


# -- 6: one tenant's 8 MB requests do not stall another's --------------------------------------------
def test_8_mb_requests_from_one_tenant_do_not_stall_another(probed: RunningCluster) -> None:
    router = probed.router_url
    heavy = _key(probed, "heavy")[0]
    light = _key(probed, "light")[0]
    _subscribe(router, heavy, ["quagga"])
    _subscribe(router, light, ["lightword"])
    rng = random.Random(6)
    texts = [_text(rng, "okapi", 16_000) for _ in range(500)]  # about 8 MB a request
    took: list[float] = []
    stop = threading.Event()

    def light_publishing() -> None:
        while not stop.is_set():
            started = time.monotonic()
            answer = _publish(router, light, ["lightword now"], timeout=60)
            assert answer.status_code == 202, answer.text
            took.append(time.monotonic() - started)
            time.sleep(0.05)

    with ThreadPoolExecutor(4) as pool:
        lights = pool.submit(light_publishing)
        time.sleep(0.2)
        heavies = [pool.submit(_publish, router, heavy, texts) for _ in range(3)]
        statuses = [h.result().status_code for h in heavies]
        stop.set()
        lights.result()
    # Two fit within the tenant's characters in flight; a third waiting its turn gets a 429.
    assert set(statuses) <= {202, 429}, statuses
    assert 202 in statuses
    assert len(took) >= 5, took
    assert max(took) < 1.0, f"the other tenant's publications took up to {max(took):.2f} s"


# -- 11: input the probe found lenient ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"query": "walrus", "backfill_minutes": True}, "backfill_minutes"),
        ({"query": "walrus", "backfill_minutes": "5"}, "backfill_minutes"),
        ({"query": "wal\x00rus"}, "control characters"),
        ({"pattern": "wal*\x00"}, "control characters"),
        ({"query": "walrus", "callback_url": "http://127.0.0.1:0/hook"}, "port 0"),
    ],
)
def test_lenient_input_is_refused_and_stores_nothing(
    probed: RunningCluster, body: dict[str, object], named: str
) -> None:
    key = _key(probed, "lenient")[0]
    answer = httpx.post(
        f"{probed.router_url}/subscriptions", json=body, headers=_bearer(key), timeout=30
    )
    assert answer.status_code == 422, answer.text
    assert named in answer.text
    listed = httpx.get(f"{probed.router_url}/subscriptions", headers=_bearer(key), timeout=30)
    assert listed.json()["subscriptions"] == []


# -- 8: an IPv6 literal callback gets a Host header a strict receiver accepts ---------------------------
def test_an_ipv6_literal_callback_gets_a_bracketed_host_header(probed: RunningCluster) -> None:
    hosts: list[str] = []
    server = socket.socket(socket.AF_INET6)
    server.bind(("::1", 0))
    server.listen()
    port = server.getsockname()[1]

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(65536)
            for line in head.decode("latin-1").split("\r\n"):
                if line.lower().startswith("host:"):
                    hosts.append(line.split(":", 1)[1].strip())
            conn.sendall(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    key = _key(probed, "ipsix")[0]
    made = httpx.post(
        f"{probed.router_url}/subscriptions",
        json={"query": "heron", "callback_url": f"http://[::1]:{port}/hook"},
        headers=_bearer(key),
        timeout=30,
    )
    assert made.status_code == 201, made.text
    assert _publish(probed.router_url, key, ["a heron"]).status_code == 202
    eventually(lambda: bool(hosts), 30, 0.05, "the delivery over IPv6")
    server.close()
    assert hosts == [f"[::1]:{port}"]


# -- 7: one learning run at a time, stopped with its router -------------------------------------------
def test_one_learning_run_at_a_time_and_none_outlives_its_router(redis_url: str) -> None:
    running = start_cluster(redis_url, "test-probe-learning", matchers=1)
    try:
        with ThreadPoolExecutor(4) as pool:
            answers = list(
                pool.map(
                    lambda _: httpx.post(
                        f"{running.router_url}/admin/learning", headers=ADMIN, timeout=60
                    ),
                    range(4),
                )
            )
        statuses = Counter(a.status_code for a in answers)
        assert statuses == {202: 1, 409: 3}, [a.text for a in answers]
        assert all("under way" in a.text for a in answers if a.status_code == 409)
        eventually(lambda: bool(_learning_processes()), 30, 0.1, "the run's job started")
    finally:
        stop_cluster(running)
    eventually(lambda: not _learning_processes(), 15, 0.2, "no learning process left")


def _learning_processes() -> list[str]:
    found = subprocess.run(
        ["pgrep", "-af", "wordcast learn|org.apache.spark"], capture_output=True, text=True
    )
    return [line for line in found.stdout.splitlines() if "pgrep" not in line]
