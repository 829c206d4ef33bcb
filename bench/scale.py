"""Changing the number of matchers of a running cluster: ``make bench-scale``.

Each run starts a local cluster of 2 matchers (``wordcast up``'s supervisor, in this process),
registers keyword subscriptions and patterns drawn from corpus posts, and keeps publishing corpus
posts (2 publishers, batches of 200) while it scales 2 → 4 → 2 with the steps of ``wordcast
scale`` (``scaling.py``: it asks for the number, a router writes a version with stable hashing, so
no Spark): how long the matchers take to start, the
routers to move the subscriptions and switch, and every router to leave the old version; the
publication rate before, during and after; and, when shrinking, how long until the supervisor has
stopped the matchers left empty. → ``bench/results/scale.json`` and ``scale.png``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from wordcast.client import RouterClient
from wordcast.corpus.workload import post_patterns, post_queries, sample_posts
from wordcast.local.cluster import Cluster
from wordcast.local.supervisor import free_port
from wordcast.ops import scaling
from wordcast.storage import Store
from wordcast.storage.mappings import MappingStore
from wordcast.storage.redis import connect

from .common import RESULTS, machine, median, write_json


class Publisher:
    """Publishes corpus posts as fast as the router accepts them, counting by the half second."""

    def __init__(self, router_url: str, texts: list[str]) -> None:
        self.router_url, self.texts = router_url, texts
        self.accepted: list[tuple[float, int]] = []  # (when, publications)
        self.stop = asyncio.Event()

    async def run(self, publishers: int = 2, batch: int = 200) -> None:
        async with RouterClient(self.router_url, concurrency=publishers) as client:

            async def one(offset: int) -> None:
                position = offset * batch
                while not self.stop.is_set():
                    chunk = [
                        {"text": self.texts[(position + k) % len(self.texts)]} for k in range(batch)
                    ]
                    await client.publish(chunk)
                    self.accepted.append((time.monotonic(), len(chunk)))
                    position += publishers * batch

            await asyncio.gather(*(one(k) for k in range(publishers)))

    def rate(self, start: float, end: float) -> float:
        count = sum(n for at, n in self.accepted if start <= at < end)
        return count / (end - start) if end > start else 0.0


async def _scale(
    cluster: Cluster, store: Store, mappings: MappingStore, matchers: int
) -> dict[str, float]:
    """One ``wordcast scale``; the seconds from the request to each step's end."""
    started, before = time.monotonic(), cluster.matcher_count
    silent: scaling.ProgressReport = lambda _line: None  # noqa: E731
    await scaling.request(store, matchers)
    await scaling.wait_for_matchers(store, matchers, 120, silent)
    ready = time.monotonic()
    version = await scaling.wait_for_version(mappings, matchers, 2, 120, silent)
    while (await mappings.state())[1] != version:
        await asyncio.sleep(0.05)
    active = time.monotonic()
    await scaling.wait_settled(mappings, version, 120, silent)
    settled = time.monotonic()
    await scaling.wait_removable(store, mappings, matchers, before, 120, silent)
    emptied = time.monotonic()
    while cluster.matcher_count != matchers:
        await asyncio.sleep(0.05)
    stopped = time.monotonic()
    return {
        "started": started,
        "matchers_ready_s": ready - started,
        "moved_and_active_s": active - ready,
        "old_version_retired_s": settled - active,
        "old_placements_dropped_s": emptied - settled,
        "total_s": emptied - started,
        "extra_matchers_stopped_s": stopped - emptied,
    }


async def _one_run(cluster: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    posts = sample_posts(30_000, seed=11)
    queries = post_queries(posts[:20_000], args.subscriptions, seed=12)
    patterns = post_patterns(posts[:20_000], args.patterns, seed=13)
    async with RouterClient(cluster.router_url, concurrency=4) as client:
        await client.subscribe_many(queries, cluster.callback_url, progress=False)
        await client.subscribe_many(patterns, cluster.callback_url, kind="pattern", progress=False)
    redis = connect(cluster.redis_url)
    store = Store(redis, cluster.namespace)
    mappings = MappingStore(redis, cluster.namespace)
    publisher = Publisher(cluster.router_url, [p.text for p in posts[20_000:]])
    publishing = asyncio.create_task(publisher.run())
    try:
        began = time.monotonic()
        await asyncio.sleep(args.steady_s)
        up = await _scale(cluster, store, mappings, 4)
        on_new = sum([await store.membership.held_by(m) for m in (2, 3)])
        pattern_loads = await store.word_maps.pattern_loads()
        patterns_on_new = sum(pattern_loads.get(m, 0) for m in (2, 3))
        await asyncio.sleep(args.steady_s)
        down = await _scale(cluster, store, mappings, 2)
        await asyncio.sleep(args.steady_s)
        ended = time.monotonic()
    finally:
        publisher.stop.set()
        await publishing
        await redis.aclose()
    up_end = up["started"] + up["total_s"]
    down_end = down["started"] + down["total_s"]
    return {
        "subscriptions": len(queries) + len(patterns),
        "moved_onto_new_matchers": on_new,
        "patterns_onto_new_matchers": patterns_on_new,
        "up": {k: v for k, v in up.items() if k != "started"},
        "down": {k: v for k, v in down.items() if k != "started"},
        "publications_per_s": {
            "2 matchers, before": publisher.rate(began, up["started"]),
            "scaling up": publisher.rate(up["started"], up_end),
            "4 matchers": publisher.rate(up_end + 1, down["started"]),
            "scaling down": publisher.rate(down["started"], down_end),
            "2 matchers, after": publisher.rate(down_end + 1, ended),
        },
        "timeline": [(round(at - began, 2), n) for at, n in publisher.accepted if at >= began],
        "marks": {
            "up": [up["started"] - began, up_end - began],
            "down": [down["started"] - began, down_end - began],
        },
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    rows = []
    for run_no in range(args.runs):
        with Cluster(
            matchers=2, port=free_port(), receiver=True, receiver_quiet=True,
            log_level="warning", out=lambda line: None,
        ) as cluster:  # fmt: skip
            row = asyncio.run(_one_run(cluster, args))
        rows.append(row)
        rates = row["publications_per_s"]
        print(
            f"run {run_no + 1}: up {row['up']['total_s']:.1f} s "
            f"({row['moved_onto_new_matchers']:,} subscriptions onto the new matchers, "
            f"{row['patterns_onto_new_matchers']:,} of them patterns), down "
            f"{row['down']['total_s']:.1f} s; publications/s "
            + ", ".join(f"{k} {v:,.0f}" for k, v in rates.items()),
            flush=True,
        )
    summary: dict[str, Any] = {}
    for direction in ("up", "down"):
        summary[direction] = {
            step: median([r[direction][step] for r in rows]) for step in rows[0][direction]
        }
    summary["publications_per_s"] = {
        phase: median([r["publications_per_s"][phase] for r in rows])
        for phase in rows[0]["publications_per_s"]
    }
    return {"machine": machine(), "parameters": vars(args), "runs": rows, "median": summary}


def plot(result: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    row = result["runs"][0]
    seconds = int(max(at for at, _ in row["timeline"])) + 1
    per_second = [0] * seconds  # empty seconds stay 0: a stall must show as one
    for at, count in row["timeline"]:
        per_second[int(at)] += count
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.step(range(seconds), per_second, where="post", lw=1)
    for (name, (start, end)), colour in zip(
        row["marks"].items(), ("tab:green", "tab:orange"), strict=True
    ):
        ax.axvspan(start, end, alpha=0.2, color=colour, label=f"scaling {name}")
    ax.set_xlabel("seconds")
    ax.set_ylabel("publications accepted / s")
    ax.set_title("2 → 4 → 2 matchers under a stream (run 1)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "scale.png", dpi=120)


def replot() -> None:
    """Draw the plot again from the stored results (``python -c 'import bench.scale as s;
    s.replot()'``)."""
    import json

    plot(json.loads((RESULTS / "scale.json").read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscriptions", type=int, default=20_000)
    parser.add_argument("--patterns", type=int, default=1_000)
    parser.add_argument("--steady-s", type=float, default=8.0, help="seconds between changes")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    result = run(args)
    path = write_json("scale", result)
    plot(result)
    median_ = result["median"]
    for direction in ("up", "down"):
        print(f"  median scaling {direction}: " + ", ".join(
            f"{k} {v:.2f}" for k, v in median_[direction].items()
        ))  # fmt: skip
    for phase, rate in median_["publications_per_s"].items():
        print(f"  median publications/s, {phase}: {rate:,.0f}")
    print(f"results in {path}")


if __name__ == "__main__":
    main()
