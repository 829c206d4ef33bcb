"""Backfill of a new subscription: ``make bench-backfill``.

The issue's case: five minutes of publications at 5,000 a second (1,500,000 short pypi posts,
repeated with new ids past the distinct ones drawn) kept by the routers of a local cluster
(``WORDCAST_ROUTER_BACKFILL_S=600``, two matchers). They are written straight into the recent
publications, as published requests of 1,000 with the terms routers give them (the compiled
analysis), which is what routers append; writing them through the routers would take the five
minutes. Then new subscriptions (2-word queries from other posts, delivered to the match stream)
ask for ``backfill_minutes: 5``, one after another, and each is timed from its POST until its
matcher has read every publication kept when the backfill started and recorded the matches in its
outbox (``caught_up`` in the matcher's stats; the window's last seconds, left open for
publications still being routed, follow when it closes). Each backfill's matches are checked
against brute force over the same posts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from typing import Any

import httpx

from wordcast.corpus.workload import post_queries, sample_posts
from wordcast.defaults import DEVELOPMENT_API_KEY
from wordcast.local.cluster import Cluster
from wordcast.local.supervisor import free_port
from wordcast.query.analysis import compiled_analyser
from wordcast.query.boolean import parse_query
from wordcast.storage import Store
from wordcast.storage.redis import connect_sync

from .common import machine, write_json

KEY = {"authorization": f"Bearer {DEVELOPMENT_API_KEY}"}
REQUEST = 1_000  # publications per published request


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def _keep(cluster: Cluster, texts: list[str], total: int) -> list[tuple[str, ...]]:
    """Append ``total`` publications (the texts over and over) to the recent publications."""
    store = Store.connect(cluster.redis_url, cluster.namespace)
    terms = compiled_analyser().term_tuples(texts)
    try:
        for start in range(0, total, REQUEST):
            batch = [
                (f"p{k}", texts[k % len(texts)], terms[k % len(texts)])
                for k in range(start, min(start + REQUEST, total))
            ]
            await store.recent.append("dev", "", batch, 600, 100_000)
    finally:
        await store.aclose()
    return terms


def _progress(cluster: Cluster, sub_id: str) -> dict[str, Any] | None:
    token = connect_sync(cluster.redis_url).get(f"{cluster.namespace}:cluster:internal_token")
    for url in cluster.matcher_urls:
        answer = httpx.get(
            f"{url}/internal/backfills", headers={"authorization": f"Bearer {token}"}, timeout=10
        )
        for backfill in answer.json():
            if backfill["subscription_id"] == sub_id:
                return dict(backfill)
    return None


def run(args: argparse.Namespace) -> dict[str, Any]:
    os.environ["WORDCAST_ROUTER_BACKFILL_S"] = "600"
    total = args.minutes * 60 * args.rate
    posts = sample_posts(args.distinct + args.queries * 10, seed=3)
    texts = [post.text for post in posts[: args.distinct]]
    queries = post_queries(posts[args.distinct :], args.queries, seed=4, sizes=(2,))
    rows = []
    with Cluster(matchers=2, port=free_port(), receiver=False, out=lambda line: None) as cluster:
        started = time.perf_counter()
        terms = asyncio.run(_keep(cluster, texts, total))
        log(f"{total:,} publications kept in {time.perf_counter() - started:.0f} s")
        term_sets = [frozenset(t) for t in terms]
        with httpx.Client(base_url=cluster.router_url, headers=KEY, timeout=60) as api:
            for query in queries:
                asked = time.time()
                created = api.post(
                    "/subscriptions", json={"query": query, "backfill_minutes": args.minutes}
                )
                created.raise_for_status()
                sub_id = created.json()["id"]
                while (found := _progress(cluster, sub_id)) is None or not found["caught_up"]:
                    time.sleep(0.05)
                words = frozenset(parse_query(query).clauses[0].words)
                per_cycle = sum(1 for t in term_sets if words <= t)
                cycles, rest = divmod(total, len(texts))
                expected = per_cycle * cycles + sum(1 for t in term_sets[:rest] if words <= t)
                row = {
                    "query": query,
                    "publications_read": found["publications"],
                    "matches": found["matches"],
                    "expected_matches": expected,
                    "seconds": found["caught_up"] - asked,
                }
                log(f"{query!r}: {found['matches']:,} matches in {row['seconds']:.2f} s")
                assert found["matches"] == expected, (found["matches"], expected)
                assert found["publications"] >= total
                rows.append(row)
    seconds = [r["seconds"] for r in rows]
    return {
        "publications": total,
        "minutes": args.minutes,
        "rate": args.rate,
        "median_seconds": statistics.median(seconds),
        "max_seconds": max(seconds),
        "publications_per_s": total / statistics.median(seconds),
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=int, default=5)
    parser.add_argument("--rate", type=int, default=5_000, help="publications a second")
    parser.add_argument("--distinct", type=int, default=300_000, help="distinct posts drawn")
    parser.add_argument("--queries", type=int, default=5)
    args = parser.parse_args()
    result = run(args)
    log(f"backfill of {result['publications']:,} publications: median "
        f"{result['median_seconds']:.2f} s, slowest {result['max_seconds']:.2f} s")  # fmt: skip
    log(f"wrote {write_json('backfill', {'machine': machine(), **result})}")


if __name__ == "__main__":
    main()
