"""Learn the word -> matcher routing mapping: ``python -m spark_jobs.learn_mapping --matchers N``.

Spark builds the word-to-publication bipartite graph and the word frequencies (and, for the graph
baselines, the word network of co-occurrence counts) from the routers' publication log in Redis or
from a corpus file; the driver then runs the chosen algorithm on the collected graph:

``salb``                  SALB with hot-word splitting (S³-TM Alg. 1, §5.1), the default
``hash``                  stable hashing (version 0's mapping, for comparisons and roll-backs)
``gC gFC gFCL gNFCL``     word-network partitioning with METIS (§3.2)

``--publish REDIS_URL`` writes the mapping to Redis as a new immutable version and announces it;
the routers then move subscriptions to it and switch (see ``wordcast.migration``). ``--out`` writes
it as JSON. Runs with ``local[*]``; unchanged under ``spark-submit`` on a cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import numpy as np
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from wordcast.partitioning import VARIANTS, partition
from wordcast.salb import Graph, Mapping, learn_graph

from .term_stats import (
    analysed_documents,
    cooccurring_pairs,
    logged_documents,
    read_corpus,
    read_publication_log,
)

ALGORITHMS = ("salb", "hash", *VARIANTS)


# -- pure transforms ----------------------------------------------------------------------------
def bipartite_edges(docs: DataFrame) -> DataFrame:
    """(doc, word): one edge per distinct word of each publication."""
    return docs.select("doc", F.explode(F.array_distinct("terms")).alias("word"))


def word_frequencies(edges: DataFrame) -> DataFrame:
    """(word, frequency, rank): rank 0 is the most frequent word (ties by the word itself)."""
    counted = edges.groupBy("word").agg(F.count("*").alias("frequency"))
    order = Window.orderBy(F.desc("frequency"), F.asc("word"))
    return counted.withColumn("rank", F.row_number().over(order) - 1)


def ranked_edges(edges: DataFrame, frequencies: DataFrame) -> DataFrame:
    """(doc, rank): the edges with each word replaced by its frequency rank."""
    return edges.join(frequencies.select("word", "rank"), "word").select("doc", "rank")


def word_network(docs: DataFrame, frequencies: DataFrame) -> DataFrame:
    """(a, b, df): every pair of words that co-occur, with how often (the §3.2 edge weights)."""
    renamed = frequencies.select(F.col("word").alias("term"), F.col("frequency").alias("df"))
    return cooccurring_pairs(docs, renamed, 1)


# -- driver side --------------------------------------------------------------------------------
def collect_graph(docs: DataFrame) -> tuple[Graph, DataFrame]:
    """The bipartite graph as arrays on the driver (through Arrow), and the frequencies."""
    edges = bipartite_edges(docs)
    frequencies = word_frequencies(edges).cache()
    vocabulary = [
        row["word"] for row in frequencies.orderBy("rank").select("word").toLocalIterator()
    ]
    table = ranked_edges(edges, frequencies).toArrow()
    raw_posts = table.column("doc").to_numpy()
    _, posts = np.unique(raw_posts, return_inverse=True)  # dense publication numbers
    words = table.column("rank").to_numpy().astype(np.int64)
    n_posts = int(posts.max()) + 1 if len(posts) else 0
    return Graph(posts.astype(np.int64), words, vocabulary, n_posts), frequencies


def learn(
    docs: DataFrame, matchers: int, algorithm: str, seed: int = 0
) -> tuple[Mapping, dict[str, float]]:
    """The mapping and timings (Spark graph building, driver learning) in seconds."""
    started = time.perf_counter()
    graph, frequencies = collect_graph(docs)
    built = time.perf_counter()
    if algorithm == "salb":
        mapping = learn_graph(graph, matchers, seed)
    elif algorithm == "hash":
        mapping = Mapping(matchers, {}, {}, {})
    else:
        counts = dict(zip(graph.vocabulary, graph.frequencies().tolist(), strict=True))
        pairs = {
            (row["a"], row["b"]): int(row["df"])
            for row in word_network(docs, frequencies).toLocalIterator()
        }
        words = partition(algorithm, counts, pairs, matchers, seed)
        mapping = Mapping(matchers, words, {}, {})
    learned = time.perf_counter()
    timings = {
        "graph_s": built - started,
        "learn_s": learned - built,
        "posts": float(graph.n_posts),
        "edges": float(len(graph.words)),
        "words": float(len(graph.vocabulary)),
    }
    return mapping, timings


async def publish(redis_url: str, namespace: str, mapping: Mapping, meta: dict[str, object]) -> int:
    from wordcast.mapping_store import MappingStore
    from wordcast.store import connect

    client = connect(redis_url)
    try:
        store = MappingStore(client, namespace)
        return await store.write(
            mapping.matchers, mapping.words, mapping.versions, mapping.frequencies, meta
        )
    finally:
        await client.aclose()


# -- entry point --------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--matchers", type=int, required=True, help="N, the cluster's matchers")
    parser.add_argument("--algorithm", choices=ALGORITHMS, default="salb")
    parser.add_argument("--corpus", default="pypi", help="pypi, or a TSV path with 'text'")
    parser.add_argument(
        "--publication-log", metavar="REDIS_URL", help="learn from the routers' log"
    )
    parser.add_argument("--namespace", default="wordcast", help="Redis key prefix")
    parser.add_argument("--limit", type=int, help="use only the first N publications")
    parser.add_argument("--until-month", help="pypi only: learn on posts up to YYYY-MM")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--publish", metavar="REDIS_URL", help="write it as a new mapping version")
    parser.add_argument("--out", type=Path, help="write the mapping as JSON")
    parser.add_argument("--master", help="Spark master (default local[*] unless spark-submit)")
    args = parser.parse_args(argv)
    if args.matchers < 1:
        parser.error("--matchers must be at least 1")
    if not (args.publish or args.out):
        parser.error("say where the mapping goes: --publish REDIS_URL and/or --out FILE")

    from .session import spark_session

    started = time.perf_counter()
    owned = SparkSession.getActiveSession() is None
    spark = spark_session("wordcast-learn-mapping", args.master)
    try:
        if args.publication_log:
            logged = read_publication_log(args.publication_log, args.namespace, args.limit)
            if not logged:
                raise SystemExit("learn_mapping: the publication log is empty; nothing to learn")
            docs = logged_documents(spark, logged)
        else:
            raw, column = read_corpus(spark, args.corpus, None)
            if args.until_month:
                raw = raw.where(F.col("month") <= args.until_month)
            raw = raw.limit(args.limit) if args.limit else raw
            docs = analysed_documents(raw, column)
        mapping, timings = learn(docs, args.matchers, args.algorithm, args.seed)
    finally:
        if owned:
            spark.stop()
    timings["total_s"] = time.perf_counter() - started
    meta = {"algorithm": args.algorithm, **timings}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        payload = {"matchers": mapping.matchers, "words": mapping.words, "hot": mapping.versions}
        args.out.write_text(json.dumps({**payload, "meta": meta}))
    version = None
    if args.publish:
        version = asyncio.run(publish(args.publish, args.namespace, mapping, meta))
    print(
        f"learn_mapping: {args.algorithm} for {args.matchers} matchers from "
        f"{int(timings['posts']):,} publications ({int(timings['words']):,} words, "
        f"{len(mapping.versions)} hot): graph {timings['graph_s']:.1f}s in Spark, "
        f"learning {timings['learn_s']:.1f}s on the driver, {timings['total_s']:.1f}s in all"
        + (f"; published as version {version}" if version else ""),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
