"""Learned routing (S³-TM ch. 6): ``make bench-routing`` / ``python -m bench.routing``.

Reproduces, on pypi summaries, Figs. 6.2-6.9 (against the number of matchers N, 100K
subscriptions), 6.10-6.17 (against the number of subscriptions, N = 16), 6.18-6.21 (concept drift:
learned on older months, evaluated on newer ones), 6.24 (SALB learning time against the number of
posts) and Fig. 4.1 (trie lookups against unique trie words: LASP's f, fitted here), and times the
whole Spark learning job on 1M posts.

For every mapping (hash, SALB with hot-word splitting, gC, gFC, gFCL, gNFCL) the subscriptions are
placed with LASP, every matcher's trie is built, the evaluation posts are routed (Eq. 3.1, hot words
to a random copy), and each matcher's share is matched on its own trie and timed. Throughput is
Eq. 3.6 with those measured costs: the cluster sustains |P| / max_i(time_i) posts/s when every
matcher has a core of its own. Spread is the mean multicast size, imbalance max/avg of the loads.
``bench.routing_runs`` takes the medians over several runs.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import math
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from wordcast.corpus.files import pypi_posts
from wordcast.engines.trie import Trie
from wordcast.learning.partitioning import partition, word_network
from wordcast.learning.refine import learn_refined
from wordcast.learning.salb import Graph, learn_graph
from wordcast.query.analysis import analyse
from wordcast.routing.lasp import LaspPlacer, LinearCost
from wordcast.routing.mapping import (
    HashMapping,
    LearnedMapping,
    eligible_matchers,
    hot_multicast,
    random_draw,
    route,
)

from .common import RESULTS, machine, write_json

ALGORITHMS = ("hash", "salb", "salb-refined", "gC", "gFC", "gFCL", "gNFCL")
Post = frozenset[str]


def corpus() -> list[tuple[str, Post, str]]:
    """(month, terms, text) of every non-empty pypi summary, oldest month first."""
    rows = [(month, analyse(text), text) for _name, month, text in pypi_posts()]
    return sorted(((m, t, x) for m, t, x in rows if t and m), key=lambda row: row[0])


HISTORY_SHARE = 0.6  # the older 60% by month is "history", the newer 40% the drift evaluation


def shuffled_history(rows: Sequence[tuple[str, Post, str]]) -> list[Post]:
    """The history's term sets in the one shuffled order every routing benchmark splits."""
    history = [terms for _, terms, _ in rows[: int(len(rows) * HISTORY_SHARE)]]
    random.Random(7).shuffle(history)
    return history


def topics_from_spark(spark: Any, texts: Sequence[str], topics: int = 100) -> list[list[str]]:
    from wordcast.spark_jobs.term_stats import analysed_documents
    from wordcast.spark_jobs.topics import lda_topics

    raw = spark.createDataFrame([(t,) for t in texts], ["summary"])
    return lda_topics(analysed_documents(raw, "summary").cache(), topics, 5)


def zipf_length(rng: random.Random, skew: float = 0.5, longest: int = 5) -> int:
    weights = [1 / k**skew for k in range(1, longest + 1)]
    return rng.choices(range(1, longest + 1), weights)[0]


def topic_subscriptions(topics: list[list[str]], count: int, seed: int) -> list[Post]:
    rng = random.Random(seed)
    subs = []
    for _ in range(count):
        topic = rng.choice(topics)
        subs.append(frozenset(rng.sample(topic, min(zipf_length(rng), len(topic)))))
    return subs


def tweet_subscriptions(posts: Sequence[Post], count: int, seed: int) -> list[Post]:
    rng = random.Random(seed)
    return [rng.choice(posts) for _ in range(count)]


def learn(
    algorithm: str,
    training: Sequence[Post],
    matchers: int,
    network: Any,
    metis_method: str = "auto",
) -> HashMapping:
    if algorithm == "hash":
        return HashMapping(matchers)
    if algorithm in ("salb", "salb-refined"):
        learner = learn_graph if algorithm == "salb" else learn_refined
        return learner(Graph.from_publications(training), matchers).as_routing()
    frequencies, pairs = network
    words = partition(algorithm, frequencies, pairs, matchers, method=metis_method)
    return LearnedMapping(1, matchers, words)


@dataclass
class Deployment:
    """Subscriptions placed on a cluster by LASP, each matcher's tries, and its word map H(i)."""

    placer: LaspPlacer
    tries: list[Trie[str]]
    # A multicast subscription (only hot words, §5.1) serves just the posts whose drawn copy of its
    # least frequent hot word the matcher holds: such subscriptions sit in a trie per hot word and
    # copies served, met only by those posts, so no match needs filtering afterwards.
    multicast: list[dict[str, dict[frozenset[int], Trie[str]]]]
    word_counts: list[Counter[str]]
    subscribed: set[str]

    def meets(self, matcher: int, drawn: dict[str, int]) -> list[Trie[str]]:
        """The tries a post routed to ``matcher`` meets there: the matcher's own, and the
        multicast tries of the copies the post drew and the matcher serves."""
        hot_tries = self.multicast[matcher]
        meets = [self.tries[matcher]]
        meets += [
            hot_trie
            for word, copy in drawn.items()
            for served, hot_trie in hot_tries.get(word, {}).items()
            if copy in served
        ]
        return meets


def deploy(mapping: HashMapping, subs: Sequence[Post], cost: LinearCost) -> Deployment:
    n = mapping.matchers
    placer = LaspPlacer(n, cost)
    tries: list[Trie[str]] = [Trie() for _ in range(n)]
    multicast: list[dict[str, dict[frozenset[int], Trie[str]]]] = [{} for _ in range(n)]
    word_counts: list[Counter[str]] = [Counter() for _ in range(n)]
    for k, terms in enumerate(subs):
        eligible = eligible_matchers(terms, mapping)
        if eligible:
            matcher = placer.place(terms, eligible)
            placer.add(matcher, terms)
            tries[matcher].add(str(k), terms)
            word_counts[matcher].update(terms)
            continue
        word, copies = hot_multicast(terms, mapping)
        for matcher, served in copies.items():
            placer.add(matcher, terms)
            by_copies = multicast[matcher].setdefault(word, {})
            by_copies.setdefault(served, Trie()).add(str(k), terms)
            word_counts[matcher].update(terms)
    return Deployment(placer, tries, multicast, word_counts, set().union(*subs))


def evaluate(
    mapping: HashMapping,
    subs: Sequence[Post],
    posts: Sequence[Post],
    cost: LinearCost,
    seed: int,
    passes: int = 3,
) -> dict[str, Any]:
    n = mapping.matchers
    deployment = deploy(mapping, subs, cost)
    placer = deployment.placer
    draw = random_draw(random.Random(seed))
    # Per matcher, each routed post with the tries it meets there.
    routed: list[list[tuple[Post, list[Trie[str]]]]] = [[] for _ in range(n)]
    for terms in posts:
        targets, drawn = route(terms, deployment.subscribed, mapping, draw)
        for matcher in targets:
            routed[matcher].append((terms, deployment.meets(matcher, drawn)))
    seconds = [math.inf] * n
    found = [0] * n
    gc.disable()  # a collection inside one matcher's timing would pass for its matching cost
    try:
        # Eq. 3.6 wants each matcher's cost, not the scheduler's noise on a shared machine: the
        # fastest of a few passes (as timeit does), since noise only ever adds time. The passes go
        # round all matchers in turn, so that a burst of noise cannot spoil every pass of one.
        for _ in range(passes):
            for matcher, share in enumerate(routed):
                count = 0
                started = time.perf_counter()
                for terms, meets in share:
                    for trie in meets:
                        count += len(trie.match(terms))
                seconds[matcher] = min(seconds[matcher], time.perf_counter() - started)
                found[matcher] = count
    finally:
        gc.enable()
    matches = sum(found)
    # The same cost counted instead of timed: trie child-map probes (what Fig. 4.1 counts), so the
    # comparison between mappings carries each matcher's subscriptions but none of the noise.
    lookups = [
        sum(trie.operations(terms) for terms, meets in share for trie in meets) for share in routed
    ]
    loads = np.array([len(share) for share in routed], dtype=float)
    mean = loads.mean()
    return {
        "spread": float(loads.sum() / len(posts)),
        "imbalance": float(loads.max() / mean) if mean else 0.0,
        "cv": float(loads.std() / mean) if mean else 0.0,
        "throughput": len(posts) / max(max(seconds), 1e-9),
        # Eq. 3.6 with a unit cost per publication: what the learners optimise, noise-free.
        "unit_throughput": len(posts) / max(loads.max(), 1.0),
        # Eq. 3.6 with each matcher's cost in trie lookups: deterministic, subscriptions included.
        "lookup_throughput": len(posts) / max(max(lookups), 1),
        "lookups": lookups,
        "seconds": seconds,
        "loads": loads.astype(int).tolist(),
        "unique_words": [len(h) for h in placer.word_maps],
        "matches": matches,
    }


def fit_cost(subs: Sequence[Post], posts: Sequence[Post]) -> dict[str, Any]:
    """Fig. 4.1: trie lookup operations per publication against the trie's unique words, and the
    line fitted to them (LASP's f); the time per publication is recorded beside them."""
    points = []
    for size in (1_000, 3_000, 10_000, 30_000, 100_000):
        trie: Trie[str] = Trie()
        words: set[str] = set()
        for k, terms in enumerate(subs[:size]):
            trie.add(str(k), terms)
            words |= terms
        operations = sum(trie.operations(terms) for terms in posts) / len(posts)
        started = time.perf_counter()
        for terms in posts:
            trie.match(terms)
        micros = (time.perf_counter() - started) / len(posts) * 1e6
        points.append((len(words), operations, micros))
    x, ops, micros = np.array(points).T
    slope, intercept = np.polyfit(x, ops, 1)
    slope_us, intercept_us = np.polyfit(x, micros, 1)
    return {
        "points": [list(p) for p in points],
        "slope": float(slope),
        "intercept": float(intercept),
        "slope_us": float(slope_us),
        "intercept_us": float(intercept_us),
    }


def time_spark_job(posts: int, matchers: int = 256, algorithm: str = "salb") -> dict[str, Any]:
    """The whole learning job, JVM start to mapping written, as a separate process on ``posts``
    real posts: every pypi summary, then package names (split on - _ .) to make up the count."""
    directory = Path(tempfile.mkdtemp(prefix="wordcast-spark-"))
    try:
        source = directory / "posts.tsv"
        with source.open("w", encoding="utf-8") as out:
            out.write("text\n")
            written = 0
            summaries = (text for _n, _m, text in pypi_posts())
            names = (" ".join(re.split(r"[-_.]", name)) for name, _m, _t in pypi_posts())
            for text in itertools.islice(itertools.chain(summaries, names), posts):
                out.write(text.replace("\t", " ").replace("\n", " ") + "\n")
                written += 1
        command = [
            sys.executable,
            "-m",
            "wordcast.spark_jobs.learn_mapping",
            "--matchers",
            str(matchers),
        ]
        command += ["--algorithm", algorithm, "--corpus", str(source)]
        command += ["--out", str(directory / "mapping.json")]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        seconds = time.perf_counter() - started
        output = (done.stdout + done.stderr).splitlines()
        report = next((line for line in output if line.startswith("learn_mapping:")), "")
        return {
            "posts": written,
            "matchers": matchers,
            "algorithm": algorithm,
            "seconds": seconds,
            "report": report,
        }
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=int, default=100_000, help="posts the mappings learn on")
    parser.add_argument("--eval", type=int, default=30_000, help="posts routed and matched")
    parser.add_argument("--subs", type=int, default=100_000)
    parser.add_argument("--nodes", default="2,4,8,16,32,64,128,256")
    parser.add_argument("--sub-counts", default="100,1000,10000,100000,1000000")
    parser.add_argument("--learn-posts", default="10000,100000,300000,1000000")
    parser.add_argument(
        "--spark-posts", type=int, default=1_000_000, help="posts the whole Spark job is timed on"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.train, args.eval, args.subs = 5_000, 2_000, 2_000
        args.nodes, args.sub_counts, args.learn_posts = "2,8", "100,1000", "10000"
        args.spark_posts = 20_000
    started = time.perf_counter()
    rows = corpus()
    cut = int(len(rows) * HISTORY_SHARE)
    history = shuffled_history(rows)
    training, evaluation = history[: args.train], history[args.train : args.train + args.eval]
    print(
        f"corpus analysed: {len(rows):,} posts ({time.perf_counter() - started:.0f}s)", flush=True
    )

    texts = [text for _m, _t, text in rows]
    from wordcast.spark_jobs.session import spark_session

    # One session for every LDA of the run: PySpark's accumulator server does not survive a
    # second SparkContext in the same process.
    spark = spark_session("wordcast-bench-topics")
    spark.sparkContext.setLogLevel("ERROR")  # LDA on a local list warns of large tasks, harmlessly
    topics = topics_from_spark(spark, random.Random(3).sample(texts, min(len(texts), 60_000)))
    print(f"LDA: {len(topics)} topics ({time.perf_counter() - started:.0f}s)", flush=True)
    workloads = {
        "tweet": tweet_subscriptions(history[args.train + args.eval :], args.subs, 1),
        "topic": topic_subscriptions(topics, args.subs, 2),
    }
    cost_fit = fit_cost(workloads["tweet"], evaluation[:5_000])
    # A tiny sweep can fit a flat or falling line; LASP then falls back to counting words.
    slope_ok = cost_fit["slope"] > 0
    cost = LinearCost(
        cost_fit["slope"] if slope_ok else 1.0,
        max(cost_fit["intercept"], 0.0) if slope_ok else 0.0,
    )
    network = word_network(training)
    results: dict[str, Any] = {"machine": machine(), "topics": topics, "lasp_cost": cost_fit}

    def run(mapping: HashMapping, subs: Sequence[Post], posts: Sequence[Post]) -> dict[str, Any]:
        return evaluate(mapping, subs, posts, cost, seed=11)

    # Figs. 6.2-6.9: against N.
    nodes: list[dict[str, Any]] = []
    for n in [int(v) for v in args.nodes.split(",")]:
        for algorithm in ALGORITHMS:
            t0 = time.perf_counter()
            mapping = learn(algorithm, training, n, network)
            learned = time.perf_counter() - t0
            for name, subs in workloads.items():
                row = {"N": n, "algorithm": algorithm, "workload": name, "learn_s": learned}
                nodes.append(row | run(mapping, subs, evaluation))
            print(f"N={n} {algorithm} ({time.perf_counter() - started:.0f}s)", flush=True)
    check_matches(nodes, "N")
    results["nodes"] = nodes

    # Figs. 6.10-6.17: against the number of subscriptions, N = 16.
    by_subs: list[dict[str, Any]] = []
    mappings = {a: learn(a, training, 16, network) for a in ALGORITHMS}
    for count in [int(v) for v in args.sub_counts.split(",")]:
        more = {
            "tweet": tweet_subscriptions(history[args.train + args.eval :], count, 1),
            "topic": topic_subscriptions(topics, count, 2),
        }
        for algorithm, mapping in mappings.items():
            for name, subs in more.items():
                row = {"subscriptions": count, "algorithm": algorithm, "workload": name}
                by_subs.append(row | run(mapping, subs, evaluation))
        print(f"{count} subscriptions ({time.perf_counter() - started:.0f}s)", flush=True)
    check_matches(by_subs, "subscriptions")
    results["subscriptions"] = by_subs

    # Figs. 6.18-6.21: concept drift, N = 16, topic-based subscriptions; mappings learned on the
    # history. As in §6.3, every period gets topics of its own (LDA on the period's posts, the same
    # seed drawing the evaluation sample: the paper takes each week's topics from that week) and a
    # new subscription set, so the interests drift along with the posts.
    newer = rows[cut:]
    periods = 5
    drift: list[dict[str, Any]] = []
    for period in range(periods):
        chunk = newer[period * len(newer) // periods : (period + 1) * len(newer) // periods]
        picked = random.Random(period).sample(chunk, min(args.eval, len(chunk)))
        sample = [terms for _, terms, _ in picked]
        period_topics = topics_from_spark(
            spark,
            [text for _, _, text in random.Random(period).sample(chunk, min(len(chunk), 30_000))],
        )
        period_subs = topic_subscriptions(period_topics, args.subs, 2)
        for algorithm in ("hash", "salb", "salb-refined", "gFCL", "gNFCL"):
            row = {"period": period, "from": chunk[0][0], "to": chunk[-1][0]}
            row |= {"algorithm": algorithm}
            drift.append(row | run(mappings[algorithm], period_subs, sample))
        print(f"drift period {period} ({time.perf_counter() - started:.0f}s)", flush=True)
    spark.stop()
    check_matches(drift, "period")
    results["drift"] = drift
    print(f"drift ({time.perf_counter() - started:.0f}s)", flush=True)

    # Fig. 6.24: SALB learning time (driver) against the number of posts, N = 256.
    all_terms = [t for _, t, _ in rows]
    learning: list[dict[str, Any]] = []
    for count in [int(v) for v in args.learn_posts.split(",")]:
        # More posts than the corpus holds are drawn with replacement.
        sample = random.Random(count).choices(all_terms, k=count)
        graph = Graph.from_publications(sample)
        t0 = time.perf_counter()
        learned_mapping = learn_graph(graph, 256)
        seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        learn_refined(graph, 256)
        refined = time.perf_counter() - t0
        learning.append(
            {
                "posts": count,
                "seconds": seconds,
                "refined_seconds": refined,
                "hot": len(learned_mapping.versions),
            }
        )
        print(
            f"SALB learns {count:,} posts for N=256 in {seconds:.1f}s, refined {refined:.1f}s",
            flush=True,
        )
    results["learning"] = learning
    results["spark_job"] = time_spark_job(args.spark_posts)
    print(f"whole Spark job: {results['spark_job']}", flush=True)
    results["spark_job_refined"] = time_spark_job(args.spark_posts, algorithm="salb-refined")
    print(f"whole Spark job, salb-refined: {results['spark_job_refined']}", flush=True)
    results["seconds"] = time.perf_counter() - started
    path = write_json("routing", results)
    plot(results)
    print(f"wrote {path} and routing-*.png ({results['seconds']:.0f}s)")
    summary(results)
    return 0


def check_matches(rows: list[dict[str, Any]], key: str) -> None:
    """Every mapping must find the same matches in the same configuration (hash has no hot words
    and no multicast, so it is the reference): a routing or placement bug shows up here."""
    expected: dict[tuple[Any, Any], int] = {}
    for row in rows:
        point = (row[key], row.get("workload"))
        if expected.setdefault(point, row["matches"]) != row["matches"]:
            raise RuntimeError(
                f"{row['algorithm']} found {row['matches']:,} matches at {key}={row[key]} "
                f"({row.get('workload')}), another mapping {expected[point]:,}"
            )


def _series(rows: list[dict[str, Any]], x: str, workload: str, metric: str) -> dict[str, Any]:
    out: dict[str, tuple[list[Any], list[float]]] = {}
    for row in rows:
        if row.get("workload", workload) == workload:
            xs, ys = out.setdefault(row["algorithm"], ([], []))
            xs.append(row[x])
            ys.append(row[metric])
    return out


def relative(
    rows: list[dict[str, Any]], key: str, metric: str = "throughput"
) -> list[dict[str, Any]]:
    """Each row's ``metric`` relative to SALB's in the same configuration (SALB = 1)."""
    salb = {
        (row[key], row.get("workload")): row[metric] for row in rows if row["algorithm"] == "salb"
    }
    return [row | {"relative": row[metric] / salb[(row[key], row.get("workload"))]} for row in rows]


def plot(results: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for name, key, rows, logx in (
        ("nodes", "N", results["nodes"], True),
        ("subscriptions", "subscriptions", results["subscriptions"], True),
    ):
        rows = relative(rows, key)
        fig, axes = plt.subplots(2, 4, figsize=(20, 9))
        for r, workload in enumerate(("tweet", "topic")):
            for c, metric in enumerate(("relative", "throughput", "spread", "imbalance")):
                ax = axes[r][c]
                for algorithm, (xs, ys) in _series(rows, key, workload, metric).items():
                    ax.plot(xs, ys, marker="o", label=algorithm)
                ax.set_title(f"{metric}, {workload}-based")
                ax.set_xlabel(key)
                if logx:
                    ax.set_xscale("log", base=2 if key == "N" else 10)
                if metric == "throughput":
                    ax.set_yscale("log")
                    ax.set_ylabel("posts/s (Eq. 3.6, measured costs)")
        axes[0][0].legend()
        fig.tight_layout()
        fig.savefig(RESULTS / f"routing-{name}.png", dpi=90)
        plt.close(fig)
    drift = relative(results["drift"], "period")
    fig, axes = plt.subplots(1, 4, figsize=(20, 4.5))
    for c, metric in enumerate(("relative", "throughput", "spread", "imbalance")):
        for algorithm, (xs, ys) in _series(drift, "period", "topic", metric).items():
            axes[c].plot(xs, ys, marker="o", label=algorithm)
        axes[c].set_title(f"{metric} on newer months (topic-based)")
        axes[c].set_xlabel("period after learning (5 equal slices of the newer 40%)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "routing-drift.png", dpi=90)
    plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    learning = results["learning"]
    posts = [r["posts"] for r in learning]
    axes[0].plot(posts, [r["seconds"] for r in learning], marker="o", label="SALB")
    if all("refined_seconds" in r for r in learning):
        refined = [r["refined_seconds"] for r in learning]
        axes[0].plot(posts, refined, marker="o", label="SALB + refinement")
    axes[0].legend()
    axes[0].set_xscale("log")
    axes[0].set_title("SALB learning time, N = 256 (Fig. 6.24)")
    axes[0].set_xlabel("posts")
    axes[0].set_ylabel("driver seconds")
    xs, ys, _micros = zip(*results["lasp_cost"]["points"], strict=True)
    axes[1].plot(xs, ys, marker="o", label="measured")
    fit = results["lasp_cost"]
    axes[1].plot(xs, [fit["slope"] * x + fit["intercept"] for x in xs], label="linear fit (f)")
    axes[1].set_title("trie lookup operations vs unique words (Fig. 4.1)")
    axes[1].set_xlabel("unique words in the trie")
    axes[1].set_ylabel("lookups per publication")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "routing-learning.png", dpi=90)
    plt.close(fig)


def summary(results: dict[str, Any]) -> None:
    for metric in ("throughput", "lookup_throughput", "unit_throughput"):
        rows = relative(results["nodes"], "N", metric)
        for workload in ("tweet", "topic"):
            print(f"\n{workload}-based, 100K-subscription sweep: {metric} relative to SALB")
            for n in sorted({r["N"] for r in rows}):
                cells = {
                    r["algorithm"]: r for r in rows if r["N"] == n and r["workload"] == workload
                }
                print(
                    f"  N={n:>3}: "
                    + "  ".join(f"{a} {cells[a]['relative']:.2f}" for a in ALGORITHMS if a in cells)
                    + f"   (SALB spread {cells['salb']['spread']:.2f}, imbalance "
                    f"{cells['salb']['imbalance']:.2f}; hash {cells['hash']['spread']:.2f}, "
                    f"{cells['hash']['imbalance']:.2f})"
                )
    print(json.dumps(results["learning"]))
    print(
        "LASP cost fit (lookups per publication):",
        {k: results["lasp_cost"][k] for k in ("slope", "intercept", "slope_us", "intercept_us")},
    )
    print("whole Spark job:", results["spark_job"])
    if "spark_job_refined" in results:
        print("whole Spark job, salb-refined:", results["spark_job_refined"])


if __name__ == "__main__":
    raise SystemExit(main())
