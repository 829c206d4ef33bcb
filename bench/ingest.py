"""Bulk ingest at scale (issue 10): ``make bench-ingest``.

Starts a local cluster (2 matchers, its embedded Redis) and registers ``--subscriptions``
keyword subscriptions drawn from corpus posts through the batch API (``RouterClient.subscribe_many``,
batches of ``--batch``, 1,000 by default, ``--in-flight`` requests at a time). Then it measures:

- the rate of registering, and the Redis memory the subscriptions take (``INFO memory``
  ``used_memory`` after against before, divided by their number): right after, and at rest (once
  both matchers have checkpointed and the event stream is trimmed to what they still need);
- listing a tenant that holds none of them (every bucket scanned in Redis);
- a matcher killed with SIGKILL, once it has written a checkpoint of what it holds: seconds from
  the kill, and from the supervisor's new process, until ``/readyz`` answers 200 again (its
  checkpoint read and the changes since replayed);
- the router likewise (its cold start: the replica of the word maps and the mapping versions);
- deleting them all again through the batch API (``unsubscribe_many``, same requests in flight).

Every run checks that Redis holds exactly the subscriptions registered. → ``results/ingest.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from wordcast.client import RouterClient
from wordcast.corpus.workload import post_queries, sample_posts
from wordcast.defaults import DEVELOPMENT_API_KEY
from wordcast.local.cluster import Cluster
from wordcast.local.supervisor import Service, free_port
from wordcast.storage import Store
from wordcast.storage.events import PROGRESS_EVERY_S
from wordcast.storage.redis import connect_sync, is_cluster

from .common import machine, write_json
from .e2e import cpu_seconds


def _per_master(redis_url: str, section: str, field: str) -> list[int]:
    """``INFO section``'s ``field`` of each master (one Redis: of it)."""
    client = connect_sync(redis_url)
    try:
        if not is_cluster(redis_url):
            return [int(client.info(section)[field])]
        answers = client.info(section, target_nodes=client.PRIMARIES)
        return [int(info[field]) for _, info in sorted(answers.items())]
    finally:
        client.close()


def _used_memory(redis_url: str) -> int:
    return sum(_per_master(redis_url, "memory", "used_memory"))


def _commands(redis_url: str) -> list[int]:
    """Commands each master has processed so far."""
    return _per_master(redis_url, "stats", "total_commands_processed")


async def _register(
    router_url: str, queries: list[str], hook: str, in_flight: int, batch: int
) -> tuple[float, list[str]]:
    """Seconds to register ``queries``, and their ids."""
    async with RouterClient(router_url, concurrency=in_flight) as client:
        started = time.perf_counter()
        made = await client.subscribe_many(queries, hook, batch=batch)
        return time.perf_counter() - started, [str(sub["id"]) for sub in made]


def _import_file(cluster: Cluster, queries: list[str]) -> tuple[float, list[str]]:
    """Seconds ``wordcast subscribe --file`` takes to import ``queries`` (a key each), the
    command's start included; and their ids."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "subscriptions.jsonl"
        path.write_bytes(
            b"".join(
                orjson.dumps({"query": q, "key": f"k{k}"}) + b"\n" for k, q in enumerate(queries)
            )
        )
        command = [sys.executable, "-m", "wordcast", "subscribe", "--file", str(path)]
        command += ["--callback", cluster.callback_url, "--router", cluster.router_url]
        started = time.perf_counter()
        subprocess.run(
            command, env=os.environ | {"WORDCAST_API_KEY": DEVELOPMENT_API_KEY}, check=True
        )
        seconds = time.perf_counter() - started
    ids = [str(sub.id) for sub in asyncio.run(_listed(cluster))]
    return seconds, ids


async def _listed(cluster: Cluster) -> list[Any]:
    store = Store.connect(cluster.redis_url, cluster.namespace)
    try:
        found: list[Any] = []
        cursor = None
        while cursor != 0:
            cursor, page = await store.subscriptions.tenant_subscriptions(
                "dev",
                cursor or 0,
                1000,  # the development key's tenant
            )
            found += page
        return found
    finally:
        await store.aclose()


async def _list_none(cluster: Cluster) -> float:
    """Seconds to list a tenant that holds none of the records, every bucket passed."""
    store = Store.connect(cluster.redis_url, cluster.namespace)
    try:
        started = time.perf_counter()
        cursor = None
        while cursor != 0:
            cursor, _ = await store.subscriptions.tenant_subscriptions("nobody", cursor or 0, 100)
        return time.perf_counter() - started
    finally:
        await store.aclose()


async def _delete(router_url: str, ids: list[str], in_flight: int, batch: int) -> float:
    async with RouterClient(router_url, concurrency=in_flight) as client:
        started = time.perf_counter()
        await client.unsubscribe_many(ids, batch=batch)
        return time.perf_counter() - started


def _restart(
    cluster: Cluster, service: Service, url: str, timeout: float = 600
) -> dict[str, float]:
    """Kill ``service`` with SIGKILL; seconds until its next process answers /readyz 200."""
    old = service.process
    assert old is not None
    killed = time.monotonic()
    old.kill()
    with httpx.Client(timeout=2) as http:
        while time.monotonic() - killed < timeout:
            if service.process is not old and service.process is not None:
                try:
                    if http.get(f"{url}/readyz").status_code == 200:
                        ready = time.monotonic()
                        return {
                            "from_kill_s": ready - killed,
                            "from_spawn_s": ready - service.started_at,
                        }
                except httpx.HTTPError:
                    pass
            time.sleep(0.05)
    raise TimeoutError(f"{service.name} was not ready {timeout:g} s after being killed")


def run(args: argparse.Namespace) -> dict[str, Any]:
    print(f"drawing {args.subscriptions:,} subscriptions…", flush=True)
    posts = sample_posts(args.pool, seed=7)
    queries = post_queries(posts, args.subscriptions, seed=8, sizes=(2, 2, 3))
    # One tenant registers them all: its quota (100,000 by default) must admit them.
    os.environ["WORDCAST_ROUTER_MAX_SUBSCRIPTIONS_PER_TENANT"] = str(len(queries))
    os.environ["WORDCAST_MATCHER_CHECKPOINT_EVERY_S"] = str(args.checkpoint_every)
    with Cluster(
        redis_shards=args.redis_shards,
        matchers=args.matchers,
        port=free_port(),
        receiver=True,
        receiver_quiet=True,
        out=lambda line: None,
    ) as cluster:
        before = _used_memory(cluster.redis_url)
        commands = _commands(cluster.redis_url)
        cpu = cpu_seconds(cluster)
        if args.from_file:
            seconds, ids = _import_file(cluster, queries)
        else:
            seconds, ids = asyncio.run(
                _register(
                    cluster.router_url, queries, cluster.callback_url, args.in_flight, args.batch
                )
            )
        rate = len(queries) / seconds
        print(f"registered {len(queries):,} in {seconds:.1f} s: {rate:,.0f}/s", flush=True)
        registering = _cpu_us(cpu, cpu_seconds(cluster), len(queries))
        print(f"CPU µs a subscription: {registering}", flush=True)
        memory = _used_memory(cluster.redis_url) - before
        per_master = [b - a for a, b in zip(commands, _commands(cluster.redis_url), strict=True)]
        spread = max(per_master) / max(min(per_master), 1)
        print(f"commands per master: {per_master} ({spread:.2f}× between the extremes)")
        held = _count(cluster.redis_url, cluster.namespace)
        assert held == len(queries), f"Redis holds {held:,} of {len(queries):,}"
        print(f"Redis: {memory / len(queries):,.0f} bytes a subscription", flush=True)
        checkpointed = _checkpointed(cluster.matcher_urls[0], args.checkpoint_every * 3 + 120)
        print(f"matcher-0 wrote its checkpoint {checkpointed:.1f} s after the import", flush=True)
        _checkpointed(cluster.matcher_urls[1 % len(cluster.matcher_urls)], 120)
        time.sleep(3 * PROGRESS_EVERY_S)  # every follower's progress recorded, the stream trimmed
        at_rest = _used_memory(cluster.redis_url) - before
        print(f"Redis at rest: {at_rest / len(queries):,.0f} bytes a subscription", flush=True)
        listing = asyncio.run(_list_none(cluster))
        print(f"listing a tenant with none of them: {listing:.2f} s", flush=True)
        matcher = _restart(cluster, cluster.service("matcher-0"), cluster.matcher_urls[0])
        matcher["holding"] = httpx.get(f"{cluster.matcher_urls[0]}/stats").json()["subscriptions"]
        matcher["loaded_from"] = httpx.get(f"{cluster.matcher_urls[0]}/stats").json()["loaded_from"]
        print(
            f"matcher-0 ({matcher['holding']:,} subscriptions) serving again "
            f"{matcher['from_kill_s']:.1f} s after SIGKILL, from its {matcher['loaded_from']}",
            flush=True,
        )
        router = _restart(cluster, cluster.service("router"), cluster.router_url)
        print(f"router serving again {router['from_kill_s']:.1f} s after SIGKILL", flush=True)
        cpu = cpu_seconds(cluster)
        deleting = asyncio.run(_delete(cluster.router_url, ids, args.in_flight, args.batch))
        deleting_cpu = _cpu_us(cpu, cpu_seconds(cluster), len(ids))
        print(f"CPU µs a deletion: {deleting_cpu}", flush=True)
        left = _count(cluster.redis_url, cluster.namespace)
        assert left == 0, f"Redis still holds {left:,} after deleting them all"
        print(f"deleted {len(ids):,} in {deleting:.1f} s: {len(ids) / deleting:,.0f}/s", flush=True)
    return {
        "benchmark": "ingest",
        "machine": machine(),
        "parameters": vars(args),
        "registered_per_s": rate,
        "seconds_registering": seconds,
        "redis_bytes_per_subscription": memory / len(queries),
        "redis_bytes_per_subscription_at_rest": at_rest / len(queries),
        "seconds_listing_an_empty_tenant": listing,
        "commands_per_master": per_master,
        "commands_spread": spread,
        "matcher_restart": matcher,
        "router_restart": router,
        "seconds_deleting": deleting,
        "cpu_us_per_subscription": registering,
        "cpu_us_per_deletion": deleting_cpu,
        "deleted_per_s": len(ids) / deleting,
    }


def _cpu_us(before: dict[str, float], after: dict[str, float], n: int) -> dict[str, float]:
    """CPU µs each process (and all of them) spent per item between two readings; the load
    generator is this process (its cluster's supervisor threads included)."""
    spent = {
        name: round((after[name] - before[name]) * 1e6 / n, 1)
        for name in after
        if name in before and after[name] > before[name]
    }
    return spent | {"all": round(sum(spent.values()), 1)}


def _checkpointed(url: str, timeout: float) -> float:
    """Seconds until the matcher at ``url`` holds a checkpoint of everything it follows."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        stats = httpx.get(f"{url}/stats", timeout=5).json()
        if stats["checkpoint_position"] == stats["event_position"]:
            return time.monotonic() - started
        time.sleep(0.5)
    raise TimeoutError(f"no checkpoint within {timeout:g} s")


def _count(redis_url: str, namespace: str) -> int:
    """Subscriptions held over every shard (a shard's prefix begins with the namespace's)."""
    client = connect_sync(redis_url)
    try:
        base = namespace.strip("{}")
        return sum(
            int(count)
            for key in client.scan_iter(match="*:tenant-counts", count=1000)
            if base in key
            for count in client.hvals(key)
        )
    finally:
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscriptions", type=int, default=1_000_000)
    parser.add_argument("--in-flight", type=int, default=4, help="batch requests at a time")
    parser.add_argument("--batch", type=int, default=1_000, help="subscriptions a request")
    parser.add_argument("--matchers", type=int, default=2)
    parser.add_argument(
        "--from-file", action="store_true", help="import with wordcast subscribe --file instead"
    )
    parser.add_argument(
        "--redis-shards", type=int, default=0, help="a local Redis Cluster of this many masters"
    )
    parser.add_argument(
        "--checkpoint-every", type=float, default=60.0, help="seconds between checkpoints"
    )
    parser.add_argument("--pool", type=int, default=50_000, help="corpus posts drawn from")
    parser.add_argument("--name", default="ingest")
    args = parser.parse_args()
    result = run(args)
    print(f"results in {write_json(args.name, result)}")


if __name__ == "__main__":
    main()
