"""Boolean queries through the whole cluster, beside plain ones and with every matcher engine,
judged by an oracle that evaluates each query's tree on each post's terms (not the alternatives
the cluster stores and routes)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis

from tests.e2e.support import (
    boolean_oracle,
    check_exact,
    delivered_after,
    engine_cluster,
    publish_posts,
    subscribe_queries,
)
from tests.helpers import AUTH, Receiver, RunningCluster, placed_on
from wordcast.client import RouterClient
from wordcast.corpus.workload import (
    Post,
    post_boolean_queries,
    post_queries,
    post_span_queries,
    sample_posts,
)
from wordcast.query.analysis import Analyser, analyse, term_positions
from wordcast.query.boolean import evaluate, parse_query, parse_tree
from wordcast.query.filters import filter_terms
from wordcast.query.languages import SNOWBALL, Detector, analyse_in_languages
from wordcast.storage.redis import connect_sync
from wordcast.webhooks.payload import matches_of


def _words_only(queries: dict[str, str], posts: list[Post]) -> set[tuple[str, str]]:
    """The (query, post) pairs where some alternative's words occur, whatever else it says:
    what the matchers' candidates are, before positions and filters are checked."""
    return {
        (sid, post.id)
        for post in posts
        for terms in [analyse(post.text)]
        for sid, query in queries.items()
        if any(set(clause.words) <= terms for clause in parse_query(query).clauses)
    }


def _records(client: redis.Redis, namespace: str, matchers: int) -> int:
    return sum(len(placed_on(client, namespace, m)) for m in range(matchers))


def test_boolean_queries_deliver_exactly_the_oracle_matches_once(
    cluster: RunningCluster, receiver: Receiver, redis_url: str
) -> None:
    posts = sample_posts(9_000, seed=909)
    source, first, second = posts[:3_000], posts[3_000:7_000], posts[7_000:]
    boolean = post_boolean_queries(source, 400, seed=90)
    plain = post_queries(source, 200, seed=91)
    router = httpx.Client(base_url=cluster.router_url, timeout=30, headers=AUTH)
    store = connect_sync(redis_url)
    records_before = _records(store, cluster.namespace, len(cluster.matcher_urls))

    # Most through the batch API, a few one at a time (the single-subscription path).
    queries = subscribe_queries(cluster, boolean[:380] + plain, receiver.hook)
    for query in boolean[380:]:
        created = router.post(
            "/subscriptions", json={"query": query, "callback_url": receiver.hook}
        )
        assert created.status_code == 201, created.text
        queries[created.json()["id"]] = query
    alternatives = sum(len(parse_query(q).clauses) for q in queries.values())
    assert alternatives > len(queries) + 200, "most boolean queries should have two alternatives"
    assert _records(store, cluster.namespace, len(cluster.matcher_urls)) == (
        records_before + alternatives
    )
    shown = router.get(f"/subscriptions/{next(iter(queries))}").json()
    assert shown["query"] == boolean[0]
    assert len(shown["alternatives"]) == len(parse_query(boolean[0]).clauses)

    offset = receiver.count()
    expected = boolean_oracle(queries, first)
    # Each query parsed and each post analysed once (per pair, this loop took a minute).
    clauses = [parse_query(q).clauses for q in queries.values()]
    analysed = [analyse(post.text) for post in first]
    overlapping = sum(
        1 for held in clauses for terms in analysed if sum(c.holds(terms) for c in held) > 1
    )
    assert len(expected) > 3_000, len(expected)
    assert overlapping > 50, overlapping
    publish_posts(cluster, first)
    check_exact(delivered_after(cluster, receiver, offset, len(expected)), expected)

    # Deleting a boolean query deletes every alternative; the others keep matching exactly.
    gone = [sid for sid, q in queries.items() if "OR" in q or "NOT" in q][:150]
    for sid in gone:
        assert router.delete(f"/subscriptions/{sid}").status_code == 204
        assert router.get(f"/subscriptions/{sid}").status_code == 404
        del queries[sid]
    remaining = sum(len(parse_query(q).clauses) for q in queries.values())
    assert _records(store, cluster.namespace, len(cluster.matcher_urls)) == (
        records_before + remaining
    )
    offset = receiver.count()
    expected = boolean_oracle(queries, second)
    publish_posts(cluster, second)
    check_exact(delivered_after(cluster, receiver, offset, len(expected)), expected)

    # A query that would match nearly everything is refused and nothing is stored.
    refused = router.post(
        "/subscriptions", json={"query": "NOT python", "callback_url": receiver.hook}
    )
    assert refused.status_code == 422
    assert "requires no word" in refused.json()["detail"]
    assert _records(store, cluster.namespace, len(cluster.matcher_urls)) == (
        records_before + remaining
    )


def test_phrase_and_proximity_queries_deliver_exactly_the_oracle_matches(
    cluster: RunningCluster, receiver: Receiver
) -> None:
    posts = [Post(f"span:{p.id}", p.text) for p in sample_posts(1_500, seed=1313)]
    queries = subscribe_queries(cluster, post_span_queries(posts, 80, seed=131), receiver.hook)
    expected = boolean_oracle(queries, posts)
    # Positions must bite: posts holding every word a phrase or window needs, in other places.
    words_only = _words_only(queries, posts)
    assert len(expected) > 80, len(expected)
    assert len(words_only - expected) > 20, len(words_only - expected)
    offset = receiver.count()
    publish_posts(cluster, posts)
    # The module's earlier subscriptions (the same tenant's) match some of these posts too.
    delivered = delivered_after(cluster, receiver, offset, len(expected))
    check_exact([pair for pair in delivered if pair[0] in queries], expected)

    # Each match says why: the alternative that delivers, and where its spans hold in the text.
    raw = httpx.get(receiver.url + "/deliveries/raw", timeout=30).json()
    explained = [
        m
        for r in raw
        for m in matches_of(orjson.loads(r["body"]))
        if m["subscription_id"] in queries
    ]
    assert explained
    for match in explained:
        text, matched = match["text"], match["matched"]
        terms, positions = analyse(text), term_positions(text)
        clauses = parse_query(queries[match["subscription_id"]]).clauses
        first = next(k for k, c in enumerate(clauses) if c.holds(terms, positions))
        assert matched.get("alternative", 0) == first, (match, first)
        for span in clauses[first].spans:
            offsets = matched["spans"][str(span)]
            assert offsets
            assert all(span.holds(term_positions(text[a:b])) for a, b in offsets)


def test_attribute_filters_deliver_exactly_the_oracle_matches(
    cluster: RunningCluster, receiver: Receiver
) -> None:
    rng = random.Random(1414)
    posts = [Post(f"attr:{p.id}", p.text) for p in sample_posts(1_500, seed=1414)]
    attributes: dict[str, dict[str, Any]] = {}
    for post in posts:
        attrs: dict[str, Any] = {"source": rng.choice(["rss", "api", "Web  Crawl"])}
        if rng.random() < 0.3:
            attrs["author"] = rng.choice(["AP News", "Reuters"])
        if rng.random() < 0.5:
            attrs["tags"] = rng.sample(["sport", "tech", "world"], rng.randint(0, 2))
        if rng.random() < 0.4:
            attrs["url"] = f"https://example.org/{post.id}"
        attrs["score"] = rng.randint(1, 3)
        attributes[post.id] = attrs
    shapes = ["{q} source:rss", "{q} -source:rss", "{q} has:url", '{q} author:"ap news"',
              "{q} tags:sport", "({q}) NOT tags:tech", "{q} OR ({r} source:api)",
              '{q} source:"web crawl" score:2']  # fmt: skip
    words = post_queries(posts, 160, seed=141, sizes=(1, 1, 2))
    texts = [rng.choice(shapes).format(q=words[2 * k], r=words[2 * k + 1]) for k in range(80)]
    queries = subscribe_queries(cluster, texts, receiver.hook)
    trees = {sid: parse_tree(query) for sid, query in queries.items()}
    expected = {
        (sid, post.id)
        for post in posts
        for terms in [analyse(post.text) | set(filter_terms(attributes[post.id]))]
        for sid, tree in trees.items()
        if evaluate(tree, terms, term_positions(post.text))
    }
    # The filters must bite: posts with the words that the filters turn away.
    words_only = _words_only(queries, posts)
    assert len(expected) > 80, len(expected)
    assert len(words_only - expected) > 80, len(words_only - expected)
    offset = receiver.count()

    async def publish() -> None:
        async with RouterClient(cluster.router_url, concurrency=4) as client:
            await client.publish_many(
                [{"id": p.id, "text": p.text, "attributes": attributes[p.id]} for p in posts],
                progress=False,
            )

    asyncio.run(publish())
    delivered = delivered_after(cluster, receiver, offset, len(expected))
    check_exact([pair for pair in delivered if pair[0] in queries], expected)


def test_languages_deliver_exactly_the_oracle_matches(
    cluster: RunningCluster, receiver: Receiver
) -> None:
    rng = random.Random(1515)
    pool = sample_posts(20_000, seed=1515)
    detected = Detector.detect_many([p.text for p in pool])
    foreign = [(p, code) for p, code in zip(pool, detected, strict=True) if code != "en"]
    english = [p for p, code in zip(pool, detected, strict=True) if code == "en"][:300]
    posts = [Post(f"lang:{p.id}", p.text) for p, _ in foreign] + [
        Post(f"lang:{p.id}", p.text) for p in english
    ]
    # A third say their language; some English posts claim German, which a given language wins.
    given: dict[str, str | None] = {p.id: None for p in posts}
    for post, (_, code) in zip(posts, foreign, strict=False):
        if rng.random() < 0.3:
            given[post.id] = code
    for post in posts[-40:]:
        given[post.id] = "de"
    queries_written = []
    for source, code in rng.sample(foreign, 60):
        words = [w for w in source.text.split() if w.isalpha() and len(w) > 3][:2]
        if words and code in SNOWBALL:
            queries_written.append(f"{' '.join(words)} lang:{code}")
    for source in rng.sample(english, 30):
        words = [w for w in source.text.split() if w.isalpha() and len(w) > 3][:1]
        if words:
            queries_written.append(f"{words[0]} " + rng.choice(["-lang:en", "lang:de", ""]))
    assert len(queries_written) > 40
    queries = subscribe_queries(cluster, queries_written, receiver.hook)
    terms_of, codes = analyse_in_languages(
        [p.text for p in posts], [given[p.id] for p in posts], detect=True, analyser=Analyser()
    )
    trees = {sid: parse_tree(query) for sid, query in queries.items()}
    expected = {
        (sid, post.id)
        for post, terms, code in zip(posts, terms_of, codes, strict=True)
        for held in [set(terms) | set(filter_terms(None, code))]
        for sid, tree in trees.items()
        if evaluate(tree, held, term_positions(post.text))
    }
    marked = [sid for sid, q in queries.items() if "lang:" in q and "-lang" not in q]
    assert len([pair for pair in expected if pair[0] in marked]) > 30, len(expected)
    offset = receiver.count()

    async def publish() -> None:
        async with RouterClient(cluster.router_url, concurrency=4) as client:
            await client.publish_many(
                [{"id": p.id, "text": p.text} | ({"lang": given[p.id]} if given[p.id] else {})
                 for p in posts],
                progress=False,
            )  # fmt: skip

    asyncio.run(publish())
    delivered = delivered_after(cluster, receiver, offset, len(expected))
    check_exact([pair for pair in delivered if pair[0] in queries], expected)


@pytest.mark.parametrize("engine", ["trie", "querynote"])  # the default is tested above
def test_every_matcher_engine_delivers_the_oracle_matches_of_boolean_queries(
    engine: str, redis_url: str, receiver: Receiver, tmp_path: Path
) -> None:
    posts = sample_posts(3_000, seed=313)
    with engine_cluster(redis_url, engine, posts[:1_500], tmp_path) as cluster:
        queries = subscribe_queries(
            cluster, post_boolean_queries(posts[:1_500], 200, seed=31), receiver.hook
        )
        offset = receiver.count()
        published = [Post(f"boolean-{engine}:{p.id}", p.text) for p in posts[1_500:]]
        expected = boolean_oracle(queries, published)
        assert len(expected) > 500
        publish_posts(cluster, published)
        check_exact(delivered_after(cluster, receiver, offset, len(expected)), expected)
