"""What the third outside probe found, each defect against real processes and sockets.

One tenant's receivers that never answer cannot stop another tenant's deliveries; a dry run's
answer and work are bounded in bytes; keyed subscribing is atomic per key; endpoints have a quota,
paging and a count kept with them; messages split by a stable order; an endpoint enabled again
takes replays at once; counters belong to one incarnation of a subscription; text a person or a
terminal sees obeys one rule.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial

import httpx
import pytest

from tests.helpers import (
    Receiver,
    RunningCluster,
    eventually,
    peak_growth,
    service_pid,
    start_cluster,
    stop_cluster,
    tenant_key,
)
from wordcast import limits
from wordcast.local.supervisor import free_port


@pytest.fixture(scope="module")
def probed(redis_url: str) -> Iterator[RunningCluster]:
    """One matcher: the probe's worst case for item 1 (0 of 18 delivered)."""
    # A match per message, so that each dead tenant's publications make many messages.
    env = {"WORDCAST_MATCHER_DELIVERY_BATCH": "1"}
    running = start_cluster(redis_url, "test-probe-three", matchers=1, env=env)
    yield running
    stop_cluster(running)


def _client(cluster: RunningCluster, key: str) -> httpx.Client:
    return httpx.Client(
        base_url=cluster.router_url, headers={"authorization": f"Bearer {key}"}, timeout=60
    )


@contextlib.contextmanager
def blackhole() -> Iterator[str]:
    """A webhook that accepts every connection and never answers; yields its URL."""
    listener = socket.socket()
    port = free_port()
    listener.bind(("127.0.0.1", port))
    listener.listen(1024)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/hook"
    finally:
        stop.set()
        thread.join(5)
        for connection in held:
            connection.close()
        listener.close()


# -- 1. dead webhooks of some tenants cannot stop another tenant's deliveries ----------------------
def test_receivers_that_never_answer_cannot_stop_another_tenants_deliveries(
    probed: RunningCluster, receiver: Receiver
) -> None:
    with contextlib.ExitStack() as stack:
        for n in range(3):
            url = stack.enter_context(blackhole())
            with _client(probed, tenant_key(probed, f"dead-{n}")) as dead:
                answer = dead.post("/subscriptions", json={"query": "alpha", "callback_url": url})
                assert answer.status_code == 201, answer.text
                posts = [{"id": f"d{n}-{k}", "text": f"alpha {k}"} for k in range(300)]
                answer = dead.post("/publications", json={"publications": posts})
                assert answer.status_code == 202, answer.text
        with _client(probed, tenant_key(probed, "alive")) as alive:
            answer = alive.post(
                "/subscriptions", json={"query": "omega", "callback_url": receiver.hook}
            )
            assert answer.status_code == 201, answer.text
            sub_id = answer.json()["id"]
            late = []
            for k in range(8):
                sent = time.monotonic()
                answer = alive.post("/publications", json={"id": f"alive-{k}", "text": "omega"})
                assert answer.status_code == 202, answer.text
                try:
                    eventually(
                        lambda k=k: (sub_id, f"alive-{k}") in receiver.pairs(),
                        timeout=10,
                        interval=0.2,
                    )
                except AssertionError:
                    late.append(k)
                    continue
                assert time.monotonic() - sent <= 10
                time.sleep(2)  # publications spread over the dead receivers' first timeouts
        assert not late, f"publications {late} of 6 were not delivered within 10 s (of 8)"


# -- 2. a dry run is bounded, and so is what the live path holds per batch -------------------------
DENSE_TEXT = ("ox " * 5_462)[: limits.MAX_TEXT_CHARS]  # 5,461 places of the one word


def test_a_dry_run_is_bounded_in_bytes_and_the_live_path_in_memory(
    probed: RunningCluster,
) -> None:
    with _client(probed, tenant_key(probed, "dense")) as dense:
        for _ in range(20):  # to the match stream: nothing to deliver over HTTP
            assert dense.post("/subscriptions", json={"query": "ox"}).status_code == 201
        posts = [{"id": f"dense-{k}", "text": DENSE_TEXT} for k in range(100)]
        router, matcher = service_pid(probed.router_url), probed.matcher_pid(0)
        with peak_growth(router) as router_grown, peak_growth(matcher) as matcher_grown:
            answer = dense.post(
                "/publications", params={"dry_run": "true"}, json={"publications": posts}
            )
        assert answer.status_code == 413, answer.text[:200]
        assert "4194304-byte limit" in answer.json()["detail"]
        assert router_grown[0] <= 50, f"the router grew {router_grown[0]:.0f} MiB"
        assert matcher_grown[0] <= 50, f"the matcher grew {matcher_grown[0]:.0f} MiB"

        # Below the bound a dry run answers as before, every match with its places.
        answer = dense.post(
            "/publications", params={"dry_run": "true"}, json={"publications": posts[:1]}
        )
        assert answer.status_code == 200, answer.text[:200]
        found = answer.json()["matches"]
        assert len(found) == 20
        assert all(len(m["matched"]["terms"]["ox"]) == 5_461 for m in found)

        with peak_growth(matcher) as matcher_grown:
            answer = dense.post("/publications", json={"publications": posts})
        assert answer.status_code == 202, answer.text
        assert matcher_grown[0] <= 120, f"the matcher grew {matcher_grown[0]:.0f} MiB"


# -- 3. idempotency keys under concurrency ---------------------------------------------------------
def _at_once(calls: list[Callable[[], httpx.Response]]) -> list[httpx.Response]:
    """Each call in a thread of its own, released together."""
    start = threading.Barrier(len(calls))
    answers: list[httpx.Response | None] = [None] * len(calls)

    def run(k: int) -> None:
        start.wait()
        answers[k] = calls[k]()

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert all(answer is not None for answer in answers)
    return [answer for answer in answers if answer is not None]


def test_the_same_keyed_subscription_sent_at_once_is_stored_once(probed: RunningCluster) -> None:
    key = tenant_key(probed, "keyed")
    for round_ in range(10):
        body = {"query": f"kiwi {round_}", "key": f"once-{round_}"}
        with contextlib.ExitStack() as stack:
            clients = [stack.enter_context(_client(probed, key)) for _ in range(3)]
            answers = _at_once([partial(c.post, "/subscriptions", json=body) for c in clients])
        assert sorted(a.status_code for a in answers) in ([200, 200, 201], [201, 201, 201]), [
            (a.status_code, a.text) for a in answers
        ]
        assert len({a.json()["id"] for a in answers}) == 1
    with _client(probed, key) as keyed:
        assert keyed.get("/subscriptions").json()["total"] == 10


def test_concurrent_batches_sharing_a_key_store_one_batch_and_refuse_the_other(
    probed: RunningCluster,
) -> None:
    key = tenant_key(probed, "batches")

    def batch(name: str) -> dict[str, object]:
        items = [{"query": f"{name} {k}", "key": f"{name}-{k}"} for k in range(99)]
        return {"subscriptions": [*items, {"query": f"{name} shared", "key": "shared"}]}

    with _client(probed, key) as first, _client(probed, key) as second:
        answers = _at_once(
            [
                partial(first.post, "/subscriptions/batch", json=batch("plum")),
                partial(second.post, "/subscriptions/batch", json=batch("pear")),
            ]
        )
        assert sorted(a.status_code for a in answers) == [201, 409], [
            (a.status_code, a.text[:300]) for a in answers
        ]
        assert "shared" in next(a for a in answers if a.status_code == 409).json()["detail"]
        assert first.get("/subscriptions").json()["total"] == 100  # the refused batch: none
