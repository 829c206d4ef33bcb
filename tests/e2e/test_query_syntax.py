"""X's rule operators and Lucene's query syntax through a real cluster (issue 53): every example
of docs/GUIDE.md's compatibility table is stored, warned or refused as the table says, and the
cluster delivers exactly what the oracle (:mod:`wordcast.testing.queries`) reads each stored
query to match; random query strings never crash a router or a matcher, and any of them stored
is matched as the oracle reads it."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.support import check_exact, delivered_after
from tests.helpers import AUTH, Receiver, RunningCluster
from wordcast.client import RouterClient
from wordcast.corpus.workload import sample_posts
from wordcast.testing.queries import query_oracle

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "GUIDE.md"

# Posts the table's examples are about, each with what it says of itself: (id, text,
# attributes, language).
Posts = list[tuple[str, str, dict[str, Any], str | None]]
POOL: Posts = [
    ("q1", "The white house said the senate will vote on python today",
     {"source": "rss", "score": 4, "date": "2026-01-15", "from": "guido", "is": ["reply"],
      "media": ["a.png"], "author": "AP  News", "tags": ["world"], "place_country": "US"}, None),
    ("q2", "#Python 3.14 released by @guido, details at https://github.com/python/cpython.",
     {"source": "atom", "score": 2}, None),
    ("q3", "$AAPL earnings beat; apple and pear pie for dinner",
     {"source": "json", "score": 5, "date": "2026-02-01"}, None),
    ("q4", "Amazing python testing tips: a test a day keeps bugs away",
     {"is": "retweet", "to": "guido", "score": 3}, None),
    ("q5", "spam and ham again, and ham alone", {}, None),
    ("q6", "obama and biden met at the household", {"score": 1}, None),
    ("q7", "Die Bibliothek ist heute geschlossen", {}, "de"),
    ("q8", "python-dev mailing list news", {"tags": ["world", "tech"]}, None),
    ("q9", "vote in the senate on python after a long week", {}, None),
    ("q10", "white houses and white horses", {}, None),
    ("q11", "pythn is a typo of python", {}, None),
    ("q12", "ham for dinner with pear pie", {}, None),
]  # fmt: skip


def compatibility_table() -> list[tuple[str, str, str]]:
    """(form, example, what wordcast does: supported, read, refused or warned) of each row."""
    text = GUIDE.read_text()
    start = text.index("<!-- compatibility table")
    rows = []
    for line in text[start:].splitlines()[3:]:
        if not line.startswith("|"):
            break
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        example = re.fullmatch(r"`(.+)`", cells[2])
        assert example is not None, line
        rows.append((cells[1], example[1], cells[3].split(":")[0].split()[0]))
    return rows


TABLE = compatibility_table()


@pytest.fixture(scope="module")
def api(cluster: RunningCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster.router_url, timeout=30, headers=AUTH) as client:
        yield client


def _publish(cluster: RunningCluster, posts: Posts) -> None:
    async def run() -> None:
        items = []
        for pid, text, attributes, lang in posts:
            item: dict[str, Any] = {"id": pid, "text": text}
            if attributes:
                item["attributes"] = attributes
            if lang:
                item["lang"] = lang
            items.append(item)
        async with RouterClient(cluster.router_url, concurrency=4) as client:
            await client.publish_many(items, progress=False)

    asyncio.run(run())


def _oracle(queries: dict[str, str], posts: Posts) -> set[tuple[str, str]]:
    return query_oracle(
        queries,
        {pid: text for pid, text, _, _ in posts},
        {pid: attributes for pid, _, attributes, _ in posts},
        {pid: lang for pid, _, _, lang in posts},
    )


def test_the_table_has_every_kind_of_row() -> None:
    kinds = {kind for _, _, kind in TABLE}
    assert kinds == {"supported", "read", "refused", "warned"}, kinds
    assert len(TABLE) >= 40


def test_every_example_of_the_compatibility_table_is_read_as_the_table_says(
    cluster: RunningCluster, receiver: Receiver, api: httpx.Client
) -> None:
    stored: dict[str, str] = {}
    hook = {"callback_url": receiver.hook}
    for form, example, kind in TABLE:
        body = {"query": example, **hook}
        if kind == "refused":
            refused = api.post("/subscriptions", json=body)
            assert refused.status_code == 422, (form, refused.text)
            continue
        strict = api.post("/subscriptions", params={"strict": "true"}, json=body)
        if kind == "warned":
            assert strict.status_code == 422, (form, strict.text)
            assert "(strict)" in strict.text
            created = api.post("/subscriptions", json=body)
            assert created.status_code == 201, (form, created.text)
            assert created.json()["warnings"], form
        else:
            assert strict.status_code == 201, (form, strict.text)
            created = strict
            assert created.json()["warnings"] == [], (form, created.json())
        stored[created.json()["id"]] = example
    corpus: Posts = [(f"qs:{p.id}", p.text, {}, None) for p in sample_posts(300, seed=5353)]
    posts = POOL + corpus
    expected = _oracle(stored, posts)
    # Each example read as meant matches some post of the pool, and not every one.
    pool_ids = {pid for pid, _, _, _ in POOL}
    for sid, example in stored.items():
        kind = next(k for _, e, k in TABLE if e == example)
        hits = {pid for s, pid in expected if s == sid and pid in pool_ids}
        if kind != "warned":
            assert hits, example
            assert hits != pool_ids, example
    offset = receiver.count()
    _publish(cluster, posts)
    delivered = delivered_after(cluster, receiver, offset, len(expected))
    check_exact([pair for pair in delivered if pair[0] in stored], expected)
    for sid in stored:
        assert api.delete(f"/subscriptions/{sid}").status_code == 204


PIECES = ["python", "apple", "pie", "white", "house", "senate", "vote", "ham", "spam", "OR",
          "AND", "NOT", "||", "&&", "!", "-", "+", "(", ")", '"', "~2", "^3", "*", "?", "hous*",
          "te?t", "*ing", "#python", "@guido", "$aapl", 'url:"github"', "has:links",
          "score:>3", "score:[1 TO 5]", "source:(rss OR atom)", "\\", ":", "lang:de", "NEAR/2(",
          "or", "_exists_:media", "{", "]", "pythn~1", "é", "\u200d", "/x/"]  # fmt: skip


def _random_query(rng: random.Random) -> str:
    pieces = [rng.choice(PIECES) for _ in range(rng.randint(1, 7))]
    return "".join(p + rng.choice([" ", " ", ""]) for p in pieces).strip() or "python"


def test_random_queries_never_crash_and_what_is_stored_matches_as_the_oracle_reads_it(
    cluster: RunningCluster, receiver: Receiver, api: httpx.Client
) -> None:
    rng = random.Random(5353)
    stored: dict[str, str] = {}
    statuses: dict[int, int] = {}
    for _ in range(300):
        query = _random_query(rng)
        answer = api.post("/subscriptions", json={"query": query, "callback_url": receiver.hook})
        statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1
        assert answer.status_code in (201, 422), (query, answer.status_code, answer.text)
        if answer.status_code == 201:
            stored[answer.json()["id"]] = query
    assert statuses.get(201, 0) > 50, statuses
    assert statuses.get(422, 0) > 20, statuses
    corpus: Posts = [(f"qf:{p.id}", p.text, {}, None) for p in sample_posts(200, seed=5354)]
    posts = POOL + corpus
    expected = _oracle(stored, posts)
    assert len(expected) > 50, len(expected)
    offset = receiver.count()
    _publish(cluster, posts)
    delivered = delivered_after(cluster, receiver, offset, len(expected))
    check_exact([pair for pair in delivered if pair[0] in stored], expected)
    assert httpx.get(f"{cluster.router_url}/readyz", timeout=10).status_code == 200
    for sid in stored:
        assert api.delete(f"/subscriptions/{sid}").status_code == 204
