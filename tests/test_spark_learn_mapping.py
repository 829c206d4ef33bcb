"""The Spark mapping learner builds the same graph as the pure code, and publishes versions."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from spark_jobs import learn_mapping

from wordcast.analysis import analyze
from wordcast.mapping_store import MappingStore
from wordcast.partitioning import partition, word_network
from wordcast.routing import LearnedMapping
from wordcast.salb import Graph, learn, salb
from wordcast.workload import sample_posts


def test_spark_graph_and_mappings_agree_with_the_pure_learners(spark: Any) -> None:
    texts = [p.text for p in sample_posts(3_000, seed=11)]
    raw = spark.createDataFrame([(t,) for t in texts], ["summary"])
    docs = learn_mapping.analysed_documents(raw, "summary").cache()
    posts = [analyze(t) for t in texts if analyze(t)]

    graph, _ = learn_mapping.collect_graph(docs)
    pure = Graph.from_publications(posts)
    assert graph.vocabulary == pure.vocabulary  # same words, same frequency order
    assert graph.n_posts == pure.n_posts == len(posts)
    assert sorted(graph.frequencies().tolist()) == sorted(pure.frequencies().tolist())

    mapping, timings = learn_mapping.learn(docs, 4, "salb")
    assert mapping.words == salb(posts, 4) and timings["posts"] == len(posts)
    hot, _ = learn_mapping.learn(docs, 64, "salb", seed=1)  # 64 matchers: frequent words split
    assert hot.versions and hot.versions == learn(posts, 64, seed=1).versions

    frequencies, pairs = word_network(posts)
    gfcl, _ = learn_mapping.learn(docs, 4, "gFCL")
    assert gfcl.words == partition("gFCL", frequencies, pairs, 4)


def test_entry_point_publishes_a_version_routers_can_load(tmp_path: Path, redis_url: str) -> None:
    source = tmp_path / "posts.tsv"
    rows = "".join(f"{p.id}\t{p.text}\n" for p in sample_posts(500, seed=3))
    source.write_text("id\ttext\n" + rows)
    namespace = f"test-learn-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "mapping.json"
    args = ["--matchers", "3", "--corpus", str(source), "--namespace", namespace]
    assert learn_mapping.main([*args, "--publish", redis_url, "--out", str(out)]) == 0
    assert out.exists()

    async def load() -> tuple[Any, Any]:
        client = aioredis.Redis.from_url(redis_url, decode_responses=True)
        store = MappingStore(client, namespace)
        try:
            return await store.state(), await store.load(1, 3)
        finally:
            await client.aclose()

    (latest, active, _), mapping = asyncio.run(load())
    assert latest == 1 and active == 0  # announced; the routers activate it
    assert isinstance(mapping, LearnedMapping) and len(mapping.words) > 100
