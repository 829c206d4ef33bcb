"""Routing only to matchers whose H(i) holds the word: ``make bench-routing-held``.

``python -m bench.routing_held`` compares, on the same set-up as :mod:`bench.routing` (pypi
summaries, mappings learned on 100K history posts, 30K other posts routed, subscriptions placed
with LASP), the paper's routing K(P, M) (Eq. 3.1: every matcher of a subscribed word) with the
routers' K_H(P, M) (:func:`wordcast.routing.mapping.route_held`: a word's matcher only if its H(i) holds
the word). For hash and SALB mappings, tweet- and topic-based subscriptions, several cluster sizes
and subscription counts it reports spread, the busiest matcher's load and Eq. 3.6 with a unit cost
per post and with trie lookups counted, both deterministic. Each configuration checks that both
routings find exactly the same (post, subscription) matches.

Topic-based subscriptions use the LDA topics stored in ``bench/results/routing.json`` (Spark
MLlib, by :mod:`bench.routing`), so this benchmark needs no Spark.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from wordcast.learning.partitioning import word_network
from wordcast.routing.lasp import LinearCost
from wordcast.routing.mapping import Draw, HashMapping, WordHolders, random_draw, route, route_held

from .common import machine, write_json
from .routing import (
    Deployment,
    Post,
    corpus,
    deploy,
    learn,
    shuffled_history,
    topic_subscriptions,
    tweet_subscriptions,
)

# LASP's f as fitted by bench.routing (BENCHMARKS.md, Fig. 4.1), the router's default.
COST = LinearCost(0.000368, 16.1)
Router = Callable[[Post, Draw], tuple[set[int], dict[str, int]]]


def holders_of(deployment: Deployment) -> WordHolders:
    held = WordHolders()
    for matcher, counts in enumerate(deployment.word_counts):
        held.hold(matcher, counts)
    return held


def measure(
    deployment: Deployment, matchers: int, posts: Sequence[Post], router: Router, seed: int
) -> dict[str, Any]:
    """Loads, lookups and the matches found when ``router`` routes ``posts``."""
    draw = random_draw(random.Random(seed))
    loads, lookups = [0] * matchers, [0] * matchers
    matches: set[tuple[int, str]] = set()
    for index, terms in enumerate(posts):
        targets, drawn = router(terms, draw)
        for matcher in targets:
            loads[matcher] += 1
            for trie in deployment.meets(matcher, drawn):
                lookups[matcher] += trie.operations(terms)
                matches.update((index, sub) for sub in trie.match(terms))
    return {
        "spread": sum(loads) / len(posts),
        "max_load": max(loads),
        "unit_throughput": len(posts) / max(max(loads), 1),
        "lookup_throughput": len(posts) / max(max(lookups), 1),
        "loads": loads,
        "matches": matches,
    }


def compare(
    mapping: HashMapping, subs: Sequence[Post], posts: Sequence[Post], seed: int = 11
) -> dict[str, Any]:
    deployment = deploy(mapping, subs, COST)
    held = holders_of(deployment)
    subscribed = deployment.subscribed
    n = mapping.matchers
    paper = measure(deployment, n, posts, lambda t, d: route(t, subscribed, mapping, d), seed)
    ours = measure(deployment, n, posts, lambda t, d: route_held(t, held, mapping, d), seed)
    if paper["matches"] != ours["matches"]:
        lost, extra = paper["matches"] - ours["matches"], ours["matches"] - paper["matches"]
        raise AssertionError(f"K_H found other matches: {len(lost)} lost, {len(extra)} extra")
    row: dict[str, Any] = {"matches": len(ours["matches"])}
    for name, figures in (("K", paper), ("K_H", ours)):
        row |= {f"{key}_{name}": value for key, value in figures.items() if key != "matches"}
    row["unit_gain"] = row["unit_throughput_K_H"] / row["unit_throughput_K"]
    row["lookup_gain"] = row["lookup_throughput_K_H"] / row["lookup_throughput_K"]
    return row


def stored_topics() -> list[list[str]]:
    # The committed run's topics, also when results go elsewhere (WORDCAST_BENCH_DIR).
    stored = json.loads((Path(__file__).parent / "results" / "routing.json").read_text())
    return [list(topic) for topic in stored["topics"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=int, default=100_000, help="posts the mappings learn on")
    parser.add_argument("--eval", type=int, default=30_000, help="posts routed")
    parser.add_argument("--nodes", default="8,16,64")
    parser.add_argument("--sub-counts", default="100,1000,10000,100000")
    parser.add_argument(
        "--algorithms", default="hash,salb", help="any of hash, salb, salb-refined, gC … gNFCL"
    )
    parser.add_argument("--name", default="routing-held", help="results file name")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    history = shuffled_history(corpus())
    training = history[: args.train]
    evaluation = history[args.train : args.train + args.eval]
    pool = history[args.train + args.eval :]
    topics = stored_topics()
    algorithms = args.algorithms.split(",")
    graph_based = any(a not in ("hash", "salb", "salb-refined") for a in algorithms)
    network = word_network(training) if graph_based else None
    rows: list[dict[str, Any]] = []
    for n in [int(v) for v in args.nodes.split(",")]:
        for algorithm in algorithms:
            mapping = learn(algorithm, training, n, network)
            for count in [int(v) for v in args.sub_counts.split(",")]:
                workloads = {
                    "tweet": tweet_subscriptions(pool, count, 1),
                    "topic": topic_subscriptions(topics, count, 2),
                }
                for workload, subs in workloads.items():
                    row = {"N": n, "algorithm": algorithm, "workload": workload}
                    row |= {"subscriptions": count} | compare(mapping, subs, evaluation)
                    rows.append(row)
                    print(
                        f"N={n} {algorithm} {workload} {count:,}: spread "
                        f"{row['spread_K']:.2f} -> {row['spread_K_H']:.2f}, unit "
                        f"{row['unit_gain']:.2f}x, lookups {row['lookup_gain']:.2f}x "
                        f"({time.perf_counter() - started:.0f}s)",
                        flush=True,
                    )
    results = {"machine": machine(), "rows": rows, "seconds": time.perf_counter() - started}
    path = write_json(args.name, results)
    print(f"wrote {path} ({results['seconds']:.0f}s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
