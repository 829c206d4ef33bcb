"""Learn the word -> matcher routing mapping: ``python -m wordcast.spark_jobs.learn_mapping --matchers N``.

Spark builds the word-to-publication bipartite graph and the word frequencies (and, for the graph
baselines, the word network of co-occurrence counts) from the routers' publication log in Redis or
from a corpus file; the driver then runs the chosen algorithm on the collected graph:

``salb``                  SALB with hot-word splitting (S³-TM Alg. 1, §5.1), the default
``salb-refined``          the same, then single-word moves on SALB's exact load model while they
                          lower the busiest matchers' load (:mod:`wordcast.learning.refine`, not in the seeds)
``best``                  SALB, SALB refined, gFCL, gNFCL and hash learned on 90% of the
                          publications; the one with the highest modelled throughput (Eq. 3.6,
                          unit cost) on the other 10% wins (:mod:`wordcast.learning.throughput`)
``hash``                  stable hashing (version 0's mapping, for comparisons and roll-backs)
``gC gFC gFCL gNFCL``     word-network partitioning with METIS (§3.2)

``--publish REDIS_URL`` writes the mapping to Redis as a new immutable version and announces it;
the routers then move subscriptions to it and switch (see ``wordcast.ops.migration``). ``--out`` writes
it as JSON. Runs with ``local[*]``; unchanged under ``spark-submit`` on a cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from wordcast.learning.partitioning import VARIANTS, WordNetwork, partition_network
from wordcast.learning.refine import learn_refined
from wordcast.learning.salb import Graph, SalbResult, learn_graph
from wordcast.learning.throughput import Modelled, best, model

from .term_stats import (
    analysed_documents,
    cooccurring_pairs,
    corpus_path,
    logged_documents,
    read_corpus,
    read_publication_log,
)

ALGORITHMS = ("salb", "salb-refined", "best", "hash", *VARIANTS)
# What ``best`` chooses among; a tie goes to the earlier, so the paper's SALB before its refinement.
CONTENDERS = ("salb", "salb-refined", "gFCL", "gNFCL", "hash")
HELD_OUT = 0.1  # the share of publications ``best`` keeps back to judge the contenders


# -- pure transforms ----------------------------------------------------------------------------
def bipartite_edges(docs: DataFrame) -> DataFrame:
    """(doc, word): one edge per distinct word of each publication."""
    return docs.select("doc", F.explode(F.array_distinct("terms")).alias("word"))


def word_frequencies(edges: DataFrame) -> DataFrame:
    """(word, frequency): in how many publications each word occurs."""
    return edges.groupBy("word").agg(F.count("*").alias("frequency"))


def held_out_split(docs: DataFrame, share: float, seed: int) -> tuple[DataFrame, DataFrame]:
    """(learning, held out): a publication is held out by a hash of its terms, so the split does
    not depend on how Spark partitions the data and copies of one post land on the same side."""
    bucket = F.pmod(F.xxhash64("terms", F.lit(seed)), F.lit(10_000))
    held = bucket < F.lit(round(share * 10_000))
    return docs.where(~held), docs.where(held)


def word_network(docs: DataFrame, frequencies: DataFrame) -> DataFrame:
    """(a, b, df): every pair of words that co-occur, with how often (the §3.2 edge weights)."""
    renamed = frequencies.select(F.col("word").alias("term"), F.col("frequency").alias("df"))
    return cooccurring_pairs(docs, renamed, 1)


# -- driver side --------------------------------------------------------------------------------
def collect_graph(docs: DataFrame) -> tuple[Graph, DataFrame]:
    """The bipartite graph as arrays on the driver (through Arrow), and the frequencies.

    Words are numbered by decreasing frequency (ties by the word) here, not with a Spark window:
    a global window runs in a single partition, and the driver holds every word anyway."""
    edges = bipartite_edges(docs)
    frequencies = word_frequencies(edges).cache()
    counted = frequencies.toArrow()
    order = pc.sort_indices(counted, sort_keys=[("frequency", "descending"), ("word", "ascending")])
    vocabulary = pc.take(counted.column("word"), order).combine_chunks()
    table = edges.toArrow()
    raw_posts = table.column("doc").to_numpy()
    _, posts = np.unique(raw_posts, return_inverse=True)  # dense publication numbers
    words = pc.index_in(table.column("word"), value_set=vocabulary).to_numpy().astype(np.int64)
    n_posts = int(posts.max()) + 1 if len(posts) else 0
    graph = Graph(posts.astype(np.int64), words, vocabulary.to_pylist(), n_posts)
    return graph, frequencies


def collect_network(graph: Graph, pairs: DataFrame) -> WordNetwork:
    """The word network of :func:`word_network` as arrays on the driver (through Arrow): word
    numbers by name, as :mod:`wordcast.learning.partitioning` wants them."""
    words = sorted(graph.vocabulary)
    frequency = dict(zip(graph.vocabulary, graph.frequencies().tolist(), strict=True))
    table = pairs.toArrow()
    names = pa.array(words, type=pa.string())
    left, right = (pc.index_in(table.column(c), value_set=names) for c in ("a", "b"))
    if left.null_count or right.null_count:
        raise ValueError("the word network names a word the graph does not have")
    return WordNetwork.from_edges(
        words,
        np.array([frequency[w] for w in words], dtype=np.int64),
        left.to_numpy().astype(np.int64),
        right.to_numpy().astype(np.int64),
        table.column("df").to_numpy().astype(np.int64),
    )


@dataclass
class Learned:
    """A learned mapping, the algorithm that made it, timings, and for ``best`` every contender's
    modelled throughput on the held-out publications."""

    mapping: SalbResult
    algorithm: str
    timings: dict[str, float]
    scores: dict[str, Modelled] = field(default_factory=dict)


def _mapping(
    algorithm: str,
    graph: Graph,
    network: Callable[[], WordNetwork],
    matchers: int,
    seed: int,
    salb: SalbResult | None = None,
) -> SalbResult:
    if algorithm == "salb":
        return learn_graph(graph, matchers, seed)
    if algorithm == "salb-refined":
        return learn_refined(graph, matchers, seed, salb=salb)  # SALB once when ``best`` has it
    if algorithm == "hash":
        return SalbResult(matchers, {}, {}, {})
    return SalbResult(matchers, partition_network(algorithm, network(), matchers, seed), {}, {})


def learn(
    docs: DataFrame,
    matchers: int,
    algorithm: str,
    seed: int = 0,
    subscribed: Collection[str] | None = None,
) -> Learned:
    """Learn with ``algorithm``; timings (Spark graph building, driver learning) in seconds.

    ``best`` learns every contender on the publications not held out and keeps the one the model
    favours on the held-out ones, routed on the ``subscribed`` words (None: every word).
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    started = time.perf_counter()
    held: DataFrame | None = None
    if algorithm == "best":
        docs, held = held_out_split(docs, HELD_OUT, seed)
    graph, frequencies = collect_graph(docs)
    built = time.perf_counter()
    collected: list[WordNetwork] = []

    def network() -> WordNetwork:  # built once, only for the graph baselines
        if not collected:
            collected.append(collect_network(graph, word_network(docs, frequencies)))
        return collected[0]

    names = CONTENDERS if algorithm == "best" else (algorithm,)
    mappings: dict[str, SalbResult] = {}
    for name in names:
        mappings[name] = _mapping(name, graph, network, matchers, seed, mappings.get("salb"))
    learned = time.perf_counter()
    timings = {
        "graph_s": built - started,
        "learn_s": learned - built,
        "posts": float(graph.n_posts),
        "edges": float(len(graph.words)),
        "words": float(len(graph.vocabulary)),
    }
    if held is None:
        return Learned(mappings[algorithm], algorithm, timings)
    posts = [frozenset(row["terms"]) for row in held.select("terms").toLocalIterator()]
    if not posts:
        raise ValueError("no publication was held out to choose by: too few publications")
    routed_on = set().union(*posts) if subscribed is None else subscribed  # once, not per contender
    scores = {
        name: model(mapping.as_routing(), posts, routed_on, seed)
        for name, mapping in mappings.items()
    }
    chosen = best(scores)
    timings["held_out"] = float(len(posts))
    timings["choose_s"] = time.perf_counter() - learned
    return Learned(mappings[chosen], chosen, timings, scores)


async def publish(
    redis_url: str, namespace: str, mapping: SalbResult, meta: dict[str, object]
) -> int:
    """Write the mapping as a new version, unless the cluster's number of matchers is no longer
    the mapping's: it changed while the job learned (``wordcast scale``, ``kubectl scale``), and
    the routers would only move every subscription to it and then on to a version for the new
    number."""
    from wordcast.storage import Store

    store = Store.connect(redis_url, namespace)
    try:
        wanted = await store.membership.matchers_wanted()
        if wanted is not None and wanted != mapping.matchers:
            raise SystemExit(
                f"learn_mapping: the cluster now wants {wanted} matchers and this mapping is for "
                f"{mapping.matchers} (the number changed while it was learned), so it was not "
                "published; learn again"
            )
        return await store.mappings.write(
            mapping.matchers, mapping.words, mapping.versions, mapping.frequencies, meta
        )
    finally:
        await store.aclose()


async def subscribed_words(redis_url: str, namespace: str) -> set[str]:
    """s(W) of the cluster the mapping is for: ``best`` judges the contenders on those words."""
    from wordcast.storage import Store

    store = Store.connect(redis_url, namespace)
    try:
        return await store.word_maps.subscribed_words()
    finally:
        await store.aclose()


# -- entry point --------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
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
    return parser


def learned_mapping(argv: list[str]) -> tuple[SalbResult, dict[str, object]]:
    """The job without its output: the mapping the arguments ask for, and its meta (algorithm,
    timings, scores), for a caller that writes it itself (``wordcast scale``)."""
    args = _parser().parse_args(argv)
    if args.matchers < 1:
        raise SystemExit("learn_mapping: --matchers must be at least 1")
    mapping, meta, _ = _learned(args)
    return mapping, meta


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.matchers < 1:
        parser.error("--matchers must be at least 1")
    if not (args.publish or args.out):
        parser.error("say where the mapping goes: --publish REDIS_URL and/or --out FILE")
    if not args.publication_log:
        corpus_path(args.corpus)
    mapping, meta, timings = _learned(args)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "matchers": mapping.matchers,
            "words": mapping.words,
            "hot": mapping.versions,
            "frequencies": mapping.frequencies,
        }
        args.out.write_text(json.dumps({**payload, "meta": meta}))
    version = None
    if args.publish:
        version = asyncio.run(publish(args.publish, args.namespace, mapping, meta))
    print(
        f"learn_mapping: {meta['algorithm']} for {args.matchers} matchers from "
        f"{int(timings['posts']):,} publications ({int(timings['words']):,} words, "
        f"{len(mapping.versions)} hot): graph {timings['graph_s']:.1f}s in Spark, "
        f"learning {timings['learn_s']:.1f}s on the driver, {timings['total_s']:.1f}s in all"
        + (f"; published as version {version}" if version else ""),
        file=sys.stderr,
    )
    return 0


def _learned(args: argparse.Namespace) -> tuple[SalbResult, dict[str, object], dict[str, float]]:
    """Learn as the arguments say: the mapping, its meta, and the timings in it."""
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
        subscribed = None
        if args.algorithm == "best" and args.publish:
            # An empty s(W) (no subscriptions yet) says nothing: judge on every word instead.
            subscribed = asyncio.run(subscribed_words(args.publish, args.namespace)) or None
        learned = learn(docs.cache(), args.matchers, args.algorithm, args.seed, subscribed)
    finally:
        if owned:
            spark.stop()
    mapping, timings = learned.mapping, learned.timings
    timings["total_s"] = time.perf_counter() - started
    meta: dict[str, object] = {"algorithm": learned.algorithm, **timings}
    for name, score in learned.scores.items():
        meta[f"modelled_{name}"] = round(score.throughput, 4)
    if learned.scores:
        figures = ", ".join(f"{n} {s.throughput:.3f}" for n, s in learned.scores.items())
        print(
            f"learn_mapping: best of {len(learned.scores)} on {int(timings['held_out']):,} held-out "
            f"publications ({'subscribed' if subscribed else 'every'} word routed), modelled "
            f"throughput per unit of matcher capacity: {figures} -> {learned.algorithm}",
            file=sys.stderr,
        )
    return mapping, meta, timings


if __name__ == "__main__":
    raise SystemExit(main())
