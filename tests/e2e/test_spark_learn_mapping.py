"""The Spark mapping learner builds the same graph as the pure code, and publishes versions."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from wordcast.corpus.workload import sample_posts
from wordcast.learning.partitioning import partition, word_network
from wordcast.learning.refine import learn_refined
from wordcast.learning.salb import Graph, SalbResult, learn, salb
from wordcast.learning.throughput import model
from wordcast.query.analysis import analyse
from wordcast.routing.mapping import LearnedMapping
from wordcast.spark_jobs import learn_mapping
from wordcast.storage import Store
from wordcast.storage.mappings import MappingStore
from wordcast.storage.redis import connect, stored_namespace


def test_spark_graph_and_mappings_agree_with_the_pure_learners(spark: Any) -> None:
    texts = [p.text for p in sample_posts(3_000, seed=11)]
    raw = spark.createDataFrame([(t,) for t in texts], ["summary"])
    docs = learn_mapping.analysed_documents(raw, "summary").cache()
    posts = [analyse(t) for t in texts if analyse(t)]

    graph, _ = learn_mapping.collect_graph(docs)
    pure = Graph.from_publications(posts)
    assert graph.vocabulary == pure.vocabulary  # same words, same frequency order
    assert graph.n_posts == pure.n_posts == len(posts)
    assert sorted(graph.frequencies().tolist()) == sorted(pure.frequencies().tolist())

    learned = learn_mapping.learn(docs, 4, "salb")
    assert learned.mapping.words == salb(posts, 4)
    assert learned.timings["posts"] == len(posts)
    hot = learn_mapping.learn(docs, 64, "salb", seed=1).mapping  # 64 matchers: frequent words split
    assert hot.versions
    assert hot.versions == learn(posts, 64, seed=1).versions

    frequencies, pairs = word_network(posts)
    refined = learn_mapping.learn(docs, 4, "salb-refined").mapping
    assert refined.words == learn_refined(pure, 4).words != learned.mapping.words

    gfcl = learn_mapping.learn(docs, 4, "gFCL").mapping
    assert gfcl.words == partition("gFCL", frequencies, pairs, 4)


def test_best_keeps_the_contender_that_models_best_on_held_out_posts(spark: Any) -> None:
    texts = [p.text for p in sample_posts(3_000, seed=12)]
    raw = spark.createDataFrame([(t,) for t in texts], ["summary"])
    docs = learn_mapping.analysed_documents(raw, "summary").cache()
    learning, held = learn_mapping.held_out_split(docs, learn_mapping.HELD_OUT, seed=0)
    learning_posts = [frozenset(r["terms"]) for r in learning.collect()]
    held_posts = [frozenset(r["terms"]) for r in held.collect()]
    assert len(learning_posts) + len(held_posts) == docs.count()
    assert 0.05 < len(held_posts) / docs.count() < 0.15
    # The split follows the terms, not Spark's partitioning.
    again = learn_mapping.held_out_split(docs.repartition(3), learn_mapping.HELD_OUT, seed=0)[1]
    assert sorted(map(sorted, held_posts)) == sorted(sorted(r["terms"]) for r in again.collect())

    subscribed = set().union(*held_posts[::2])
    chosen = learn_mapping.learn(docs, 8, "best", subscribed=subscribed)

    # The oracle: every contender learned by the pure code on the same posts, modelled again.
    frequencies, pairs = word_network(learning_posts)
    pure = {
        "salb": learn(learning_posts, 8),
        "salb-refined": learn_refined(Graph.from_publications(learning_posts), 8),
        "gFCL": partition("gFCL", frequencies, pairs, 8),
        "gNFCL": partition("gNFCL", frequencies, pairs, 8),
        "hash": {},
    }
    expected = {}
    for name, found in pure.items():
        words, versions, counts = (
            (found.words, found.versions, found.frequencies)
            if isinstance(found, SalbResult)
            else (found, {}, {})
        )
        mapping = LearnedMapping(1, 8, words, versions, counts)
        expected[name] = model(mapping, held_posts, subscribed).throughput
    assert list(chosen.scores) == list(learn_mapping.CONTENDERS)
    assert {n: s.throughput for n, s in chosen.scores.items()} == expected
    assert chosen.algorithm == max(expected, key=lambda n: expected[n])
    winner = pure[chosen.algorithm]
    assert chosen.mapping.words == (winner.words if isinstance(winner, SalbResult) else winner)
    assert chosen.timings["held_out"] == len(held_posts)


def test_entry_point_publishes_a_version_routers_can_load(tmp_path: Path, redis_url: str) -> None:
    source = tmp_path / "posts.tsv"
    rows = "".join(f"{p.id}\t{p.text}\n" for p in sample_posts(500, seed=3))
    source.write_text("id\ttext\n" + rows)
    namespace = stored_namespace(redis_url, f"test-learn-{uuid.uuid4().hex[:8]}")
    out = tmp_path / "mapping.json"
    args = ["--matchers", "3", "--corpus", str(source), "--namespace", namespace]
    assert learn_mapping.main([*args, "--publish", redis_url, "--out", str(out)]) == 0
    assert out.exists()

    async def load() -> tuple[Any, Any]:
        client = connect(redis_url)
        store = MappingStore(client, namespace)
        try:
            return await store.state(), await store.load(1, 3)
        finally:
            await client.aclose()

    (latest, active, _), mapping = asyncio.run(load())
    assert latest == 1
    assert active == 0
    assert isinstance(mapping, LearnedMapping)
    assert len(mapping.words) > 100


def test_entry_point_best_records_what_it_chose_from(tmp_path: Path, redis_url: str) -> None:
    source = tmp_path / "posts.tsv"
    rows = "".join(f"{p.id}\t{p.text}\n" for p in sample_posts(800, seed=4))
    source.write_text("id\ttext\n" + rows)
    namespace = stored_namespace(redis_url, f"test-best-{uuid.uuid4().hex[:8]}")
    args = ["--matchers", "4", "--corpus", str(source), "--namespace", namespace]
    assert learn_mapping.main([*args, "--algorithm", "best", "--publish", redis_url]) == 0

    async def meta() -> dict[str, str]:
        client = connect(redis_url)
        try:
            return await MappingStore(client, namespace).meta(1)
        finally:
            await client.aclose()

    written = asyncio.run(meta())
    modelled = {n: float(written[f"modelled_{n}"]) for n in learn_mapping.CONTENDERS}
    assert written["algorithm"] == max(modelled, key=lambda n: modelled[n])
    assert float(written["held_out"]) > 0


def test_a_mapping_for_a_number_of_matchers_the_cluster_left_is_not_published(
    tmp_path: Path, redis_url: str
) -> None:
    source = tmp_path / "posts.tsv"
    rows = "".join(f"{p.id}\t{p.text}\n" for p in sample_posts(300, seed=5))
    source.write_text("id\ttext\n" + rows)
    namespace = stored_namespace(redis_url, f"test-stale-{uuid.uuid4().hex[:8]}")

    async def in_redis(wanted: int | None = None) -> int:
        """Record the number of matchers wanted (if given); the latest mapping version."""
        client = connect(redis_url)
        try:
            if wanted is not None:
                await Store(client, namespace).membership.want_matchers(wanted)
            latest, _, _ = await MappingStore(client, namespace).state()
            return latest
        finally:
            await client.aclose()

    asyncio.run(in_redis(wanted=4))  # as `wordcast scale 4` does while a learner for 3 runs
    learning = ["--corpus", str(source), "--namespace", namespace, "--publish", redis_url]
    with pytest.raises(SystemExit, match="now wants 4 matchers and this mapping is for 3"):
        learn_mapping.main(["--matchers", "3", *learning])
    assert asyncio.run(in_redis()) == 0  # nothing was written
    assert learn_mapping.main(["--matchers", "4", *learning]) == 0
    assert asyncio.run(in_redis()) == 1
