"""What the third outside probe found, each defect against real processes and sockets.

One tenant's receivers that never answer cannot stop another tenant's deliveries; a dry run's
answer and work are bounded in bytes; keyed subscribing is atomic per key; endpoints have a quota,
paging and a count kept with them; messages split by a stable order; an endpoint enabled again
takes replays at once; counters belong to one incarnation of a subscription; text a person or a
terminal sees obeys one rule.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import httpx
import orjson
import pytest

from tests.e2e.support import restart_matcher
from tests.helpers import (
    Receiver,
    RunningCluster,
    eventually,
    extra_router,
    peak_growth,
    service_pid,
    start_cluster,
    stop_cluster,
    tenant_key,
    wordcast_cli,
)
from wordcast import limits
from wordcast.local.supervisor import free_port
from wordcast.storage.redis import connect_sync


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


# -- 4. endpoints have a quota, a rate and pages ---------------------------------------------------
@pytest.fixture(scope="module")
def limited(redis_url: str) -> Iterator[RunningCluster]:
    env = {
        "WORDCAST_ROUTER_MAX_ENDPOINTS_PER_TENANT": "30",
        "WORDCAST_ROUTER_ENDPOINT_CREATIONS_PER_SECOND": "1",  # a burst of 10
    }
    running = start_cluster(redis_url, "test-probe-three-limited", matchers=1, env=env)
    yield running
    stop_cluster(running)


def test_endpoints_have_a_quota_a_rate_and_pages(limited: RunningCluster) -> None:
    with _client(limited, tenant_key(limited, "many-endpoints")) as api:
        made = [api.post("/endpoints", json={"url": f"http://127.0.0.1:9/e{k}"}) for k in range(11)]
        assert [a.status_code for a in made] == [201] * 10 + [429], made[-1].text
        assert "new endpoints/s" in made[-1].json()["detail"]
        assert int(made[-1].headers["retry-after"]) >= 1
        for k in range(20):  # subscribing to a new URL makes an endpoint: the quota holds there
            body = {"query": "quota", "callback_url": f"http://127.0.0.1:9/s{k}"}
            assert api.post("/subscriptions", json=body).status_code == 201
        over = api.post(
            "/subscriptions", json={"query": "quota", "callback_url": "http://127.0.0.1:9/x"}
        )
        assert over.status_code == 422, over.text
        assert "may hold 30 webhook endpoints" in over.json()["detail"]
        assert api.get("/subscriptions").json()["total"] == 20  # the refused one: not stored

        pages, cursor = [], 0
        while True:
            page = api.get("/endpoints", params={"limit": 7, "cursor": cursor}).json()
            assert page["total"] == 30
            pages.append([e["url"] for e in page["endpoints"]])
            cursor = page["next_cursor"]
            if not cursor:
                break
        assert [len(p) for p in pages] == [7, 7, 7, 7, 2]
        assert len({url for p in pages for url in p}) == 30


# -- 5. an endpoint's subscriptions are counted, not scanned ---------------------------------------
def test_an_endpoints_subscriptions_are_a_count_kept_with_the_records(
    probed: RunningCluster, redis_url: str
) -> None:
    hook = "http://127.0.0.1:9/counted"
    with _client(probed, tenant_key(probed, "counted")) as api:
        endpoint = api.post("/endpoints", json={"url": hook}).json()
        ids = [
            api.post("/subscriptions", json=body).json()["id"]
            for body in (
                {"query": "one", "callback_url": hook},
                {"query": "two OR three", "callback_url": hook},  # two records, one subscription
                {"pattern": "coun*ed", "callback_url": hook},
                {"query": "twofold", "callback_url": hook, "delivery": ["webhook", "stream"]},
                {"query": "elsewhere"},  # the match stream only
            )
        ]
        count = lambda: api.get(f"/endpoints/{endpoint['id']}").json()["subscriptions"]  # noqa: E731
        client = connect_sync(redis_url)
        client.config_resetstat()
        assert count() == 4
        assert "cmdstat_hscan" not in client.info("commandstats")  # no scan of the records
        api.delete(f"/subscriptions/{ids[1]}")
        api.delete(f"/subscriptions/{ids[2]}")
        assert count() == 2

        # Records from before the counts: a router counts each shard's once, exactly.
        for key in client.scan_iter(f"{probed.namespace}*:tenant-counts"):
            for field in client.hkeys(key):
                if "\t" in field:
                    client.hdel(key, field)
        with extra_router(probed, redis_url) as fresh:
            answer = httpx.get(
                f"{fresh}/endpoints/{endpoint['id']}", headers=api.headers, timeout=30
            )
            assert answer.json()["subscriptions"] == 2


# -- 7. an endpoint's URL change or deletion and a new subscription there: one wins ----------------
@pytest.mark.parametrize("change", ["patch", "delete"])
def test_an_endpoints_change_and_a_subscription_to_its_url_cannot_both_take_it(
    probed: RunningCluster, change: str
) -> None:
    with (
        _client(probed, tenant_key(probed, f"racing-{change}")) as api,
        _client(probed, api.headers["authorization"].removeprefix("Bearer ")) as other,
    ):
        for k in range(30):
            url = f"http://127.0.0.1:9/race-{change}-{k}"
            endpoint = api.post("/endpoints", json={"url": url}).json()
            moved = {"url": f"{url}-moved"}
            changing = (
                partial(api.patch, f"/endpoints/{endpoint['id']}", json=moved)
                if change == "patch"
                else partial(api.delete, f"/endpoints/{endpoint['id']}")
            )
            subscribing = partial(
                other.post, "/subscriptions", json={"query": "race", "callback_url": url}
            )
            changed, subscribed = _at_once([changing, subscribing])
            assert subscribed.status_code in (201, 409), subscribed.text
            assert changed.status_code in (200, 204, 409), changed.text
            if subscribed.status_code != 201:
                continue
            # Whatever endpoint has the URL now signs with the secret the 201 gave.
            now = next(e for e in api.get("/endpoints", params={"limit": 1000}).json()[
                "endpoints"] if e["url"] == url)  # fmt: skip
            secret = api.get(f"/endpoints/{now['id']}/secret").json()["secret"]
            assert subscribed.json()["secret"] == secret, (k, changed.status_code)
            api.delete(f"/subscriptions/{subscribed.json()['id']}")


# -- 6. a message's matches, and so its webhook-id, do not follow the load order -------------------
def _webhook_ids(receiver: Receiver, publication: str) -> list[str]:
    raws = httpx.get(f"{receiver.url}/deliveries/raw", timeout=30).json()
    return sorted(
        raw["headers"]["webhook-id"]
        for raw in raws
        if any(p["id"] == publication for p in orjson.loads(raw["body"])["publications"])
    )


def test_webhook_ids_stay_the_same_after_a_matcher_restart(
    limited: RunningCluster, receiver: Receiver
) -> None:
    probed = limited  # messages of up to 500 matches
    with _client(probed, tenant_key(probed, "six-hundred")) as api:
        hook = receiver.hook
        for _ in range(2):
            items = [{"query": "lark", "callback_url": hook}] * 300
            answer = api.post("/subscriptions/batch", json={"subscriptions": items})
            assert answer.status_code == 201, answer.text
        post = {"id": "six-hundred", "text": "a lark sang"}

        def published(messages: int) -> list[str]:
            assert api.post("/publications", json=post).status_code == 202
            return eventually(
                lambda: (
                    len(ids := _webhook_ids(receiver, "six-hundred")) >= messages
                    and not probed.pending_deliveries()
                    and ids
                ),
                timeout=60,
            )

        before = published(2)
        assert len(before) == 2  # 500 and 100 matches
        restart_matcher(probed, signal.SIGKILL)
        after = published(4)
        assert sorted(set(after)) == before, (before, after)


# -- 8. an endpoint enabled again takes replays at once --------------------------------------------
@pytest.fixture(scope="module")
def disabling(redis_url: str) -> Iterator[RunningCluster]:
    """Endpoints failing for 2 s are disabled; attempts come fast and last long enough."""
    env = {
        "WORDCAST_MATCHER_DELIVERY_ATTEMPTS": "40",
        "WORDCAST_MATCHER_DELIVERY_BACKOFF_S": "0.05",
        "WORDCAST_MATCHER_DELIVERY_MAX_BACKOFF_S": "0.2",
        "WORDCAST_MATCHER_ENDPOINT_DISABLE_AFTER_S": "2",
        "WORDCAST_MATCHER_DELIVERY_TAKE_OVER_AFTER_S": "3600",  # longer than 40 attempts take
        "WORDCAST_MATCHER_DELIVERY_BATCH": "1",
    }
    running = start_cluster(redis_url, "test-probe-three-disabling", env=env)
    yield running
    stop_cluster(running)


def test_replays_right_after_enabling_an_endpoint_are_delivered(
    disabling: RunningCluster, receiver: Receiver
) -> None:
    with _client(disabling, tenant_key(disabling, "replaying")) as api:
        sub = api.post("/subscriptions", json={"query": "wombat", "callback_url": receiver.hook})
        sub_id, endpoint_id = sub.json()["id"], sub.json()["endpoint_id"]
        httpx.post(f"{receiver.url}/control", json={"status": 500}, timeout=10)
        try:
            posts = [{"id": f"wombat-{k}", "text": "a wombat"} for k in range(3)]
            assert api.post("/publications", json={"publications": posts}).status_code == 202
            dead = eventually(
                lambda: len(found := api.get("/deadletters").json()["dead_letters"]) == 3 and found,
                timeout=60,
            )
        finally:
            httpx.post(f"{receiver.url}/control", json={"status": 204}, timeout=10)
        assert not api.get(f"/endpoints/{endpoint_id}").json()["enabled"]
        assert api.patch(f"/endpoints/{endpoint_id}", json={"enabled": True}).status_code == 200
        for letter in dead:  # at once, within the dispatchers' 5 s of keeping endpoints
            assert api.post(f"/deadletters/{letter['id']}/replay").status_code == 202
        eventually(
            lambda: {(sub_id, f"wombat-{k}") for k in range(3)} <= set(receiver.pairs()),
            timeout=30,
        )
        assert not api.get("/deadletters").json()["dead_letters"]
        counters = eventually(
            lambda: (
                (c := api.get(f"/subscriptions/{sub_id}").json()["counters"])["delivered"] == 3
                and c
            ),
            timeout=30,
        )
        assert counters["failed"] == 3, counters


# -- 9. counters belong to one incarnation of a subscription ---------------------------------------
def test_a_subscription_made_again_under_its_key_starts_its_counters_from_zero(
    probed: RunningCluster, receiver: Receiver
) -> None:
    with _client(probed, tenant_key(probed, "reborn")) as api:
        body = {"query": "axolotl", "callback_url": receiver.hook, "key": "reborn"}
        sub_id = api.post("/subscriptions", json=body).json()["id"]
        counters = lambda: api.get(f"/subscriptions/{sub_id}").json()["counters"]  # noqa: E731
        # The first one's match is delivered only after it was deleted and made again.
        httpx.post(f"{receiver.url}/control", json={"delay_s": 2}, timeout=10)
        try:
            api.post("/publications", json={"id": "axolotl-1", "text": "an axolotl"})
            eventually(lambda: counters()["matched"] == 1, timeout=30)
            assert api.delete(f"/subscriptions/{sub_id}").status_code == 204
            assert api.post("/subscriptions", json=body).json()["id"] == sub_id
        finally:
            httpx.post(f"{receiver.url}/control", json={"delay_s": 0}, timeout=10)
        eventually(lambda: (sub_id, "axolotl-1") in receiver.pairs(), timeout=30)
        api.post("/publications", json={"id": "axolotl-2", "text": "an axolotl again"})
        # Tallies are added in the order they were made: once the second match is counted,
        # the first one's delivery would have been counted too.
        eventually(lambda: counters()["delivered"] >= 1, timeout=30)
        assert (counters()["matched"], counters()["delivered"]) == (1, 1)


# -- 10. one input rule for every text a person or a terminal sees ---------------------------------
@pytest.mark.parametrize("bad", ["\x00\x1b[31m", "\u202eevil", "zero\u200bwidth", "line\u2028sep"])
def test_text_a_person_sees_holds_only_printable_characters(
    probed: RunningCluster, bad: str
) -> None:
    with _client(probed, tenant_key(probed, "printable")) as api:
        refused = {
            "description": api.post(
                "/endpoints", json={"url": "http://127.0.0.1:9/p", "description": bad}
            ),
            "tag": api.post("/subscriptions", json={"query": "printable", "tag": bad}),
            "query": api.post("/subscriptions", json={"query": f"printable {bad}"}),
            "id": api.post("/publications", json={"id": bad, "text": "printable"}),
        }
        for field, answer in refused.items():
            assert answer.status_code == 422, (field, answer.text)
            assert "printable characters" in answer.text, (field, answer.text)
        assert api.get("/endpoints").json()["total"] == 0
        assert api.get("/subscriptions").json()["total"] == 0


def test_numbers_beyond_64_bits_and_words_never_indexed_are_refused(
    probed: RunningCluster,
) -> None:
    with _client(probed, tenant_key(probed, "bounded")) as api:
        answer = api.post("/publications", json={"text": "scored", "attributes": {"score": 2**64}})
        assert answer.status_code == 422, answer.text
        assert "beyond 64 bits" in answer.text
        answer = api.post("/subscriptions", json={"query": "ordinary " + "x" * 100})
        assert answer.status_code == 422, answer.text
        assert "has 100 characters" in answer.text
        assert api.get("/subscriptions").json()["total"] == 0


def test_the_cli_prints_stored_text_escaped(probed: RunningCluster, redis_url: str) -> None:
    """Text stored before the rule existed reaches the terminal escaped."""
    key = tenant_key(probed, "escaped")
    with _client(probed, key) as api:
        made = api.post("/endpoints", json={"url": "http://127.0.0.1:9/esc"}).json()
    client = connect_sync(redis_url)
    records = f"{probed.namespace}:tenant:escaped:endpoints"
    record = orjson.loads(client.hget(records, made["id"]))
    client.hset(records, made["id"], orjson.dumps(record | {"description": "\x1b[31mred"}))
    listed = wordcast_cli(
        "endpoint", "list", router=probed.router_url, env={"WORDCAST_API_KEY": key}
    )
    assert "\\x1b[31mred" in listed.stdout, listed.stdout
    assert "\x1b" not in listed.stdout


# -- 11. the command line names the cluster it acts on, and never picks one of several ------------
def test_the_cli_names_its_cluster_and_never_picks_one_of_several(
    redis_url: str, tmp_path: Path
) -> None:
    state = {"WORDCAST_STATE_DIR": str(tmp_path), "WORDCAST_URL": "", "REDIS_URL": ""}
    (tmp_path / "clusters").mkdir()
    # A record whose pid is not a wordcast process of ours (pid 1): passed over.
    stale = {"redis_url": redis_url, "namespace": "x", "router_url": "http://127.0.0.1:9", "pid": 1}
    (tmp_path / "clusters" / "1.json").write_bytes(orjson.dumps(stale))
    first = start_cluster(redis_url, "test-probe-three-first", matchers=1, env=state)
    try:
        second = start_cluster(redis_url, "test-probe-three-second", matchers=1, env=state)
        try:
            both = wordcast_cli("publish", "hello", env=state)
            assert both.returncode == 2, both.stderr
            assert "2 local clusters are running" in both.stderr, both.stderr
            assert first.router_url in both.stderr
            assert second.router_url in both.stderr
        finally:
            stop_cluster(second)
        one = wordcast_cli("publish", "hello", env=state)
        assert one.returncode == 0, one.stderr
        assert f"acting on the local cluster at {first.router_url}" in one.stderr, one.stderr
    finally:
        stop_cluster(first)
    none = wordcast_cli("publish", "hello", env=state)
    assert "no local cluster of yours is running" in none.stderr, none.stderr
