"""Moving subscriptions to a new mapping version (issue 4, part 4): ``make bench-migration``.

Starts its own redis-server, stores keyword subscriptions drawn from corpus posts under hash
routing (version 0) for 16 matchers, learns a SALB mapping (version 1) on corpus posts and times
``migration.move_to``: listing every subscription, re-placing with LASP each one whose matcher is
no longer eligible, and storing the moves — one move per round trip to Redis (how it was first
built) against the batches it now sends. Every run must leave every subscription validly placed
for version 1. Writes ``migration.json`` and ``migration.png``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from typing import Any

from wordcast.corpus.files import pypi_posts
from wordcast.learning.salb import learn
from wordcast.local.redis_server import start_redis_server
from wordcast.local.supervisor import free_port
from wordcast.ops.migration import BATCH, move_to
from wordcast.query.analysis import analyse
from wordcast.routing.lasp import LinearCost
from wordcast.routing.mapping import HashMapping, LearnedMapping
from wordcast.routing.placement import Placement, still_valid
from wordcast.services.router.settings import RouterSettings
from wordcast.storage import Store
from wordcast.storage.mappings import MappingStore
from wordcast.storage.records import Subscription
from wordcast.storage.redis import connect

from .common import RESULTS, machine, median, write_json

MATCHERS = 16
# LASP's cost as a router places with it by default (the fitted Fig. 4.1 line).
ROUTER_COST = LinearCost(
    RouterSettings.model_fields["lasp_cost_slope"].default,
    RouterSettings.model_fields["lasp_cost_intercept"].default,
)


def _queries(count: int, seed: int) -> list[tuple[str, ...]]:
    """Subscriptions of 1-4 words of corpus posts (the shape of tweet-based subscriptions)."""
    posts = [sorted(analyse(text)) for _n, _m, text in pypi_posts(limit=4 * count)]
    posts = [p for p in posts if p]
    rng = random.Random(seed)
    return [tuple(sorted(rng.sample(p, min(len(p), rng.randint(1, 4))))) for p in posts[:count]]


async def _populate(store: Store, queries: list[tuple[str, ...]]) -> None:
    old = HashMapping(MATCHERS, 0)
    subs = []
    for k, terms in enumerate(queries):
        matcher = old(terms[0])
        subs.append(
            Subscription(
                f"s{k}",
                " ".join(terms),
                terms,
                "http://receiver.example/hook",
                matcher,
                placements=(Placement(matcher, 0),),
            )
        )
    for start in range(0, len(subs), 32):  # within the client's connection pool
        await asyncio.gather(*(store.subscriptions.add(sub) for sub in subs[start : start + 32]))


async def _one_run(
    url: str, namespace: str, queries: list[tuple[str, ...]], target: LearnedMapping, batch: int
) -> dict[str, Any]:
    client = connect(url)
    try:
        store, mappings = Store(client, namespace), MappingStore(client, namespace)
        await _populate(store, queries)

        async def nothing(*_args: Any) -> None:
            return None

        started = time.perf_counter()
        report = await move_to(store, mappings, target, 0, nothing, nothing, ROUTER_COST, batch)
        seconds = time.perf_counter() - started
        checked: set[str] = set()
        for matcher in range(MATCHERS):
            async for page in store.word_maps.placed_on(matcher):
                for sub in page:
                    if not still_valid(sub.placements, sub.terms, target):
                        raise RuntimeError(f"{sub.id} is not placed for v1: {sub.placements}")
                    checked.add(sub.id)
        if len(checked) != len(queries):
            raise RuntimeError(f"{len(queries) - len(checked)} subscriptions went missing")
        return {"seconds": seconds, "scanned": report.scanned, "moved": report.moved}
    finally:
        await client.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscriptions", default="10000,50000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.subscriptions, args.runs = "2000", 1
    counts = [int(v) for v in args.subscriptions.split(",")]
    training = [analyse(text) for _n, _m, text in pypi_posts(limit=50_000)]
    learned = learn([t for t in training if t], MATCHERS)
    target = learned.as_routing()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="wordcast-bench-migration-") as data:
        port = free_port()
        server = start_redis_server(port, data)
        try:
            url = f"redis://127.0.0.1:{port}/0"
            for count in counts:
                queries = _queries(count, seed=count)
                for batch in (1, BATCH):
                    runs = [
                        asyncio.run(_one_run(url, f"m{count}b{batch}r{r}", queries, target, batch))
                        for r in range(args.runs)
                    ]
                    row = {
                        "subscriptions": count,
                        "batch": batch,
                        "seconds": median([r["seconds"] for r in runs]),
                        "runs": [r["seconds"] for r in runs],
                        "moved": runs[0]["moved"],
                    }
                    rows.append(row)
                    print(
                        f"{count:,} subscriptions, {batch} move(s) per round trip: "
                        f"{row['seconds']:.1f} s ({row['moved']:,} moved)",
                        flush=True,
                    )
        finally:
            server.terminate()
            server.wait(10)
    path = write_json("migration", {"machine": machine(), "matchers": MATCHERS, "rows": rows})
    _plot(rows)
    print(f"wrote {path} and migration.png")
    return 0


def _plot(rows: list[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for batch in sorted({r["batch"] for r in rows}):
        mine = [r for r in rows if r["batch"] == batch]
        ax.plot(
            [r["subscriptions"] for r in mine],
            [r["seconds"] for r in mine],
            marker="o",
            label=f"{batch} move(s) per round trip",
        )
    ax.set_xlabel("subscriptions stored")
    ax.set_ylabel("seconds to move to the new version (median)")
    ax.set_title(f"Mapping migration, {MATCHERS} matchers, SALB after hash")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "migration.png", dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
