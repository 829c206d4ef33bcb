"""A fuzzing pass over a real local cluster, over real HTTP, with the services' memory watched.

Schemathesis reads the router's OpenAPI document from the running router and walks its links
(a subscription made, read, its secret rotated, deleted; a tenant's key made, listed, revoked; a
shared stream made, granted, shown, deleted) with generated valid and invalid requests; no answer
may be a 5xx or stray from the schema. Then slow and oversized clients all at once: silent and
trickling sockets, chunked bodies far over the limit with and without a key, bodies that never
finish, and a webhook answering with an endless body. Throughout, the kernel's high-water mark of
each service's resident memory stays under ``MEMORY_BOUND_MIB``, and the cluster still answers.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.helpers import (
    AUTH,
    MIB,
    HugeAnswers,
    Receiver,
    RunningCluster,
    chunked,
    eventually,
    read_response,
    service_pid,
    start_cluster,
    status_kib,
    stop_cluster,
)
from wordcast import limits
from wordcast.defaults import DEFAULT_ADMIN_TOKEN

# What each service may reach, at its peak, while it is fuzzed and flooded (RSS, MiB). At rest a
# router holds about 110 MiB and a matcher 110 MiB; one request body in flight is at most 8 MiB
# (32 MiB for a matcher's routed batch), and Python keeps some of what it freed.
MEMORY_BOUND_MIB = 200
ADMIN = {"authorization": f"Bearer {DEFAULT_ADMIN_TOKEN}"}


@pytest.fixture(scope="module")
def fuzzed(redis_url: str) -> Iterator[RunningCluster]:
    env = {
        "WORDCAST_ROUTER_HEADER_TIMEOUT_S": "2",
        "WORDCAST_ROUTER_BODY_TIMEOUT_S": "3",
        "WORDCAST_MATCHER_HEADER_TIMEOUT_S": "2",
        "WORDCAST_MATCHER_BODY_TIMEOUT_S": "3",
    }
    running = start_cluster(redis_url, "test-fuzz", matchers=1, env=env)
    pids = [service_pid(running.router_url), service_pid(running.matcher_urls[0])]
    for pid in pids:
        with open(f"/proc/{pid}/clear_refs", "w") as refs:
            refs.write("5")  # the high-water mark counts from here
    yield running
    peaks = [status_kib(pid, "VmHWM") / 1024 for pid in pids]
    stop_cluster(running)
    assert max(peaks) < MEMORY_BOUND_MIB, f"peak RSS of router, matcher: {peaks} MiB"


# Who may call what: the admin operations want the admin token, the rest a tenant's key.
ADMIN_PATHS = r"^/(admin|stats/matchers)"


def _fuzzable_schema(cluster: RunningCluster, hook: str, path: Path) -> Path:
    """The router's OpenAPI document, with subscriptions that can be stored: generated callback
    hosts do not resolve here (no network) and generated queries are mostly stop words, so
    without this nearly every subscription is refused and the links after it never walked.
    Only valid subscriptions are narrowed; everything else is fuzzed as the schema says."""
    schema = httpx.get(f"{cluster.router_url}/openapi.json", timeout=30).json()
    callback = {"type": "string", "enum": [hook]}
    kinds = {
        "query": ["white house", "python web", "(json OR yaml) parser -slow", "fast http"],
        "pattern": ["pie*tea", "json?pars", "web*frame"],
    }
    schema["components"]["schemas"]["SubscriptionIn"] = {
        "oneOf": [
            {
                "type": "object",
                "properties": {kind: {"type": "string", "enum": texts}, "callback_url": callback},
                "required": [kind, "callback_url"],
                "additionalProperties": False,
            }
            for kind, texts in kinds.items()
        ]
    }
    # Not fuzzed here: the match stream answers with a stream that never ends, and a learning
    # run starts a Spark job (test_match_stream and test_console's own tests cover them).
    schema["paths"].pop("/matches/stream")
    schema["paths"]["/admin/learning"].pop("post")
    written = path / "openapi.json"
    written.write_bytes(orjson.dumps(schema))
    return written


@pytest.mark.parametrize(
    ("credential", "which"),
    [(AUTH, "--exclude-path-regex"), (ADMIN, "--include-path-regex")],
    ids=["tenant", "admin"],
)
def test_stateful_fuzzing_over_the_whole_api(
    fuzzed: RunningCluster,
    receiver: Receiver,
    credential: dict[str, str],
    which: str,
    tmp_path: Path,
) -> None:
    """Schemathesis's own engine (its command line), which is built for a real server whose
    answers depend on what earlier calls stored: examples of every operation, then chains
    along the schema's links."""
    run = subprocess.run(
        [
            str(Path(sys.executable).with_name("schemathesis")),
            "run",
            str(_fuzzable_schema(fuzzed, receiver.hook, tmp_path)),
            f"--url={fuzzed.router_url}",
            "--phases=examples,fuzzing,stateful",
            "--checks=not_a_server_error,status_code_conformance,response_schema_conformance",
            f"{which}={ADMIN_PATHS}",
            "--header",
            f"Authorization:{credential['authorization']}",
            "--max-examples=25",
            "--seed=7",
            "--workers=1",
            "--generation-database=none",
            "--request-timeout=30",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    covered = re.search(r"API Links:\s+(\d+) covered", run.stdout)
    assert covered, run.stdout[-3000:]
    assert int(covered.group(1)) >= 3, run.stdout[-3000:]
    assert httpx.get(f"{fuzzed.router_url}/readyz", timeout=10).status_code == 200


def _slowloris(address: tuple[str, int], seconds: float) -> int:
    """Hold a socket open sending a header byte at a time; returns how many bytes it sent."""
    sent = 0
    with contextlib.suppress(OSError), socket.create_connection(address) as sock:
        sock.sendall(b"POST /publications HTTP/1.1\r\nHost: x\r\n")
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            sock.sendall(b"X")
            sent += 1
            time.sleep(0.2)
    return sent


def _unfinished_body(address: tuple[str, int], seconds: float) -> bytes:
    """Declare a body and send only part of it; returns the answer."""
    with socket.create_connection(address) as sock:
        sock.sendall(
            b"POST /publications HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Authorization: {AUTH['authorization']}\r\nContent-Length: 1000000\r\n\r\n".encode()
            + b'{"text": "'
        )
        sock.settimeout(seconds)
        try:
            return read_response(sock)
        except OSError:
            return b""


def _oversized(url: str, total: int, headers: dict[str, str]) -> int:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.post(
            url,
            content=chunked(total, head=b'{"text": "', tail=b'"}'),
            headers=headers | {"content-type": "application/json"},
            timeout=120,
        ).status_code
    return 0


def test_slow_and_oversized_clients_all_at_once(fuzzed: RunningCluster) -> None:
    router = httpx.URL(fuzzed.router_url)
    matcher = httpx.URL(fuzzed.matcher_urls[0])
    hook = HugeAnswers()
    try:
        created = httpx.post(
            f"{fuzzed.router_url}/subscriptions",
            json={"query": "flood answer", "callback_url": hook.url},
            headers=AUTH,
            timeout=30,
        )
        assert created.status_code == 201, created.text
        with concurrent.futures.ThreadPoolExecutor(max_workers=96) as pool:
            slow = [
                pool.submit(_slowloris, (url.host, url.port), 6.0)
                for url in (router, matcher)
                for _ in range(30)
            ]
            stalled = [
                pool.submit(_unfinished_body, (router.host, router.port), 10) for _ in range(8)
            ]
            publications = f"{fuzzed.router_url}/publications"
            strangers = [pool.submit(_oversized, publications, 48 * MIB, {}) for _ in range(6)]
            too_large = limits.MAX_REQUEST_BYTES + 2 * MIB
            members = [pool.submit(_oversized, publications, too_large, AUTH) for _ in range(4)]
            internal = [
                pool.submit(_oversized, f"{fuzzed.matcher_urls[0]}/internal/match", 48 * MIB, {})
                for _ in range(4)
            ]
            for k in range(20):
                answer = httpx.post(
                    publications,
                    json={"id": f"flood-{k}", "text": "a flood answer"},
                    headers=AUTH,
                    timeout=60,
                )
                assert answer.status_code == 202, answer.text
            # Closed after the 2 s header deadline: about 10 bytes sent of the 30 six seconds take.
            assert all(f.result() < 20 for f in slow), "a trickled header outlived its deadline"
            assert all(f.result().startswith(b"HTTP/1.1 408") for f in stalled)
            assert [f.result() for f in strangers] == [401] * 6
            assert [f.result() for f in members] == [413] * 4
            assert [f.result() for f in internal] == [401] * 4
        eventually(
            lambda: hook.requests >= 20 and not fuzzed.pending_deliveries(),
            60,
            what="the 20 deliveries made",
        )
        assert hook.sent < 20 * 32 * MIB, "the endless answers were read"
        for url in (fuzzed.router_url, *fuzzed.matcher_urls):
            assert httpx.get(f"{url}/readyz", timeout=10).status_code == 200
    finally:
        hook.close()


def _stream_never_read(router: httpx.URL, key: str) -> socket.socket:
    """A match stream from the oldest kept, on a socket with a small buffer never read."""
    sock = socket.create_connection((router.host, router.port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.sendall(
        f"GET /matches/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
        "Last-Event-ID: 0\r\n\r\n".encode()
    )
    return sock


def test_many_streams_half_never_reading_while_their_matches_grow(fuzzed: RunningCluster) -> None:
    """Three tenants each hold 15 streams that never read and one that does, while long posts
    make messages of hundreds of KB for all of them: the reading ones get every match, the
    others cost the router a bounded amount (the fixture asserts its peak), and the router
    answers everyone else throughout."""
    router = httpx.URL(fuzzed.router_url)
    keys = []
    for n in range(3):
        made = httpx.post(
            f"{fuzzed.router_url}/admin/tenants",
            json={"tenant": f"streaming{n}"},
            headers=ADMIN,
            timeout=30,
        )
        assert made.status_code == 201, made.text
        keys.append(made.json()["api_key"])
    long_text = "gnu " + "wildebeest savanna " * 800  # about 15 KB
    for key in keys:
        made = httpx.post(
            f"{fuzzed.router_url}/subscriptions/batch",
            json={"subscriptions": [{"query": "gnu"}] * 10},
            headers={"authorization": f"Bearer {key}"},
            timeout=30,
        )
        assert made.status_code == 201, made.text
    unread = [_stream_never_read(router, key) for key in keys for _ in range(15)]
    try:
        for _ in range(3):
            for key in keys:
                answer = httpx.post(
                    f"{fuzzed.router_url}/publications",
                    json={"publications": [{"text": long_text}] * 20},
                    headers={"authorization": f"Bearer {key}"},
                    timeout=60,
                )
                assert answer.status_code == 202, answer.text
            assert httpx.get(f"{fuzzed.router_url}/readyz", timeout=10).status_code == 200

        def read_every_match(key: str) -> int:
            got = 0
            with httpx.stream(
                "GET",
                f"{fuzzed.router_url}/matches/stream",
                headers={"authorization": f"Bearer {key}", "last-event-id": "0"},
                timeout=30,
            ) as stream:
                assert stream.status_code == 200
                for line in stream.iter_lines():
                    if line.startswith("data: "):
                        got += len(orjson.loads(line[6:])["matches"])
                        if got >= 3 * 20 * 10:
                            break
            return got

        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            assert list(pool.map(read_every_match, keys)) == [600] * 3
        stats = httpx.get(f"{fuzzed.router_url}/stats", timeout=10).json()
        assert stats["match_streams"] >= 45
    finally:
        for sock in unread:
            sock.close()
