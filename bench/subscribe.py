"""Registering and deleting subscriptions: one request each against the batch endpoints.

``python -m bench.subscribe`` starts a local cluster (2 matchers) per run and registers keyword
subscriptions drawn from corpus posts, first one request each, then in batches of 500
(``RouterClient.subscribe_many``), with 4 and 16 requests in flight; then it deletes them the
same way (``DELETE /subscriptions/{id}`` each, or ``RouterClient.unsubscribe_many`` through
``POST /subscriptions/batch/delete``). Every run checks that the cluster holds exactly the
subscriptions it was given, and none after. → ``bench/results/subscribe.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from typing import Any

import httpx

from wordcast.client import RouterClient
from wordcast.corpus.workload import post_queries, sample_posts
from wordcast.defaults import DEVELOPMENT_API_KEY
from wordcast.local.cluster import Cluster
from wordcast.local.supervisor import free_port

from .common import machine, median, write_json


async def _one_each(client: RouterClient, queries: Sequence[str], hook: str) -> list[str]:
    created = await asyncio.gather(*(client.subscribe(q, hook) for q in queries))
    return [str(sub["id"]) for sub in created]


async def _batched(client: RouterClient, queries: Sequence[str], hook: str) -> list[str]:
    return [str(sub["id"]) for sub in await client.subscribe_many(queries, hook, progress=False)]


async def _delete_each(client: RouterClient, ids: Sequence[str]) -> None:
    await asyncio.gather(*(client.unsubscribe(sub_id) for sub_id in ids))


async def _delete_batched(client: RouterClient, ids: Sequence[str]) -> None:
    await client.unsubscribe_many(ids, progress=False)


WAYS = {
    "one request each": (_one_each, _delete_each),
    "batches of 500": (_batched, _delete_batched),
}


async def _timed(
    router_url: str, concurrency: int, way: str, queries: Sequence[str], hook: str
) -> tuple[float, float, int]:
    """Seconds to register the queries, seconds to delete them, and how many were held between."""
    register, delete = WAYS[way]
    async with RouterClient(router_url, concurrency=concurrency) as client:
        started = time.perf_counter()
        ids = await register(client, queries, hook)
        registered = time.perf_counter() - started
        held = _registered(router_url)
        started = time.perf_counter()
        await delete(client, ids)
        return registered, time.perf_counter() - started, held


def _registered(router_url: str) -> int:
    """Subscriptions the development tenant holds, counted through the API."""
    total, cursor = 0, 0
    with httpx.Client(base_url=router_url, timeout=30) as http:
        headers = {"authorization": f"Bearer {DEVELOPMENT_API_KEY}"}
        while True:
            page = http.get(
                "/subscriptions", params={"cursor": cursor, "limit": 1000}, headers=headers
            ).json()
            total += len(page["subscriptions"])
            cursor = page["next_cursor"]
            if not cursor:
                return total


def run(args: argparse.Namespace) -> dict[str, Any]:
    posts = sample_posts(20_000, seed=7)
    queries = post_queries(posts, args.subscriptions, seed=8, sizes=(2, 2, 3))
    rows: list[dict[str, Any]] = []
    for run_no in range(args.runs):
        for way in WAYS:
            for concurrency in (4, 16):
                with Cluster(
                    matchers=2, port=free_port(), receiver=True, receiver_quiet=True,
                    log_level="warning", out=lambda line: None,
                ) as cluster:  # fmt: skip
                    registered, deleted, held = asyncio.run(
                        _timed(cluster.router_url, concurrency, way, queries, cluster.callback_url)
                    )
                    left = _registered(cluster.router_url)
                assert held == len(queries), f"{held} registered of {len(queries)}"
                assert left == 0, f"{left} left after deleting"
                rate, delete_rate = len(queries) / registered, len(queries) / deleted
                rows.append(
                    {
                        "run": run_no,
                        "way": way,
                        "concurrency": concurrency,
                        "per_s": rate,
                        "deleted_per_s": delete_rate,
                    }
                )
                print(
                    f"run {run_no + 1}: {way}, {concurrency} in flight: {rate:,.0f}/s registered, "
                    f"{delete_rate:,.0f}/s deleted",
                    flush=True,
                )

    def medians(key: str) -> dict[str, float]:
        return {
            f"{way}, {concurrency} in flight": median(
                [r[key] for r in rows if r["way"] == way and r["concurrency"] == concurrency]
            )
            for way in WAYS
            for concurrency in (4, 16)
        }

    return {
        "machine": machine(),
        "parameters": vars(args),
        "runs": rows,
        "median_per_s": medians("per_s"),
        "median_deleted_per_s": medians("deleted_per_s"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscriptions", type=int, default=5_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    result = run(args)
    path = write_json("subscribe", result)
    for name, rate in result["median_per_s"].items():
        deleted = result["median_deleted_per_s"][name]
        print(f"  median {name}: {rate:,.0f} registered/s, {deleted:,.0f} deleted/s")
    print(f"results in {path}")


if __name__ == "__main__":
    main()
