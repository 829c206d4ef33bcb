"""What an outside probe of a local cluster found, each defect against real processes and sockets.

Bodies are bounded as they stream in, on every service, and strangers are refused before their
body is read; a matcher reads only the start of a webhook's answer; publications stay within
their tenant unless sent to a shared stream; request headers and bodies have deadlines; the
supervisor stops Redis last even after restarting it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
import redis

from tests.helpers import (
    AUTH,
    MIB,
    HugeAnswers,
    Receiver,
    RunningCluster,
    chunked,
    eventually,
    internal_token,
    peak_growth,
    read_response,
    service_pid,
    start_cluster,
    stop_cluster,
    tenant_key,
)
from wordcast import limits
from wordcast.defaults import DEFAULT_ADMIN_TOKEN
from wordcast.local.supervisor import free_port
from wordcast.storage.outbox import webhook_id
from wordcast.storage.redis import connect_sync
from wordcast.webhooks.payload import matches_of

ADMIN = {"authorization": f"Bearer {DEFAULT_ADMIN_TOKEN}"}
HEADER_TIMEOUT_S = 2.0
BODY_TIMEOUT_S = 3.0


@pytest.fixture(scope="module")
def hardened(redis_url: str) -> Iterator[RunningCluster]:
    """One matcher, and short header and body deadlines so the tests need not wait long."""
    deadlines = {
        f"WORDCAST_{service}_{name}": str(value)
        for service in ("ROUTER", "MATCHER")
        for name, value in (
            ("HEADER_TIMEOUT_S", HEADER_TIMEOUT_S),
            ("BODY_TIMEOUT_S", BODY_TIMEOUT_S),
        )
    }
    running = start_cluster(redis_url, "test-hardening", matchers=1, env=deadlines)
    yield running
    stop_cluster(running)


def _json_text_body(total: int) -> Iterator[bytes]:
    """A well-formed publication whose text makes the body ``total`` bytes long."""
    return chunked(total, head=b'{"text": "', tail=b'"}')


# -- 1. bodies bounded as they stream in, strangers refused before their body is read -------------
def test_a_strangers_chunked_body_is_refused_before_it_is_read(hardened: RunningCluster) -> None:
    pid = service_pid(hardened.router_url)
    with peak_growth(pid) as grown:
        response = httpx.post(
            f"{hardened.router_url}/publications",
            content=_json_text_body(64 * MIB),
            headers={"content-type": "application/json"},
            timeout=120,
        )
    assert response.status_code == 401, response.text
    assert grown[0] < 24, f"the router's memory peaked {grown[0]:.0f} MiB higher"


def test_a_chunked_body_over_the_limit_is_a_413(hardened: RunningCluster) -> None:
    pid = service_pid(hardened.router_url)
    with peak_growth(pid) as grown:
        response = httpx.post(
            f"{hardened.router_url}/publications",
            content=_json_text_body(limits.MAX_REQUEST_BYTES + 4 * MIB),
            headers=AUTH | {"content-type": "application/json"},
            timeout=120,
        )
    assert response.status_code == 413, response.text
    assert f"{limits.MAX_REQUEST_BYTES}-byte limit" in response.json()["detail"]
    assert grown[0] < limits.MAX_REQUEST_BYTES / MIB + 24


def test_a_declared_body_over_the_limit_is_a_413(hardened: RunningCluster) -> None:
    response = httpx.post(
        f"{hardened.router_url}/subscriptions",
        content=b"x" * (limits.MAX_REQUEST_BYTES + 1),
        headers=AUTH | {"content-type": "application/json"},
        timeout=60,
    )
    assert response.status_code == 413, response.text


def test_matchers_bound_bodies_too(hardened: RunningCluster, redis_url: str) -> None:
    matcher = hardened.matcher_urls[0]
    pid = service_pid(matcher)
    with peak_growth(pid) as grown:
        stranger = httpx.post(
            f"{matcher}/internal/match",
            content=chunked(48 * MIB, head=b'{"publications": [{"id": "x", "terms": [], "text": "'),
            headers={"content-type": "application/json"},
            timeout=120,
        )
    assert stranger.status_code == 401, stranger.text
    assert grown[0] < 24, f"the matcher's memory peaked {grown[0]:.0f} MiB higher"

    token = internal_token(hardened, redis_url)
    too_large = httpx.post(
        f"{matcher}/internal/match",
        content=chunked(limits.MAX_ROUTED_BATCH_BYTES + MIB, head=b'{"publications": [{"text": "'),
        headers={"content-type": "application/json", "authorization": f"Bearer {token}"},
        timeout=120,
    )
    assert too_large.status_code == 413, too_large.text


# -- deadlines for headers and bodies --------------------------------------------------------------
def _closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"") -> float | None:
    """Seconds until the server closed ``sock`` (None if it had not after ``seconds``), sending
    ``trickle`` a byte every 0.25 s meanwhile."""
    started = time.monotonic()
    sock.settimeout(0.25)
    sent = 0
    while time.monotonic() - started < seconds:
        try:
            if sock.recv(4096) == b"":
                return time.monotonic() - started
        except TimeoutError:
            pass
        except ConnectionResetError:
            return time.monotonic() - started
        if sent < len(trickle):
            with contextlib.suppress(OSError):
                sock.sendall(trickle[sent : sent + 1])
            sent += 1
    return None


@pytest.mark.parametrize("service", ["router", "matcher"])
def test_slow_or_silent_headers_are_cut_off(hardened: RunningCluster, service: str) -> None:
    url = httpx.URL(hardened.router_url if service == "router" else hardened.matcher_urls[0])
    header = b"POST /publications HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"y" * 200
    sockets = [socket.create_connection((url.host, url.port)) for _ in range(40)]
    try:
        silent = sockets[0]
        trickling = sockets[1]
        trickling.sendall(header[:10])
        waits = [_closed_within(silent, 3 * HEADER_TIMEOUT_S)]
        waits.append(_closed_within(trickling, 3 * HEADER_TIMEOUT_S, trickle=header[10:]))
        # Meanwhile (and with 38 more idle sockets open) the service answers others.
        assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
        waits += [_closed_within(s, 1.0) for s in sockets[2:]]
    finally:
        for sock in sockets:
            sock.close()
    assert all(w is not None and w < 2 * HEADER_TIMEOUT_S for w in waits), waits


def test_a_body_that_trickles_in_is_a_408(hardened: RunningCluster) -> None:
    url = httpx.URL(hardened.router_url)
    body = b'{"text": "white house"}'
    request = (
        b"POST /publications HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Authorization: {AUTH['authorization']}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    )
    with socket.create_connection((url.host, url.port)) as sock:
        sock.sendall(request + body[:3])
        sock.settimeout(3 * BODY_TIMEOUT_S)
        started = time.monotonic()
        answer = read_response(sock)
        took = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"did not arrive within" in answer
    assert BODY_TIMEOUT_S - 1 < took < 2 * BODY_TIMEOUT_S


def test_a_webhook_answering_with_a_huge_body_costs_the_matcher_nothing(
    hardened: RunningCluster, redis_url: str
) -> None:
    hook = HugeAnswers()
    try:
        created = httpx.post(
            f"{hardened.router_url}/subscriptions",
            json={"query": "enormous answer", "callback_url": hook.url},
            headers=AUTH,
            timeout=30,
        )
        assert created.status_code == 201, created.text
        pid = service_pid(hardened.matcher_urls[0])
        with peak_growth(pid) as grown:
            for k in range(3):
                published = httpx.post(
                    f"{hardened.router_url}/publications",
                    json={"id": f"huge-{k}", "text": "an enormous answer comes back"},
                    headers=AUTH,
                    timeout=30,
                )
                assert published.status_code == 202, published.text
            eventually(
                lambda: hook.requests >= 3 and not hardened.pending_deliveries(),
                what="the three deliveries made",
            )
        # Delivered (a 200 is all it takes), and without reading what followed it.
        assert hook.requests == 3
        assert grown[0] < 32, f"the matcher's memory peaked {grown[0]:.0f} MiB higher"
        assert hook.sent < 3 * 32 * MIB, f"{hook.sent / MIB:.0f} MiB went out: it was read"
        httpx.delete(
            f"{hardened.router_url}/subscriptions/{created.json()['id']}", headers=AUTH, timeout=30
        )
    finally:
        hook.close()


# -- 3. publications stay within their tenant; shared streams are explicit ------------------------
def _subscribe(cluster: RunningCluster, key: str, query: str, hook: str, **extra: str) -> str:
    response = httpx.post(
        f"{cluster.router_url}/subscriptions",
        json={"query": query, "callback_url": hook, **extra},
        headers={"authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    assert response.json().get("stream") == extra.get("stream")
    sub_id: str = response.json()["id"]
    return sub_id


def _publish(cluster: RunningCluster, key: str, body: dict[str, object]) -> httpx.Response:
    return httpx.post(
        f"{cluster.router_url}/publications",
        json=body,
        headers={"authorization": f"Bearer {key}"},
        timeout=30,
    )


def _delivered(receiver: Receiver, sub_ids: set[str]) -> list[tuple[str, dict[str, object]]]:
    """(webhook-id, match) for every match the receiver got for ``sub_ids``."""
    raw = httpx.get(f"{receiver.url}/deliveries/raw", timeout=30).json()
    found = []
    for request in raw:
        message = orjson.loads(request["body"])
        # A message names its publisher and stream once, for all its matches.
        named = {"publisher": message["publisher"], "stream": message["stream"]}
        found += [
            (request["headers"]["webhook-id"], match | named)
            for match in matches_of(message)
            if match["subscription_id"] in sub_ids
        ]
    return found


def _settled(
    cluster: RunningCluster, receiver: Receiver, sub_ids: set[str], count: int
) -> list[tuple[str, dict[str, object]]]:
    def settled() -> list[tuple[str, dict[str, object]]]:
        found = _delivered(receiver, sub_ids)
        return found if len(found) >= count and not cluster.pending_deliveries() else []

    return eventually(settled, what=f"{count} matches delivered")


def test_a_tenants_publications_reach_only_its_own_subscriptions(
    hardened: RunningCluster, receiver: Receiver
) -> None:
    alice, bob = tenant_key(hardened, "alice"), tenant_key(hardened, "bob")
    mine = _subscribe(hardened, alice, "quokka sighting", receiver.hook)
    # Bob publishes Alice's words under the id Alice uses next.
    answer = _publish(hardened, bob, {"id": "shared-1", "text": "a quokka sighting downtown"})
    assert answer.status_code == 202
    assert answer.json()["routed"] == 1
    answer = _publish(hardened, alice, {"id": "shared-1", "text": "quokka sighting, reported"})
    assert answer.status_code == 202
    found = _settled(hardened, receiver, {mine}, 1)
    assert [(m["publisher"], m["stream"], m["text"]) for _, m in found] == [
        ("alice", None, "quokka sighting, reported")
    ]
    # Bob's copy of the id would have had another webhook-id: ids are the publisher's.
    pair = [(mine, "shared-1")]
    assert found[0][0] == webhook_id(pair, "alice") != webhook_id(pair, "bob")


def test_shared_streams_carry_publications_across_tenants_by_grant(
    hardened: RunningCluster, receiver: Receiver
) -> None:
    carol, dave = tenant_key(hardened, "carol"), tenant_key(hardened, "dave")
    admin = f"{hardened.router_url}/admin/streams"
    assert httpx.post(admin, json={"stream": "wire"}, headers=ADMIN, timeout=30).status_code == 201
    again = httpx.post(admin, json={"stream": "wire"}, headers=ADMIN, timeout=30)
    assert again.status_code == 409
    # No grant yet: Carol may not subscribe, Dave may not publish.
    refused = httpx.post(
        f"{hardened.router_url}/subscriptions",
        json={"query": "wombat", "callback_url": receiver.hook, "stream": "wire"},
        headers={"authorization": f"Bearer {carol}"},
        timeout=30,
    )
    assert refused.status_code == 403, refused.text
    assert _publish(hardened, dave, {"stream": "wire", "text": "wombat"}).status_code == 403
    for tenant, rights in (("carol", {"subscribe": True}), ("dave", {"publish": True})):
        granted = httpx.put(f"{admin}/wire/grants/{tenant}", json=rights, headers=ADMIN, timeout=30)
        assert granted.status_code == 200, granted.text
    listening = _subscribe(hardened, carol, "wombat burrow", receiver.hook, stream="wire")
    own = _subscribe(hardened, carol, "wombat burrow", receiver.hook)

    sent = _publish(hardened, dave, {"stream": "wire", "id": "w-1", "text": "a wombat burrow"})
    assert sent.status_code == 202, sent.text
    # Not to the stream: Dave's own subscriptions only (he has none), not Carol's.
    assert _publish(hardened, dave, {"id": "w-2", "text": "wombat burrow"}).status_code == 202
    # Carol's own publication reaches her own subscription, not her stream subscription.
    assert _publish(hardened, carol, {"id": "w-1", "text": "wombat burrow here"}).status_code == 202
    found = _settled(hardened, receiver, {listening, own}, 2)
    seen = sorted(
        (m["subscription_id"], m["publisher"], m["stream"], m["publication_id"]) for _, m in found
    )
    assert seen == sorted([(listening, "dave", "wire", "w-1"), (own, "carol", None, "w-1")])
    assert len({wid for wid, _ in found}) == 2  # one id, two publishers: two webhook-ids

    # Taking the subscribe grant away deletes Carol's subscription to the stream.
    revoked = httpx.delete(f"{admin}/wire/grants/carol", headers=ADMIN, timeout=30)
    assert revoked.status_code == 204
    gone = httpx.get(
        f"{hardened.router_url}/subscriptions/{listening}",
        headers={"authorization": f"Bearer {carol}"},
        timeout=30,
    )
    assert gone.status_code == 404
    shown = httpx.get(f"{admin}/wire", headers=ADMIN, timeout=30).json()
    assert shown["grants"] == [{"tenant": "dave", "publish": True, "subscribe": False}]
    assert httpx.delete(f"{admin}/wire", headers=ADMIN, timeout=30).status_code == 204
    assert httpx.get(f"{admin}/wire", headers=ADMIN, timeout=30).status_code == 404


@pytest.mark.parametrize("bad_id", ["a\x00b", "line\nbreak", "tab\there", "\u200bzero"])
def test_publication_ids_must_be_printable(hardened: RunningCluster, bad_id: str) -> None:
    response = _publish(hardened, AUTH["authorization"].split()[1], {"id": bad_id, "text": "x"})
    assert response.status_code == 422, response.text
    assert "printable" in response.text


def test_webhook_ids_hash_an_unambiguous_encoding() -> None:
    """Separators inside ids once let one set of matches hash like another."""
    one = webhook_id([("s1", "p1\ns2\x00p2")])
    two = webhook_id([("s1", "p1"), ("s2", "p2")])
    assert one != two
    assert webhook_id([("s", "p")], "alice") != webhook_id([("s", "p")], "bob")
    assert webhook_id([("s", "p")], "a", "b") != webhook_id([("s", "p")], "ab", "")


# -- 5. Ctrl-C after a Redis restart stops Redis last ----------------------------------------------
def _dead(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def test_redis_restarted_under_the_supervisor_still_stops_last() -> None:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"} | {"PYTHONUNBUFFERED": "1"}
    port = free_port()
    up = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "wordcast",
            "up",
            "--no-demo",
            "--matchers",
            "1",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert up.stdout is not None
    lines: list[str] = []
    try:
        for line in up.stdout:
            lines.append(line)
            if "wordcast is up" in line:
                break
        redis_url = next(m.group(1) for x in lines if (m := re.match(r"redis\s+(\S+)", x)))
        matcher_url = next(m.group(1) for x in lines if (m := re.match(r"matcher-0 (\S+)", x)))
        threading.Thread(
            target=lambda: [lines.append(x) for x in up.stdout or ()], daemon=True
        ).start()
        client = connect_sync(redis_url, socket_timeout=1, decode_responses=False)
        os.kill(int(client.info("server")["process_id"]), signal.SIGKILL)

        def restarted() -> int:
            """The new Redis's process id, once it and the matcher answer again."""
            with contextlib.suppress(redis.RedisError, httpx.HTTPError):
                pid = int(client.info("server")["process_id"])
                if httpx.get(f"{matcher_url}/readyz", timeout=1).status_code == 200:
                    return pid
            return 0

        redis_pid = eventually(restarted, 30, 0.2, "Redis restarted by the supervisor")
        matcher_pid = service_pid(matcher_url)
        up.send_signal(signal.SIGINT)
        redis_first = []

        def matcher_gone() -> bool:
            if _dead(redis_pid) and not _dead(matcher_pid):
                redis_first.append(True)
            return _dead(matcher_pid)

        try:
            eventually(matcher_gone, 30, 0.005, "the matcher stopped")
        except AssertionError as exc:  # say what the supervisor and its services said
            raise AssertionError(f"{exc}; wordcast up said:\n{''.join(lines[-60:])}") from None
        assert not redis_first, "Redis stopped before the matcher"
        up.wait(30)
    finally:
        if up.poll() is None:
            up.kill()
    assert "could not hand on" not in "".join(lines)
