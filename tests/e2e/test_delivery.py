"""Reliable, signed delivery through real processes: outbox, retries, dead letters, crashes."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from tests.e2e.support import publish_posts, signed_twice, subscribe_terms
from tests.helpers import (
    AUTH,
    Receiver,
    RunningCluster,
    eventually,
    start_cluster,
    stop_cluster,
    stored_record,
    tenant_key,
    wordcast_cli,
)
from wordcast.client import RouterClient
from wordcast.corpus.workload import Post, post_queries, sample_posts
from wordcast.local.supervisor import free_port
from wordcast.query.analysis import analyse
from wordcast.storage.redis import connect_sync
from wordcast.testing.bruteforce import match_pairs
from wordcast.webhooks.payload import matches_of

FAST_RETRIES = {
    "WORDCAST_MATCHER_DELIVERY_ATTEMPTS": "4",
    "WORDCAST_MATCHER_DELIVERY_BACKOFF_S": "0.05",
    "WORDCAST_MATCHER_DELIVERY_MAX_BACKOFF_S": "0.3",
}


RATE_LIMITED = {
    "WORDCAST_ROUTER_PUBLICATIONS_PER_SECOND": "20",
    "WORDCAST_ROUTER_PUBLICATION_BURST": "1000",
}


@pytest.fixture(scope="module")
def delivery_cluster(redis_url: str) -> Iterator[RunningCluster]:
    env = FAST_RETRIES | RATE_LIMITED
    running = start_cluster(redis_url, f"test-delivery-{os.getpid()}", env=env)
    yield running
    stop_cluster(running)


@pytest.fixture
def api(delivery_cluster: RunningCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=delivery_cluster.router_url, timeout=30, headers=AUTH) as client:
        yield client


def _behave(receiver: Receiver, **behaviour: object) -> None:
    httpx.post(f"{receiver.url}/control", json=behaviour, timeout=10).raise_for_status()


def _wait(condition: Callable[[], object], timeout: float = 30, what: str = "condition") -> None:
    eventually(condition, timeout, what=what)


def _counters(api: httpx.Client, sub_id: str) -> tuple[int, int, int, float | None]:
    """A subscription's counters: matched, delivered, failed, last match."""
    counters = api.get(f"/subscriptions/{sub_id}").json()["counters"]
    return (
        counters["matched"],
        counters["delivered"],
        counters["failed"],
        counters["last_match"],
    )


def _wordcast(cluster: RunningCluster, *args: str) -> subprocess.CompletedProcess[str]:
    """The command line against this cluster (the development key)."""
    return wordcast_cli(*args, router=cluster.router_url, timeout=120)


def _raw(receiver: Receiver) -> list[dict[str, object]]:
    raw: list[dict[str, object]] = httpx.get(f"{receiver.url}/deliveries/raw", timeout=10).json()
    return raw


def test_deliveries_are_signed_and_rotation_keeps_both_secrets_valid(
    api: httpx.Client, receiver: Receiver, delivery_cluster: RunningCluster
) -> None:
    _behave(receiver)
    created = api.post("/subscriptions", json={"query": "quokka", "callback_url": receiver.hook})
    assert created.status_code == 201
    sub_id, secret = created.json()["id"], created.json()["secret"]
    assert secret.startswith("whsec_")
    assert api.get(f"/subscriptions/{sub_id}").json()["secret"] is None  # never shown again

    def delivered_for(publication: str) -> dict[str, object]:
        _wait(
            lambda: any(publication in str(r["body"]) for r in _raw(receiver)),
            what=f"delivery of {publication}",
        )
        return next(r for r in _raw(receiver) if publication in str(r["body"]))

    api.post("/publications", json={"id": "q-1", "text": "A quokka smiles"}).raise_for_status()
    first = delivered_for("q-1")
    headers, body = dict(first["headers"]), str(first["body"])  # type: ignore[call-overload]
    payload = Webhook(secret).verify(body, headers)
    assert payload["matches"][0]["subscription_id"] == sub_id
    with pytest.raises(Exception, match="signature"):
        Webhook("whsec_" + "B" * 32).verify(body, headers)

    rotated = _wordcast(delivery_cluster, "secret", sub_id)  # POST /subscriptions/{id}/secret
    assert rotated.returncode == 0, rotated.stderr
    new_secret = rotated.stdout.strip()
    assert new_secret.startswith("whsec_")
    assert new_secret != secret

    def publish(publication: str) -> None:
        sent = {"id": publication, "text": "Quokkas again"}
        api.post("/publications", json=sent).raise_for_status()

    def read(publication: str) -> tuple[dict[str, str], str]:
        found = delivered_for(publication)
        return dict(found["headers"]), str(found["body"])  # type: ignore[call-overload]

    headers, body = signed_twice(publish, read, "q-2")
    Webhook(new_secret).verify(body, headers)
    Webhook(secret).verify(body, headers)  # still valid during the grace period
    assert api.post("/subscriptions/0123456789abcdef/secret").status_code == 404
    unknown = _wordcast(delivery_cluster, "secret", "0123456789abcdef")
    assert unknown.returncode == 2
    assert "HTTP 404" in unknown.stderr


def test_a_message_waiting_for_a_retry_is_dropped_once_its_subscription_is_deleted(
    api: httpx.Client, receiver: Receiver, delivery_cluster: RunningCluster
) -> None:
    """The dispatcher keeps secrets it has read; the deletion's event makes it forget them, so
    the retry finds the subscription gone and drops the message instead of delivering it."""
    _behave(receiver, status=503, retry_after="3")
    created = api.post("/subscriptions", json={"query": "numbat", "callback_url": receiver.hook})
    sub_id = created.json()["id"]
    offset = receiver.count()
    api.post("/publications", json={"id": "numbat-1", "text": "a numbat"}).raise_for_status()
    _wait(lambda: delivery_cluster.pending_deliveries() == 1, what="the first attempt refused")
    time.sleep(0.5)
    assert api.delete(f"/subscriptions/{sub_id}").status_code == 204
    _behave(receiver)
    _wait(lambda: delivery_cluster.pending_deliveries() == 0, what="the message dropped")
    time.sleep(0.5)
    assert (sub_id, "numbat-1") not in receiver.pairs(offset)


def test_failing_receiver_is_retried_then_dead_lettered_then_replayed(
    api: httpx.Client, receiver: Receiver, delivery_cluster: RunningCluster
) -> None:
    created = api.post("/subscriptions", json={"query": "wombat", "callback_url": receiver.hook})
    sub_id = created.json()["id"]
    offset = receiver.count()

    # Down for a while (503 asking for 1 s between attempts, which the dispatcher honours over its
    # shorter backoff), then back: the delivery resumes by itself.
    _behave(receiver, status=503, retry_after="1")
    api.post("/publications", json={"id": "w-1", "text": "a wombat digs"}).raise_for_status()
    time.sleep(0.5)
    assert (sub_id, "w-1") not in receiver.pairs(offset)
    _behave(receiver)
    _wait(lambda: (sub_id, "w-1") in receiver.pairs(offset), what="the resumed delivery")

    # Never back within the attempts: the message ends in the tenant's dead letters.
    _behave(receiver, status=500)
    api.post("/publications", json={"id": "w-2", "text": "wombat tunnels"}).raise_for_status()

    def dead() -> list[dict[str, object]]:
        letters: list[dict[str, object]] = api.get("/deadletters").json()["dead_letters"]
        return [d for d in letters if sub_id in d["subscription_ids"]]

    _wait(lambda: len(dead()) == 1, what="a dead letter")
    letter = dead()[0]
    assert letter["attempts"] == 4
    assert letter["reason"] == "HTTP 500"
    assert matches_of(letter["payload"])[0]["publication_id"] == "w-2"  # type: ignore[arg-type]
    stats = [httpx.get(f"{u}/stats").json() for u in delivery_cluster.matcher_urls]
    assert sum(s["deliveries_pending"] for s in stats) == 0  # nothing left behind in the outbox
    # Its counters say so (added every second or so).
    _wait(lambda: _counters(api, sub_id)[:3] == (2, 1, 1), what="2 matched, 1 delivered, 1 failed")
    # The matcher's log names it by the id the API and `wordcast replay` take.
    _wait(
        lambda: any(f"wordcast replay {letter['id']}" in line for line in delivery_cluster.output),
        what="the dead letter in the matcher's log",
    )

    # Admin sees it too; another tenant does not.
    admin = {"authorization": "Bearer wordcast-development-admin-token"}
    everyone = api.get("/admin/deadletters", params={"tenant": "dev"}, headers=admin).json()
    assert letter["id"] in {d["id"] for d in everyone["dead_letters"]}

    # The command line lists it, and refuses to replay one that is not there, sending nothing.
    listed = _wordcast(delivery_cluster, "deadletters", "--json")
    assert listed.returncode == 0, listed.stderr
    assert letter in [json.loads(line) for line in listed.stdout.splitlines()]
    readable = _wordcast(delivery_cluster, "deadletters").stdout
    assert f"{letter['id']}  " in readable
    assert "HTTP 500 after 4 attempts" in readable
    refused = _wordcast(delivery_cluster, "replay", str(letter["id"]), "1-1")
    assert refused.returncode == 2
    assert "no dead letter with id '1-1'" in refused.stderr
    assert dead() == [letter]

    # Replayed (by the command line) once the receiver is fine: delivered, same webhook-id.
    _behave(receiver)
    replayed = _wordcast(delivery_cluster, "replay", str(letter["id"]))
    assert replayed.returncode == 0, replayed.stderr
    assert "1 dead letter sent again" in replayed.stdout
    _wait(lambda: (sub_id, "w-2") in receiver.pairs(offset), what="the replayed delivery")
    deliveries = httpx.get(f"{receiver.url}/deliveries").json()
    got = dict(zip(map(tuple, deliveries["pairs"]), deliveries["webhook_ids"], strict=True))
    assert got[(sub_id, "w-2")] == letter["webhook_id"]
    assert not dead()
    _wait(lambda: _counters(api, sub_id)[:3] == (2, 2, 1), what="the replay counted delivered")
    assert api.post(f"/deadletters/{letter['id']}/replay").status_code == 404


def test_refused_connections_end_in_dead_letters_and_memory_stays_bounded(
    api: httpx.Client, delivery_cluster: RunningCluster
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
    created = api.post("/subscriptions", json={"query": "bilby", "callback_url": nobody})
    sub_id = created.json()["id"]
    batch = {"publications": [{"id": f"b-{n}", "text": f"bilby {n}"} for n in range(300)]}
    api.post("/publications", json=batch).raise_for_status()
    peaks = [0]

    def dead_lettered() -> list[dict[str, Any]]:
        stats = [httpx.get(f"{u}/stats").json() for u in delivery_cluster.matcher_urls]
        peaks.append(max(s["deliveries_in_flight"] for s in stats))
        letters = api.get("/deadletters", params={"limit": 1000}).json()["dead_letters"]
        mine = [d for d in letters if sub_id in d["subscription_ids"]]
        return mine if sum(s["deliveries_pending"] for s in stats) == 0 else []

    mine = eventually(dead_lettered, what="the refused deliveries in the dead letters")
    peak = max(peaks)
    assert peak <= 64  # WORDCAST_MATCHER_DELIVERY_CONCURRENCY: the rest waits in Redis
    assert all("ConnectError" in str(d["reason"]) and d["attempts"] == 4 for d in mine)
    assert sum(len(d["payload"]["matches"]) for d in mine) == 300  # every match accounted for


def test_gone_receiver_disables_the_subscription(api: httpx.Client, receiver: Receiver) -> None:
    created = api.post("/subscriptions", json={"query": "numbat", "callback_url": receiver.hook})
    sub_id = created.json()["id"]
    _behave(receiver, status=410)
    api.post("/publications", json={"text": "a numbat"}).raise_for_status()
    _wait(lambda: api.get(f"/subscriptions/{sub_id}").status_code == 404, what="the 410 to bite")
    _behave(receiver)


def test_a_boolean_query_is_signed_with_its_secret_and_a_410_deletes_every_alternative(
    api: httpx.Client, receiver: Receiver, delivery_cluster: RunningCluster, redis_url: str
) -> None:
    _behave(receiver)
    created = api.post(
        "/subscriptions", json={"query": "dingo OR (wallaby -zoo)", "callback_url": receiver.hook}
    )
    assert created.status_code == 201, created.text
    sub_id, secret = created.json()["id"], created.json()["secret"]
    store = connect_sync(redis_url)
    second = stored_record(store, delivery_cluster.namespace, f"{sub_id}~1")
    assert second is not None, "the second alternative has a record of its own"

    # Matched by the second alternative only: delivered under the query's id, with its secret.
    api.post("/publications", json={"id": "wallaby-1", "text": "A wallaby hops"}).raise_for_status()
    _wait(
        lambda: any("wallaby-1" in str(r["body"]) for r in _raw(receiver)),
        what="delivery of wallaby-1",
    )
    raw = next(r for r in _raw(receiver) if "wallaby-1" in str(r["body"]))
    payload = Webhook(secret).verify(str(raw["body"]), dict(raw["headers"]))  # type: ignore[call-overload]
    assert [m["subscription_id"] for m in payload["matches"]] == [sub_id]

    _behave(receiver, status=410)
    api.post("/publications", json={"text": "a dingo and a wallaby"}).raise_for_status()
    _wait(lambda: api.get(f"/subscriptions/{sub_id}").status_code == 404, what="the 410 to bite")
    assert stored_record(store, delivery_cluster.namespace, f"{sub_id}~1") is None
    _behave(receiver)


def test_publications_over_the_tenant_rate_are_429(delivery_cluster: RunningCluster) -> None:
    # Fresh tenants start with a full bucket: 1,000 publications, refilling at 20/s.
    fast = httpx.Client(
        base_url=delivery_cluster.router_url,
        timeout=30,
        headers={"authorization": f"Bearer {tenant_key(delivery_cluster, f'rate-{os.getpid()}')}"},
    )
    batch = {"publications": [{"text": f"rate {n}"} for n in range(990)]}
    assert fast.post("/publications", json=batch).status_code == 202  # the burst
    over = fast.post("/publications", json={"publications": [{"text": "x"}] * 100})
    assert over.status_code == 429
    assert "rate limit of 20 publications/s" in over.text
    assert int(over.headers["retry-after"]) >= 4  # 100 tokens at 20/s, less the refill
    other = httpx.post(
        f"{delivery_cluster.router_url}/publications",
        json={"text": "another tenant is not slowed down"},
        headers={"authorization": f"Bearer {tenant_key(delivery_cluster, f'other-{os.getpid()}')}"},
    )
    assert other.status_code == 202


def test_the_client_waits_out_the_rate_limit_and_loses_nothing(
    delivery_cluster: RunningCluster, receiver: Receiver
) -> None:
    _behave(receiver)
    key = tenant_key(delivery_cluster, f"patient-{os.getpid()}")
    created = httpx.post(
        f"{delivery_cluster.router_url}/subscriptions",
        json={"query": "okapi", "callback_url": receiver.hook},
        headers={"authorization": f"Bearer {key}"},
    )
    assert created.status_code == 201
    sub_id = created.json()["id"]
    # 1,100 publications against a bucket of 1,000 refilling at 20/s: the last batches are 429s
    # until the bucket refills, which the client waits out. Without ids: the client names them.
    posts = [{"text": f"okapi number {n}"} for n in range(1_100)]

    async def publish() -> int:
        async with RouterClient(delivery_cluster.router_url, api_key=key, concurrency=2) as client:
            return await client.publish_many(posts, batch=100, progress=False)

    assert asyncio.run(publish()) == 1_100
    _wait(
        lambda: sum(s == sub_id for s, _ in receiver.pairs()) >= 1_100,
        what="every publication's match",
    )
    mine = [p for s, p in receiver.pairs() if s == sub_id]
    assert len(mine) == len(set(mine)) == 1_100  # refused batches were not routed: no repeats


def test_the_client_publishes_through_a_matcher_restart_and_loses_nothing(
    redis_url: str, receiver: Receiver
) -> None:
    cluster = start_cluster(redis_url, f"test-restart-{os.getpid()}", matchers=2)
    try:
        _behave(receiver)
        posts = sample_posts(4_000, seed=808)
        queries = post_queries(posts[:2_000], 300, seed=31)
        subscriptions = subscribe_terms(cluster, queries, receiver.hook)
        published = [Post(f"restart:{p.id}", p.text) for p in posts[2_000:]]
        expected = match_pairs(subscriptions, {p.id: analyse(p.text) for p in published})
        assert len(expected) > 500, "the workload should produce plenty of matches"
        # Batches for matcher 0 are 503s until the supervisor has restarted it and it has
        # rebuilt its trie; the client sends them again until then.
        os.kill(cluster.matcher_pid(0), signal.SIGKILL)

        async def publish() -> int:
            async with RouterClient(cluster.router_url, concurrency=4) as client:
                body = [{"id": p.id, "text": p.text} for p in published]
                return await client.publish_many(body, batch=100, progress=False)

        assert asyncio.run(publish()) == len(published)
        _wait(
            lambda: expected <= set(receiver.pairs()),
            timeout=60,
            what="every match of the publications sent again",
        )
        ours = {pair for pair in receiver.pairs() if pair[0] in subscriptions}
        assert ours - expected == set()
    finally:
        stop_cluster(cluster)


def test_the_client_publishes_through_a_router_restart(redis_url: str, receiver: Receiver) -> None:
    cluster = start_cluster(redis_url, f"test-router-restart-{os.getpid()}", matchers=1)
    try:
        _behave(receiver)
        posts = sample_posts(1_000, seed=909)
        subscriptions = subscribe_terms(cluster, post_queries(posts, 100, seed=5), receiver.hook)
        expected = match_pairs(subscriptions, {p.id: analyse(p.text) for p in posts})
        body = [{"id": p.id, "text": p.text} for p in posts]

        async def publish() -> int:
            async with RouterClient(cluster.router_url) as client:
                await client.publish_many(body[:1], progress=False)  # the router has answered
                router = (await client._http.get("/stats")).json()["pid"]
                os.kill(router, signal.SIGKILL)  # the supervisor starts another on the same port
                return await client.publish_many(body[1:], batch=100, progress=False)

        assert asyncio.run(publish()) == len(posts) - 1
        _wait(lambda: expected <= set(receiver.pairs()), timeout=60, what="every match")
    finally:
        stop_cluster(cluster)


def test_a_killed_matcher_hands_its_pending_deliveries_to_its_successor(
    redis_url: str, receiver: Receiver
) -> None:
    """kill -9 while a slow subscriber has deliveries pending: all arrive, duplicates share ids."""
    cluster = start_cluster(redis_url, f"test-crash-{os.getpid()}", matchers=1, env=FAST_RETRIES)
    try:
        _behave(receiver, delay_s=2.0)  # every message is still in flight when we kill
        posts = sample_posts(3_000, seed=606)
        queries = post_queries(posts, 150, seed=607)
        with httpx.Client(base_url=cluster.router_url, timeout=60, headers=AUTH) as api:
            subs = {}
            for query in queries:
                created = api.post(
                    "/subscriptions", json={"query": query, "callback_url": receiver.hook}
                )
                subs[created.json()["id"]] = analyse(query)
        published = [Post(f"crash:{p.id}", p.text) for p in posts]
        expected = match_pairs(subs, {p.id: analyse(p.text) for p in published})
        assert len(expected) > 500
        offset = receiver.count()
        publish_posts(cluster, published)
        stats = httpx.get(f"{cluster.matcher_urls[0]}/stats").json()
        assert stats["deliveries_pending"] > 0, "the subscriber should still be behind"
        os.kill(stats["pid"], signal.SIGKILL)
        _behave(receiver)
        cluster.wait_ready()
        _wait(
            lambda: httpx.get(f"{cluster.matcher_urls[0]}/stats").json()["pid"] != stats["pid"],
            what="the restart",
        )
        _wait(
            lambda: httpx.get(f"{cluster.matcher_urls[0]}/stats").json()["deliveries_pending"] == 0,
            timeout=120,
            what="the successor to drain the outbox",
        )
        deliveries = httpx.get(f"{receiver.url}/deliveries", params={"offset": offset}).json()
        pairs = [tuple(p) for p in deliveries["pairs"]]
        missing = expected - set(pairs)
        assert not missing, f"{len(missing)} matches never delivered"
        assert set(pairs) <= expected
        ids = defaultdict(set)
        for pair, webhook in zip(pairs, deliveries["webhook_ids"], strict=True):
            ids[pair].add(webhook)
        assert all(len(found) == 1 for found in ids.values()), "a redelivery changed its id"
    finally:
        _behave(receiver)
        stop_cluster(cluster)


def _publish_until_refused(
    cluster: RunningCluster, batches: Iterator[list[dict[str, str]]], tries: int
) -> tuple[list[dict[str, str]], list[dict[str, str]], str]:
    """Publish batch after batch until the router refuses one (503); returns the publications
    accepted, the batch refused and the refusal's message."""
    accepted: list[dict[str, str]] = []
    with httpx.Client(base_url=cluster.router_url, timeout=30, headers=AUTH) as api:
        for _ in range(tries):
            batch = next(batches)
            answer = api.post("/publications", json={"publications": batch})
            if answer.status_code == 503:
                return accepted, batch, answer.json()["detail"]
            answer.raise_for_status()
            accepted += batch
            time.sleep(0.3)  # the matcher measures its backlog every 0.2 s
    raise AssertionError(f"{tries} batches accepted: the matcher never pushed back")


PATIENT = {
    "WORDCAST_MATCHER_DELIVERY_ATTEMPTS": "25",
    "WORDCAST_MATCHER_DELIVERY_MAX_BACKOFF_S": "5",
}


def _resume_and_check(
    cluster: RunningCluster,
    receiver: Receiver,
    sub_id: str,
    accepted: list[dict[str, str]],
    refused: list[dict[str, str]],
) -> None:
    """The receiver comes back: what was accepted is delivered, and the refused batch, sent again
    by the client until the backlog has drained, is accepted and delivered too; nothing twice."""
    _behave(receiver)

    async def publish_again() -> int:
        async with RouterClient(cluster.router_url) as client:
            return await client.publish_many(refused, progress=False)

    assert asyncio.run(publish_again()) == len(refused)
    expected = [(sub_id, p["id"]) for p in accepted + refused]
    _wait(
        lambda: sorted(p for p in receiver.pairs() if p[0] == sub_id) == sorted(expected),
        timeout=60,
        what="every match, once",
    )


def test_a_full_outbox_pushes_back_on_publishers_and_loses_nothing(
    redis_url: str, receiver: Receiver
) -> None:
    env = {"WORDCAST_MATCHER_OUTBOX_MAX": "3"} | PATIENT
    cluster = start_cluster(redis_url, f"test-outbox-max-{os.getpid()}", matchers=1, env=env)
    try:
        _behave(receiver, status=503, retry_after="2")  # each message waits in the outbox
        with httpx.Client(base_url=cluster.router_url, timeout=30, headers=AUTH) as api:
            hook = {"query": "quokka", "callback_url": receiver.hook}
            sub_id = api.post("/subscriptions", json=hook).json()["id"]
        batches = ([{"id": f"q-{n}", "text": f"a quokka smiles {n}"}] for n in itertools.count())
        accepted, refused, reason = _publish_until_refused(cluster, batches, tries=30)
        assert "the outbox is full" in reason
        # One message a batch: refused once three are waiting (a fourth may slip in while the
        # depth the matcher last measured is up to 0.2 s old).
        assert 3 <= len(accepted) <= 4
        _resume_and_check(cluster, receiver, sub_id, accepted, refused)
    finally:
        stop_cluster(cluster)


def test_redis_near_its_memory_limit_pushes_back_on_publishers_and_loses_nothing(
    redis_url: str, receiver: Receiver
) -> None:
    used = int(connect_sync(redis_url).info("memory")["used_memory"])
    limit = used + 24 * 2**20
    # Attempts enough for the receiver's refusals however long filling Redis takes (on a busy
    # machine, 8 could run out and dead-letter a message), each at most 5 s after the last, so
    # the messages go within seconds once the receiver is back.
    env = {"WORDCAST_MATCHER_REDIS_MEMORY_MAX": str(limit)} | PATIENT
    cluster = start_cluster(redis_url, f"test-memory-max-{os.getpid()}", matchers=1, env=env)
    try:
        assert httpx.get(f"{cluster.matcher_urls[0]}/stats").json()["redis_memory_limit"] == limit
        _behave(receiver, status=503, retry_after="2")
        with httpx.Client(base_url=cluster.router_url, timeout=30, headers=AUTH) as api:
            hook = {"query": "numbat", "callback_url": receiver.hook}
            sub_id = api.post("/subscriptions", json=hook).json()["id"]
        # 100 matches of 8 KB texts a batch: each message in the outbox is about 800 KB.
        text = "numbat " + "termite " * 1_000
        batches = (
            [{"id": f"n-{n}-{k}", "text": text} for k in range(100)] for n in itertools.count()
        )
        accepted, refused, reason = _publish_until_refused(cluster, batches, tries=100)
        assert "Redis holds" in reason
        assert "WORDCAST_MATCHER_REDIS_MEMORY_MAX" in reason
        # Refused once the messages fill about the 24 MiB left: not long before, nor long after.
        assert 16 * 2**20 <= len(accepted) * len(text) <= 40 * 2**20
        # Whether it says the batches are refused depends on the moment: Redis's memory hovers at
        # the limit, with the buffers of the requests in flight.
        status = _wordcast(cluster, "status")
        assert status.returncode == 0, status.stderr
        assert f"MiB of the {limit / 2**20:,.0f} MiB the matchers allow" in status.stdout
        _resume_and_check(cluster, receiver, sub_id, accepted, refused)
    finally:
        stop_cluster(cluster)


def test_a_failing_webhook_does_not_hold_up_the_deliveries_behind_it(
    redis_url: str, receiver: Receiver
) -> None:
    """Four delivery slots; twelve messages for a webhook that refuses connections (each backs
    off for half a minute on average over its eight attempts) recorded before one for a working
    webhook. Had a message kept its slot while backing off, the working webhook's would wait
    until eight of the twelve were given up on."""
    env = {"WORDCAST_MATCHER_DELIVERY_CONCURRENCY": "4"}
    cluster = start_cluster(redis_url, f"test-behind-{os.getpid()}", matchers=1, env=env)
    try:
        _behave(receiver)
        nobody = f"http://127.0.0.1:{free_port()}/hook"
        with httpx.Client(base_url=cluster.router_url, timeout=30, headers=AUTH) as api:
            failing = {"query": "wallaby", "callback_url": nobody}
            failing_id = api.post("/subscriptions", json=failing).json()["id"]
            working = {"query": "platypus", "callback_url": receiver.hook}
            working_id = api.post("/subscriptions", json=working).json()["id"]
            for n in range(12):
                post = {"id": f"wallaby-{n}", "text": f"a wallaby hops {n}"}
                api.post("/publications", json=post).raise_for_status()
            post = {"id": "platypus-0", "text": "a platypus swims"}
            api.post("/publications", json=post).raise_for_status()
            _wait(
                lambda: (working_id, "platypus-0") in receiver.pairs(),
                timeout=20,
                what="the working webhook's match",
            )
            letters = api.get("/deadletters", params={"limit": 1000}).json()["dead_letters"]
        given_up = [d for d in letters if failing_id in d["subscription_ids"]]
        assert len(given_up) < 8
        # The platypus came after all twelve: each is in one of the four slots, waiting for its
        # next attempt, or given up on.
        stats = httpx.get(f"{cluster.matcher_urls[0]}/stats").json()
        assert stats["deliveries_waiting"] >= 12 - 4 - len(given_up)
    finally:
        stop_cluster(cluster)
