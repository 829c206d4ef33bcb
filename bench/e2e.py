"""End-to-end throughput of a local cluster (issue 2's benchmark): ``make bench-e2e``.

Starts Redis, a router, two matchers and a receiver as real processes, registers 10,000
subscriptions drawn from corpus posts, publishes corpus posts as fast as it can for a fixed time,
then waits until every match is delivered. Reports publications per second both as accepted by the
router (routed and matched) and end to end (until the last match reached the webhook), and checks
that the receiver got exactly the number of matches the trie index computes in-process (the trie is
itself checked against brute force by the test suite).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from wordcast.client import RouterClient
from wordcast.corpus.files import debian_documents
from wordcast.corpus.workload import Post, post_queries, sample_posts
from wordcast.engines.trie import Trie
from wordcast.local.cluster import Cluster
from wordcast.local.supervisor import free_port
from wordcast.query.analysis import analyse

from .common import RESULTS, machine, median, write_json


async def _publish_for(
    router_url: str,
    posts: list[tuple[str, str]],
    seconds: float,
    batch: int,
    concurrency: int,
    run: int | str,
    rate: float = 0.0,
) -> tuple[int, float, list[int]]:
    """Publish batches from ``concurrency`` clients for ``seconds``, as fast as they can or at
    ``rate`` publications a second (batches started on a fixed schedule); returns count and
    time."""
    counter = itertools.count()
    published: list[int] = []
    async with RouterClient(router_url, concurrency=concurrency) as client:
        started = time.perf_counter()
        deadline = started + seconds

        async def worker() -> None:
            while time.perf_counter() < deadline:
                n = next(counter)
                if rate:  # batch n is due at n * batch / rate: an open-loop, paced load
                    await asyncio.sleep(max(0.0, started + n * batch / rate - time.perf_counter()))
                chunk = [
                    {"id": f"r{run}b{n}i{k}", "text": posts[(n * batch + k) % len(posts)][1]}
                    for k in range(batch)
                ]
                await client.publish(chunk)
                published.extend((n * batch + k) % len(posts) for k in range(batch))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return len(published), elapsed, published


def _wait_delivered(
    cluster: Cluster, expected: int, shedding: bool, timeout: float = 600
) -> tuple[int, float]:
    """Wait for the last match; under load shedding fewer than ``expected`` arrive, and the end
    is when the outboxes are empty (every publication was in one when its 202 came)."""
    assert cluster.receiver_url is not None
    deadline = time.perf_counter() + timeout
    # One client for the whole wait: a client per poll (httpx.get) builds an SSL context each
    # time, which took 40% of a core from the cluster being measured on this 2-core machine.
    with httpx.Client(timeout=10) as client:
        while True:
            got = client.get(f"{cluster.receiver_url}/stats").json()["matches"]
            if got >= expected or shedding:
                pending = sum(
                    client.get(f"{u}/stats").json()["deliveries_pending"]
                    for u in cluster.matcher_urls
                )
                if pending == 0:
                    done = time.perf_counter()
                    return client.get(f"{cluster.receiver_url}/stats").json()["matches"], done
            if time.perf_counter() > deadline:
                return got, time.perf_counter()
            time.sleep(0.05)


@dataclass(frozen=True)
class WarmUp:
    matches: int = 0  # delivered before the measured window
    per_matcher: tuple[int, ...] = ()


def _warm_up(
    cluster: Cluster,
    args: argparse.Namespace,
    pool: list[tuple[str, str]],
    matches_per_post: list[int],
    run_no: int,
    shedding: bool,
) -> WarmUp:
    """Publish for ``args.warmup`` seconds and wait for every match before the measured window,
    so that it does not count what a fresh cluster does once (the dispatchers' first read of
    each subscription's signing secret, connections made, caches filled)."""
    seconds = getattr(args, "warmup", 0.0)
    if seconds:
        print(f"warming up for {seconds:g}s…", flush=True)
        _, _, published = asyncio.run(
            _publish_for(
                cluster.router_url, pool, seconds, args.batch, args.concurrency, f"{run_no}w", 0.0
            )
        )
        _wait_delivered(cluster, sum(matches_per_post[i] for i in published), shedding)
    stats = [httpx.get(f"{u}/stats", timeout=10).json() for u in cluster.matcher_urls]
    assert cluster.receiver_url is not None
    matches = httpx.get(f"{cluster.receiver_url}/stats", timeout=10).json()["matches"]
    return WarmUp(matches, tuple(s["delivered"] for s in stats))


def run(args: argparse.Namespace) -> dict[str, Any]:
    print(f"loading {args.pool:,} corpus posts…", flush=True)
    posts = sample_posts(args.pool, seed=7)  # one pass over the corpus serves both
    pool = [(p.id, p.text) for p in posts]
    sizes = tuple(int(size) for size in args.sizes.split(","))
    if args.queries_from == "debian":  # held out: the words of other texts than those published
        source = [Post(id=name, text=text) for name, text in debian_documents()]
        queries = post_queries(source, args.subscriptions, seed=8, sizes=sizes)
    else:
        queries = post_queries(posts, args.subscriptions, seed=8, sizes=sizes)
    trie: Trie[int] = Trie()
    for i, query in enumerate(queries):
        trie.add(i, analyse(query))
    matches_per_post = [len(trie.match(analyse(text))) for _, text in pool]

    runs: list[dict[str, Any]] = []
    RESULTS.mkdir(parents=True, exist_ok=True)
    log = (RESULTS / f"{args.name}-cluster.log").open("w")
    shedding = args.shedding != "off"
    # The cluster's processes inherit the environment: this is how the router gets its settings.
    os.environ["WORDCAST_ROUTER_SHEDDING"] = args.shedding
    os.environ["WORDCAST_ROUTER_SHED_IN_FLIGHT"] = str(args.shed_buffer)
    for run_no in range(args.runs):
        with Cluster(
            matchers=args.matchers,
            port=free_port(),
            receiver=True,
            receiver_quiet=True,
            log_level="warning",
            out=lambda line: print(line, file=log, flush=True),
            redis_shards=getattr(args, "redis_shards", 0),
        ) as cluster:
            asyncio.run(_subscribe(cluster, queries))
            warm = _warm_up(cluster, args, pool, matches_per_post, run_no, shedding)
            print(f"run {run_no + 1}/{args.runs}: publishing for {args.seconds:g}s…", flush=True)
            cpu_before = cpu_seconds(cluster)
            bytes_before = httpx.get(f"{cluster.receiver_url}/stats", timeout=10).json()["bytes"]
            commands_before = redis_commands(cluster)
            usec_before = redis_command_usec(cluster)
            spies = (
                profile(cluster, f"{args.name}-run{run_no + 1}", args.profile == "raw")
                if args.profile
                else []
            )
            count, elapsed, published = asyncio.run(
                _publish_for(
                    cluster.router_url,
                    pool,
                    args.seconds,
                    args.batch,
                    args.concurrency,
                    run_no,
                    args.rate,
                )
            )
            started = time.perf_counter() - elapsed
            expected = sum(matches_per_post[i] for i in published)
            delivered, done = _wait_delivered(cluster, warm.matches + expected, shedding)
            delivered -= warm.matches
            cpu = {
                name: seconds - cpu_before.get(name, 0.0)
                for name, seconds in cpu_seconds(cluster).items()
            }
            commands = {
                node: count - commands_before.get(node, 0)
                for node, count in redis_commands(cluster).items()
            }
            command_usec = {
                node: _top(
                    {c: u - usec_before.get(node, {}).get(c, 0) for c, u in by_command.items()}
                )
                for node, by_command in redis_command_usec(cluster).items()
            }
            for spy in spies:
                spy.send_signal(signal.SIGINT)  # py-spy writes its flame graph and exits
                spy.wait(60)
            per_matcher = [
                httpx.get(f"{u}/stats", timeout=10).json()["delivered"] - before
                for u, before in zip(cluster.matcher_urls, warm.per_matcher, strict=True)
            ]
            router = httpx.get(f"{cluster.router_url}/stats", timeout=10).json()
            received = httpx.get(f"{cluster.receiver_url}/stats", timeout=10).json()["bytes"]
            latency = publish_to_webhook(cluster.matcher_urls)
            result = {
                "publications": count,
                "seconds_publishing": elapsed,
                "accepted_per_s": count / elapsed,
                "end_to_end_per_s": count / (done - started),
                "matches_expected": expected,
                "matches_delivered": delivered,
                "all_delivered": delivered == expected,
                "accuracy": delivered / expected if expected else 1.0,
                "delivered_per_matcher": per_matcher,
                "shedding": router["shedding"],
                "spread": router["mapping"]["spread"],
                "latency_s": latency,
                "cpu_s": cpu,
                "redis_commands": commands,
                "redis_command_usec": command_usec,
                "redis_masters": redis_masters(cluster),
                "redis_nodes": [str(p) for p in cluster.redis_node_ports],  # redis-k: the k-th
                "cpu_us_per_publication": {n: 1e6 * s / count for n, s in cpu.items()},
                "cpu_us_per_match": {n: 1e6 * s / max(delivered, 1) for n, s in cpu.items()},
                "cpu_us_per_publication_all": 1e6 * sum(cpu.values()) / count,
                "bytes_per_match": (received - bytes_before) / max(delivered, 1),
            }
            print(
                f"  {result['accepted_per_s']:,.0f} publications/s accepted, "
                f"{result['end_to_end_per_s']:,.0f}/s end to end; "
                f"{delivered:,}/{expected:,} matches delivered "
                f"({' + '.join(f'{d:,}' for d in per_matcher)} by the matchers); "
                f"publish→webhook p50 {latency['p50'] * 1000:,.0f} ms, "
                f"p99 {latency['p99'] * 1000:,.0f} ms; "
                f"{result['cpu_us_per_publication_all']:,.0f} µs of CPU a publication (all), "
                f"{result['bytes_per_match']:,.0f} bytes a match delivered"
                + (
                    f"; {router['shedding']['shed_copies']:,} copies shed, spread "
                    f"{router['mapping']['spread']:.2f}"
                    if shedding
                    else ""
                ),
                flush=True,
            )
            runs.append(result)
    return {
        "benchmark": "e2e",
        "machine": machine(),
        "parameters": vars(args),
        "runs": runs,
        "median_accepted_per_s": median([r["accepted_per_s"] for r in runs]),
        "median_end_to_end_per_s": median([r["end_to_end_per_s"] for r in runs]),
        "every_match_delivered": all(r["all_delivered"] for r in runs),
        "median_accuracy": median([r["accuracy"] for r in runs]),
        "mean_matches_per_post": sum(matches_per_post) / len(matches_per_post),
        "median_p50_s": median([r["latency_s"]["p50"] for r in runs]),
        "median_p99_s": median([r["latency_s"]["p99"] for r in runs]),
    }


def _ports(cluster: Cluster) -> list[int]:
    return cluster.redis_node_ports or [int(cluster.redis_url.rsplit(":", 1)[1].split("/")[0])]


def redis_command_usec(cluster: Cluster) -> dict[str, dict[str, int]]:
    """Microseconds each Redis server spent in each command so far (``INFO commandstats``)."""
    import redis

    found: dict[str, dict[str, int]] = {}
    for port in _ports(cluster):
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=5)
        try:
            stats = client.info("commandstats")
        finally:
            client.close()
        found[str(port)] = {
            name.removeprefix("cmdstat_"): int(entry["usec"]) for name, entry in stats.items()
        }
    return found


def _top(usec: dict[str, int], keep: int = 6) -> dict[str, int]:
    return dict(sorted(usec.items(), key=lambda item: -item[1])[:keep])


def redis_commands(cluster: Cluster) -> dict[str, int]:
    """Commands each Redis server (each node of an embedded Redis Cluster) processed so far."""
    import redis

    ports = cluster.redis_node_ports or [int(cluster.redis_url.rsplit(":", 1)[1].split("/")[0])]
    found: dict[str, int] = {}
    for port in ports:
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=5)
        try:
            found[str(port)] = int(client.info("stats")["total_commands_processed"])
        finally:
            client.close()
    return found


def redis_masters(cluster: Cluster) -> dict[str, list[str]]:
    """The ports of the Redis servers that are masters now, each with its replicas' ports (a
    single Redis: itself, without replicas)."""
    import redis

    if not cluster.redis_node_ports:
        return {port: [] for port in redis_commands(cluster)}
    found: dict[str, list[str]] = {}
    for port in cluster.redis_node_ports:
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=5, decode_responses=True)
        try:
            info = client.info("replication")
            if info["role"] == "master":
                replicas = [v for k, v in info.items() if k.startswith("slave") and k[5:].isdigit()]
                found[str(port)] = [str(r["port"]) for r in replicas]
        finally:
            client.close()
    return found


def cpu_seconds(cluster: Cluster) -> dict[str, float]:
    """CPU time (user + system) so far of each service process and of this one (the load
    generator), from /proc."""
    pids = {s.name: s.process.pid for s in cluster.services if s.process is not None}
    pids["generator"] = os.getpid()
    found: dict[str, float] = {}
    for name, pid in pids.items():
        # The load generator alone (its services are counted apart); a service with its
        # children (a router's workers).
        family = [pid] if name == "generator" else _with_descendants(pid)
        ticks = 0
        for member in family:
            try:
                fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            ticks += int(fields[11]) + int(fields[12])
        if ticks or pid in family:
            found[name] = ticks / os.sysconf("SC_CLK_TCK")
    return found


def _with_descendants(pid: int) -> list[int]:
    family, todo = [], [pid]
    while todo:
        member = todo.pop()
        family.append(member)
        try:
            for task in Path(f"/proc/{member}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return family


def profile(cluster: Cluster, name: str, raw: bool = False) -> list[subprocess.Popen[bytes]]:
    """py-spy on each Python service (Redis is not Python) until SIGINT: flame graphs in
    results/profiles/{name}-{service}.svg (``raw``: collapsed stacks in .txt, for
    ``python -m bench.profile_summary``)."""
    spy = Path(sys.executable).with_name("py-spy")
    folder = RESULTS / "profiles"
    folder.mkdir(parents=True, exist_ok=True)
    return [
        subprocess.Popen(
            [
                str(spy),
                "record",
                "--pid",
                str(service.process.pid),
                "--rate",
                "100",
                "--output",
                str(folder / f"{name}-{service.name}.{'txt' if raw else 'svg'}"),
                "--format",
                "raw" if raw else "flamegraph",
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for service in cluster.services
        if service.process is not None and service.name != "redis"
    ]


def publish_to_webhook(matcher_urls: list[str]) -> dict[str, Any]:
    """The matchers' publish→webhook histogram (Prometheus buckets, summed over matchers): its
    buckets, and p50 / p99 interpolated within them, weighted by message (each 2xx of a message
    is one observation, however many matches it carries)."""
    from prometheus_client.parser import text_string_to_metric_families

    counts: dict[float, float] = {}
    for url in matcher_urls:
        text = httpx.get(f"{url}/metrics", timeout=10).text
        for family in text_string_to_metric_families(text):
            if family.name != "wordcast_publish_to_webhook_seconds":
                continue
            for sample in family.samples:
                if sample.name.endswith("_bucket"):
                    bound = float(sample.labels["le"])
                    counts[bound] = counts.get(bound, 0.0) + sample.value
    bounds = sorted(counts)
    total = counts[bounds[-1]] if bounds else 0.0

    def quantile(q: float) -> float:
        if not total:
            return float("nan")
        wanted, lower, below = q * total, 0.0, 0.0
        for bound in bounds:
            if counts[bound] >= wanted:
                if bound == float("inf"):
                    return lower
                share = (wanted - below) / max(counts[bound] - below, 1e-12)
                return lower + (bound - lower) * share
            lower, below = bound, counts[bound]
        return lower

    return {
        "messages": total,
        "buckets": {str(b): counts[b] for b in bounds},
        "p50": quantile(0.5),
        "p99": quantile(0.99),
    }


async def _subscribe(cluster: Cluster, queries: list[str]) -> None:
    # Batches of 500 (subscribe_many), 4 in flight: about 940 a second here (bench.subscribe).
    async with RouterClient(cluster.router_url, concurrency=4) as client:
        await client.subscribe_many(queries, cluster.callback_url)


def plot(result: dict[str, Any], name: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result["runs"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    xs = range(1, len(runs) + 1)
    ax.bar([x - 0.2 for x in xs], [r["accepted_per_s"] for r in runs], 0.4, label="accepted")
    ax.bar([x + 0.2 for x in xs], [r["end_to_end_per_s"] for r in runs], 0.4, label="end to end")
    ax.axhline(5000, color="grey", linestyle="--", label="target 5,000/s")
    ax.set_xlabel("run")
    ax.set_ylabel("publications / s")
    ax.set_title(
        f"local cluster, {result['parameters']['matchers']} matchers, "
        f"{result['parameters']['subscriptions']:,} subscriptions"
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / f"{name}.png", dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--subscriptions", type=int, default=10_000)
    parser.add_argument("--matchers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--warmup", type=float, default=0.0, help="seconds of publishing before the measured ones"
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--pool", type=int, default=50_000)
    parser.add_argument(
        "--queries-from",
        choices=["pypi", "debian"],
        default="pypi",
        help="draw the subscriptions' words from the published pypi posts themselves, or from "
        "Debian's package descriptions (held out: fewer matches a post)",
    )
    parser.add_argument(
        "--sizes",
        default="2,2,3",
        help="words per subscription, drawn uniformly from this list (2,2,3: a third of three)",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="publications a second, paced (0: as fast as the cluster takes them); the "
        "latency target is measured at 5,000",
    )
    parser.add_argument(
        "--shedding",
        choices=["off", "consensus", "subscription"],
        default="off",
        help="the router's load shedding (then matches may be lost: their share is reported)",
    )
    parser.add_argument("--shed-buffer", type=int, default=20_000)
    parser.add_argument(
        "--profile",
        nargs="?",
        const="svg",
        choices=["svg", "raw"],
        help="record each service with py-spy while publishing and delivering: flame graphs in "
        "results/profiles/, or collapsed stacks (raw) that bench.profile_summary reads "
        "(sampling costs the cluster a little throughput)",
    )
    parser.add_argument(
        "--redis-shards",
        type=int,
        default=0,
        help="run on an embedded Redis Cluster of this many masters, a replica each (0: one Redis)",
    )
    parser.add_argument("--name", default="e2e", help="results file name (and its plot's)")
    args = parser.parse_args()
    result = run(args)
    path = write_json(args.name, result)
    plot(result, args.name)
    print(
        f"median {result['median_accepted_per_s']:,.0f} publications/s accepted, "
        f"{result['median_end_to_end_per_s']:,.0f}/s end to end; every match delivered: "
        f"{result['every_match_delivered']} (median accuracy {result['median_accuracy']:.3f}); "
        f"publish→webhook p50 {result['median_p50_s'] * 1000:,.0f} ms, "
        f"p99 {result['median_p99_s'] * 1000:,.0f} ms; "
        f"results in {path}"
    )


if __name__ == "__main__":
    main()
