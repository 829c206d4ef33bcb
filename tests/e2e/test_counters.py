"""Counters per subscription: its matches, those delivered, those given up on (test_delivery
covers the dead letters), and its last match, shown by the API and the command line, counted
once per match whichever way it is delivered, and deleted with the subscription."""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.helpers import (
    AUTH,
    Receiver,
    RunningCluster,
    eventually,
    record_shards,
    wordcast_cli,
)
from wordcast.storage.redis import connect_sync


def _post(router: str, path: str, body: Any) -> httpx.Response:
    answer = httpx.post(f"{router}/{path}", json=body, headers=AUTH, timeout=30)
    assert answer.is_success, answer.text
    return answer


def _counters(router: str, sub_id: str) -> dict[str, Any]:
    answer = httpx.get(f"{router}/subscriptions/{sub_id}", headers=AUTH, timeout=30)
    assert answer.status_code == 200, answer.text
    counters: dict[str, Any] = answer.json()["counters"]
    return counters


def test_each_subscription_counts_its_matches_once_and_each_delivery(
    cluster: RunningCluster, receiver: Receiver, redis_url: str
) -> None:
    router = cluster.router_url
    subscriptions = {
        "webhook": {"query": "gannet dives", "callback_url": receiver.hook},
        "stream": {"query": "gannet dives"},
        "both": {
            "query": "gannet",
            "callback_url": receiver.hook,
            "delivery": ["webhook", "stream"],
        },
        "boolean": {"query": "gannet OR puffin", "callback_url": receiver.hook},
        "never": {"query": "albatross", "callback_url": receiver.hook},
    }
    ids = {
        name: _post(router, "subscriptions", body).json()["id"]
        for name, body in subscriptions.items()
    }
    assert _counters(router, ids["webhook"]) == {
        "matched": 0,
        "delivered": 0,
        "failed": 0,
        "last_match": None,
    }
    started = time.time()
    texts = ["a gannet dives", "the gannet dives again", "a puffin and a gannet"]
    _post(
        router,
        "publications",
        {"publications": [{"id": f"c{k}", "text": t} for k, t in enumerate(texts)]},
    )
    expected = {
        "webhook": (2, 2),
        "stream": (2, 2),
        "both": (3, 6),  # each match delivered twice, counted as matched once
        "boolean": (3, 3),  # both alternatives hold in c2: one match
        "never": (0, 0),
    }

    def counted() -> dict[str, tuple[int, int]]:
        shown = {name: _counters(router, sub_id) for name, sub_id in ids.items()}
        return {name: (c["matched"], c["delivered"]) for name, c in shown.items()}

    eventually(lambda: counted() == expected, 30, 0.1, "the counters")
    last = _counters(router, ids["both"])["last_match"]
    assert started - 1 <= last <= time.time() + 1
    assert _counters(router, ids["never"])["last_match"] is None

    # The listing shows them, and the command line.
    listed = httpx.get(f"{router}/subscriptions", params={"limit": 1000}, headers=AUTH, timeout=30)
    by_id = {s["id"]: s["counters"] for s in listed.json()["subscriptions"]}
    assert (by_id[ids["both"]]["matched"], by_id[ids["both"]]["delivered"]) == (3, 6)
    ran = wordcast_cli("subscriptions", "--match", "gannet OR", router=router)
    assert ran.returncode == 0, ran.stderr
    assert "(3 matched, 3 delivered, 0 failed)" in ran.stdout

    # Deleted, a subscription's counters go with it.
    client = connect_sync(redis_url)
    counters = [keys.counters for keys in record_shards(client, cluster.namespace)]
    assert any(client.hexists(key, ids["both"]) for key in counters)
    httpx.delete(f"{router}/subscriptions/{ids['both']}", headers=AUTH, timeout=30)
    assert not any(client.hexists(key, ids["both"]) for key in counters)


def test_a_tally_counts_for_its_own_incarnation_only(redis_url: str) -> None:
    """The counters script on a real Redis: a tally the matcher knows the incarnation of adds
    without reading the record once the counters hold that incarnation; one of an earlier
    incarnation, or from before the record was made, or of a deleted record, changes nothing
    that is read; a re-made subscription's counters start afresh."""
    import orjson

    from wordcast.storage.counters import _ADD

    client = connect_sync(redis_url)
    counters, bucket = "{test-incarnation}:counters", "{test-incarnation}:bucket"  # one slot
    client.delete(counters, bucket)
    script = client.register_script(_ADD)
    made = time.time()

    def make(created: float) -> None:
        body = orjson.dumps(["q", "u", created, "secret", ""]).decode()
        client.hset(bucket, "s1", f"h\t0\tt\t\tw\t\n{body}")

    def add(matched: int, since: float, known: bool) -> tuple[int, str]:
        tally = f"s1 {matched} 0 0 {made:.3f} {since!r} {f'{since:.6f}' if known else '-'}"
        script(keys=[counters, bucket], args=_ADD.args(tallies=tally))
        m, _, _, _, created = client.hget(counters, "s1").split()
        return int(m), created

    make(made)
    assert add(2, made, known=True) == (2, f"{made:.6f}")  # the first: the record read
    assert add(3, made, known=True)[0] == 5  # the same incarnation: added
    assert add(1, made + 1, known=False)[0] == 6  # an event after it was made
    assert add(1, made - 1, known=False)[0] == 6  # one from before: dropped
    make(made + 10)  # deleted and made again
    assert add(7, made + 10, known=True) == (7, f"{made + 10:.6f}")  # afresh
    assert add(4, made, known=True)[0] == 7  # the earlier incarnation's: dropped
    both = f"s1 1 0 0 0 {made + 10!r} {made + 10:.6f} s1 2 0 0 0 {made + 11!r} -"  # two tallies
    script(keys=[counters, bucket, bucket], args=_ADD.args(tallies=both))
    assert client.hget(counters, "s1").split()[0] == "10"  # each saw what the one before left
    client.hdel(bucket, "s1")
    assert add(1, made + 20, known=False)[0] == 10  # deleted: nothing added
    client.delete(counters, bucket)
