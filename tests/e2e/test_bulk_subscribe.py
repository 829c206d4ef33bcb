"""Registering in bulk: idempotency keys over the API, and `wordcast subscribe --file`, resumed
after a kill -9 without a duplicate (a real cluster, the real command line)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest

from tests.helpers import (
    AUTH,
    Receiver,
    RunningCluster,
    eventually,
    rewrite_record,
    stored_record,
    wordcast_cli,
)
from wordcast.cli.imports import done_path
from wordcast.errors import Conflict
from wordcast.services.router.batches import BatchItem
from wordcast.services.router.settings import RouterSettings
from wordcast.services.router.state import RouterState
from wordcast.storage import Store
from wordcast.storage.redis import connect, connect_sync


def _listed(router_url: str) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    cursor = 0
    while True:
        page = httpx.get(
            f"{router_url}/subscriptions",
            params={"cursor": cursor, "limit": 1000},
            headers=AUTH,
            timeout=30,
        ).json()
        found += page["subscriptions"]
        cursor = page["next_cursor"]
        if not cursor:
            return found


def test_a_key_given_again_answers_with_the_subscription_it_made(
    cluster: RunningCluster, receiver: Receiver
) -> None:
    url = cluster.router_url
    batch = [
        {"query": "otter raft", "callback_url": receiver.hook, "key": "k-1"},
        {"query": "(heron OR egret) marsh", "callback_url": receiver.hook, "key": "k-2"},
        {"pattern": "kingfish*", "callback_url": receiver.hook, "key": "k-3"},
        {"query": "no key here", "callback_url": receiver.hook},
    ]
    first = httpx.post(f"{url}/subscriptions/batch", json={"subscriptions": batch}, headers=AUTH)
    assert first.status_code == 201, first.text
    again = httpx.post(
        f"{url}/subscriptions/batch", json={"subscriptions": batch[:3]}, headers=AUTH
    )
    assert again.status_code == 201, again.text
    made, found = first.json()["subscriptions"], again.json()["subscriptions"]
    assert [s["id"] for s in found] == [s["id"] for s in made[:3]]
    assert [s["secret"] for s in found] == [s["secret"] for s in made[:3]]
    assert [s["query"] or s["pattern"] for s in made] == [
        "otter raft",
        "(heron OR egret) marsh",
        "kingfish*",
        "no key here",
    ]
    one = httpx.post(f"{url}/subscriptions", json=batch[0], headers=AUTH)
    assert one.status_code == 201
    assert one.json()["id"] == made[0]["id"]
    assert len(_listed(url)) == 4

    reused = {"query": "something else", "callback_url": receiver.hook, "key": "k-1"}
    refused = httpx.post(
        f"{url}/subscriptions/batch",
        json={"subscriptions": [{"query": "fresh words", "callback_url": receiver.hook}, reused]},
        headers=AUTH,
    )
    assert refused.status_code == 409
    assert "subscription 1: the key 'k-1' made a different subscription" in refused.text
    twice = httpx.post(
        f"{url}/subscriptions/batch",
        json={"subscriptions": [batch[0] | {"key": "k-9"}, batch[1] | {"key": "k-9"}]},
        headers=AUTH,
    )
    assert twice.status_code == 422
    assert "subscription 1: its key 'k-9' is subscription 0's too" in twice.text
    assert len(_listed(url)) == 4  # neither refused batch stored anything

    # Deleted, its key makes it anew.
    gone = httpx.delete(f"{url}/subscriptions/{made[0]['id']}", headers=AUTH)
    assert gone.status_code == 204
    anew = httpx.post(f"{url}/subscriptions", json=batch[0], headers=AUTH)
    assert anew.status_code == 201
    assert anew.json()["id"] == made[0]["id"]
    # Its secret is its endpoint's, which outlives it: the same as before.
    assert (anew.json()["endpoint_id"], anew.json()["secret"]) == (
        made[0]["endpoint_id"],
        made[0]["secret"],
    )

    # The keyed subscriptions match like any other, and the matchers time each delivery from
    # the router's acceptance.
    before = [_latency(url) for url in cluster.matcher_urls]
    sent_at = time.time()
    published = httpx.post(
        f"{url}/publications",
        json={"publications": [{"id": "p-1", "text": "An egret in the marsh, an otter raft"}]},
        headers=AUTH,
    )
    assert published.status_code == 202, published.text
    eventually(
        lambda: (
            {(s, p) for s, p in receiver.pairs() if p == "p-1"}
            == {(made[0]["id"], "p-1"), (made[1]["id"], "p-1")}
        ),
        what="the matches of the keyed subscriptions",
    )

    def timed() -> list[tuple[float, float]]:
        after = [_latency(url) for url in cluster.matcher_urls]
        timed = [(n1 - n0, s1 - s0) for (n0, s0), (n1, s1) in zip(before, after, strict=True)]
        assert sum(n for n, _ in timed) >= 1  # one message carried both matches, or one each
        return timed

    observed = eventually(timed, what="the deliveries timed")
    took = time.time() - sent_at
    assert all(0 < seconds <= took * n for n, seconds in observed if n)


def _clear(router_url: str) -> None:
    """Delete the tenant's subscriptions: the tests of this module share a cluster."""
    ids = [str(s["id"]) for s in _listed(router_url)]
    for start in range(0, len(ids), 1000):
        deleted = httpx.post(
            f"{router_url}/subscriptions/batch/delete",
            json={"ids": ids[start : start + 1000]},
            headers=AUTH,
            timeout=60,
        )
        assert deleted.status_code == 200, deleted.text


def _write_subscriptions(path: Path, hook: str, count: int) -> list[str]:
    queries = [f"w{n} w{n + 1}" if n % 7 else f"w{n} OR v{n}" for n in range(count)]
    lines = [orjson.dumps({"query": q, "callback_url": hook}).decode() for q in queries]
    lines[3] = orjson.dumps("w3 bare").decode()  # a bare string is a query
    path.write_text("\n".join(lines[:10]) + "\n\n" + "\n".join(lines[10:]) + "\n")
    return ["w3 bare" if n == 3 else q for n, q in enumerate(queries)]


def test_an_import_killed_part_way_resumes_without_duplicates(
    cluster: RunningCluster, receiver: Receiver, tmp_path: Path
) -> None:
    _clear(cluster.router_url)
    subs = tmp_path / "subs.jsonl"
    queries = _write_subscriptions(subs, receiver.hook, 6_000)
    done = tmp_path / "subs.jsonl.wordcast-done"
    args = ["subscribe", "--file", str(subs), "--callback", receiver.hook]
    command = [sys.executable, "-m", "wordcast", *args]
    importing = subprocess.Popen(
        [*command, "--router", cluster.router_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    eventually(
        lambda: (done.exists() and int(done.read_text()) >= 1_000) or importing.poll() is not None,
        what="part of the import",
    )
    assert importing.poll() is None, importing.communicate()
    os.kill(importing.pid, signal.SIGKILL)
    importing.wait()
    killed_after = int(done.read_text())
    assert killed_after < 6_001, "the import finished before it could be interrupted"

    resumed = wordcast_cli(*args, router=cluster.router_url)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming after line {killed_after:,}" in resumed.stderr
    assert "imported before" in resumed.stdout
    listed = _listed(cluster.router_url)
    assert sorted(str(s["query"]) for s in listed) == sorted(queries)  # each exactly once
    assert int(done.read_text()) == 6_001  # the last line's number (one blank line)

    nothing = wordcast_cli(*args, router=cluster.router_url)
    assert nothing.returncode == 0, nothing.stderr
    assert "every line was imported before" in nothing.stderr
    done.unlink()
    again = wordcast_cli(*args, router=cluster.router_url, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "6000 subscriptions sent" in again.stdout
    assert len(_listed(cluster.router_url)) == 6_000  # the keys found them all


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"query": "a b"}\nnot json\n', "subs.jsonl:2: not JSON"),
        ('{"query": "a b", "when": 1}\n', "subs.jsonl:1: unknown field 'when'"),
        ("[1, 2]\n", 'subs.jsonl:1: expected an object such as {"query": "white house"}'),
        ('{"query": "a b", "callback_url": "http://169.254.169.254/"}\n', "line 1 (subscription 0"),
    ],
)
def test_a_bad_line_is_named_and_nothing_after_it_is_sent(
    cluster: RunningCluster, receiver: Receiver, tmp_path: Path, text: str, says: str
) -> None:
    _clear(cluster.router_url)
    subs = tmp_path / "subs.jsonl"
    subs.write_text(text)
    result = wordcast_cli(
        "subscribe", "--file", str(subs), "--callback", receiver.hook, router=cluster.router_url
    )
    assert result.returncode == 2
    assert says in result.stderr
    assert _listed(cluster.router_url) == []


def _latency(matcher_url: str) -> tuple[float, float]:
    """(count, sum) of a matcher's publish→webhook histogram."""
    found = {"count": 0.0, "sum": 0.0}
    for line in httpx.get(f"{matcher_url}/metrics", timeout=10).text.splitlines():
        for what in found:
            if line.startswith(f"wordcast_publish_to_webhook_seconds_{what} "):
                found[what] = float(line.split()[1])
    return found["count"], found["sum"]


def test_a_keyed_pattern_stored_meanwhile_is_a_conflict_and_the_batch_is_withdrawn(
    redis_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two requests with the same key race: the second finds the key's id stored only when its
    own write is refused. It answers 409 (sent again, it is answered with the first's), and
    what it stored before is withdrawn."""
    hook = "http://127.0.0.1:9/hook"

    async def scenario() -> None:
        client = connect(redis_url)
        store = Store(client, namespace)
        settings = RouterSettings(
            environment="development",
            matcher_urls=["http://127.0.0.1:9"],  # nobody: syncs fail, logged
            sync_timeout_s=0.2,
            callback_allow=["127.0.0.0/8"],
        )
        state = RouterState(settings, store)
        first = await state.subscribing.subscribe_batch(
            [BatchItem("pattern", "kingfish*", hook, "", "k-1")], "t1"
        )

        async def holds_nothing(tenant: str, sub_ids: list[str]) -> list[bool]:
            return [False] * len(sub_ids)  # read before the racing request stored

        monkeypatch.setattr(store.subscriptions, "tenant_holds", holds_nothing)
        racing = [
            BatchItem("query", "otter raft", hook),
            BatchItem("pattern", "kingfish*", hook, "", "k-1"),
        ]
        with pytest.raises(Conflict, match=r"subscription 1: another request with the key 'k-1'"):
            await state.subscribing.subscribe_batch(racing, "t1")
        assert await store.subscriptions.tenant_count("t1") == 1
        assert (await store.subscriptions.get(first[0].id)).pattern == "kingfish*"
        assert await store.word_maps.subscribed_words() == set()  # the query was withdrawn
        await state.close()
        await client.aclose()

    asyncio.run(scenario())


def test_the_command_line_warns_of_a_query_read_otherwise_and_refuses_it_when_strict(
    cluster: RunningCluster, receiver: Receiver, tmp_path: Path, redis_url: str
) -> None:
    _clear(cluster.router_url)
    router = cluster.router_url
    strict = wordcast_cli("subscribe", "--strict", "obama", "or", "biden", router=router)
    assert strict.returncode == 2
    assert "`or` is a word" in strict.stderr
    assert _listed(router) == []
    ran = wordcast_cli("subscribe", "obama", "or", "biden", router=router)
    assert ran.returncode == 0, ran.stderr
    assert "warning: `or` is a word" in ran.stderr
    assert '"warnings"' in ran.stdout  # the answer, on stdout as ever
    subs = tmp_path / "subs.jsonl"
    subs.write_text('{"query": "white house"}\n{"query": "pythn~1"}\n')
    imported = wordcast_cli(
        "subscribe", "--file", str(subs), "--callback", receiver.hook, router=router
    )
    assert imported.returncode == 0, imported.stderr
    assert "warning: subs.jsonl line 2: `pythn~1`: fuzzy matching is not supported" in (
        imported.stderr
    )
    assert "line 1:" not in imported.stderr
    # A query stored by a version that read it otherwise (``!spam ham`` was two words).
    earlier = wordcast_cli("subscribe", "ham", "spam", router=router)
    assert earlier.returncode == 0, earlier.stderr
    client = connect_sync(redis_url)
    record = stored_record(client, cluster.namespace, orjson.loads(earlier.stdout)["id"])
    assert record is not None
    rewrite_record(client, cluster.namespace, record._replace(query="!spam ham"))
    assert len(_listed(router)) == 4
    # The stored queries read otherwise, each with its warnings, and only those.
    checked = wordcast_cli("subscriptions", "--check", router=router)
    assert checked.returncode == 0, checked.stderr
    assert "of 4 subscriptions, these are read otherwise" in checked.stderr
    lines = checked.stdout.splitlines()
    heads = [line for line in lines if not line.startswith(" ")]
    assert len(heads) == 3, lines
    assert all(q in " ".join(heads) for q in ("'obama or biden'", "'pythn~1'", "'!spam ham'"))
    said = [line for line in lines if line.startswith("    ")]
    assert any("`or` is a word" in line for line in said)
    assert any("stored by an earlier version as the words `ham spam`" in line for line in said)
    _clear(router)
    done_path(subs).unlink()  # sent again from the start
    refused = wordcast_cli(
        "subscribe", "--strict", "--file", str(subs), "--callback", receiver.hook, router=router
    )
    assert refused.returncode == 2
    assert "line 2 (subscription 1 of the batch): query 'pythn~1'" in refused.stderr
    assert _listed(router) == []
