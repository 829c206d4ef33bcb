"""End to end on one Redis and on a Redis Cluster, back to back (issue 11): ``make bench-scale-out``.

Runs :mod:`bench.e2e`'s benchmark alternately on the embedded single Redis and on an embedded Redis
Cluster of three masters with a replica each (``wordcast up --redis-shards 3``: each matcher's
outbox in a slot of its own and the subscription records sharded, spread over the masters;
promised writes waiting for a replica), the same subscriptions and publications, three matchers,
each run measured after a warm-up, and reports the ratio of the medians and how the Redis
commands spread over the cluster's masters.
"""

from __future__ import annotations

import argparse
from statistics import median
from typing import Any

from .common import machine, write_json
from .e2e import run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=3, help="single/cluster runs, alternating")
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--warmup", type=float, default=10.0, help="publishing first, not measured (secret reads)"
    )
    parser.add_argument("--subscriptions", type=int, default=10_000)
    parser.add_argument("--matchers", type=int, default=3, help="one outbox for each master")
    options = parser.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {"single": [], "cluster": []}
    for pair in range(options.pairs):
        for kind, shards in (("single", 0), ("cluster", options.shards)):
            args = argparse.Namespace(
                subscriptions=options.subscriptions,
                matchers=options.matchers,
                seconds=options.seconds,
                warmup=options.warmup,
                runs=1,
                batch=1_000,
                concurrency=4,
                pool=50_000,
                queries_from="pypi",
                sizes="2,2,3",
                rate=0.0,
                shedding="off",
                shed_in_flight=20_000,
                profile=False,
                redis_shards=shards,
                name=f"scale-out-{kind}",
            )
            print(f"pair {pair + 1}/{options.pairs}: {kind}", flush=True)
            runs[kind] += run(args)["runs"]
    single = median([r["end_to_end_per_s"] for r in runs["single"]])
    clustered = median([r["end_to_end_per_s"] for r in runs["cluster"]])
    shards = [_per_shard(r) for r in runs["cluster"]]
    spread = {
        measure: median(
            max(v[measure] for v in run) / max(1e-9, min(v[measure] for v in run)) for run in shards
        )
        for measure in ("commands", "master_commands", "cpu_us", "master_cpu_us")
    }
    result = {
        "benchmark": "scale-out",
        "machine": machine(),
        "parameters": vars(options),
        "runs": runs,
        "median_single_per_s": single,
        "median_cluster_per_s": clustered,
        "cluster_over_single": clustered / single,
        "every_match_delivered": all(r["all_delivered"] for rs in runs.values() for r in rs),
        "shards": shards,
        "busiest_over_idlest_shard": spread,
    }
    path = write_json("scale-out", result)
    print(
        f"end to end: one Redis {single:,.0f}/s, a {options.shards}-shard cluster "
        f"{clustered:,.0f}/s ({clustered / single:.2f}x); busiest shard over idlest: "
        f"commands {spread['commands']:.2f}x (masters' {spread['master_commands']:.2f}x), Redis "
        f"CPU {spread['cpu_us']:.2f}x (masters' {spread['master_cpu_us']:.2f}x); every match "
        f"delivered: {result['every_match_delivered']}; results in {path}"
    )


def _per_shard(run: dict[str, Any]) -> list[dict[str, float]]:
    """Each shard's (a master and its replicas) commands and Redis CPU µs a publication."""
    cpu = {
        port: run["cpu_us_per_publication"].get(f"redis-{k}", 0.0)
        for k, port in enumerate(run["redis_nodes"])
    }
    return [
        {
            "master": float(master),
            "commands": sum(run["redis_commands"][p] for p in [master, *replicas]),
            "master_commands": run["redis_commands"][master],
            "cpu_us": sum(cpu[p] for p in [master, *replicas]),
            "master_cpu_us": cpu[master],
        }
        for master, replicas in run["redis_masters"].items()
    ]


if __name__ == "__main__":
    main()
