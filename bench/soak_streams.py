"""Match streams under a soak: ``make bench-soak-streams`` (issue 39; not part of ``make test``).

A local cluster (two matchers, one embedded Redis) serves ``--tenants`` tenants, each with
``--queries`` stream-delivered subscriptions drawn from corpus posts. For ``--minutes``:

- posts are published at ``--rate`` a second (batches of 500 every 100 ms, the tenants in turn);
- ``--fast`` consumers (spread over the tenants) follow their tenant's stream with
  ``RouterClient.matches`` in a process of their own, reading as fast as they can;
- ``--idle`` consumers open their tenant's stream and never read a byte (a socket with a 4 KiB
  receive buffer); the router drops each after its drain deadline, and they open again every
  ``--reopen-s``, so non-reading consumers press on the router the whole time;
- the router's resident memory is sampled every 5 s.

Reported: the router's memory after the warm-up (``--warmup-s``) against its highest later
(target ≤ 1.2×), the publications refused with a 5xx (target 0), and for each fast consumer
whether it saw every message of its tenant's stream, each once (target: all of them).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import socket
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import orjson

from wordcast.client import RouterClient
from wordcast.corpus.workload import post_queries, sample_posts
from wordcast.defaults import DEFAULT_ADMIN_TOKEN
from wordcast.local.cluster import Cluster
from wordcast.local.supervisor import free_port
from wordcast.storage.redis import connect_sync

from .common import RESULTS, machine, write_json

ADMIN = {"authorization": f"Bearer {DEFAULT_ADMIN_TOKEN}"}
BATCH = 500
QUIET_S = 10.0  # a consumer that has seen nothing for this long after the soak has seen all


def _follow(router: str, keys: list[str], connected: Any, over: Any, answers: Any) -> None:
    """Each of ``keys`` follows its tenant's stream from now until the soak is ``over`` and
    its stream has been quiet for ``QUIET_S``; puts the ids each saw, and its errors."""

    async def one(key: str, ended: asyncio.Event) -> tuple[list[str], int]:
        seen: list[str] = []
        errors = 0
        async with RouterClient(router, api_key=key) as client:
            stream = client.matches(on_connect=lambda _: connected.put(1))
            last = time.monotonic()
            reading = asyncio.ensure_future(anext(stream))
            while True:
                done, _ = await asyncio.wait({reading}, timeout=1.0)
                if not done:
                    if ended.is_set() and time.monotonic() - last >= QUIET_S:
                        reading.cancel()
                        with contextlib.suppress(BaseException):
                            await reading
                        break
                    continue
                try:
                    message = reading.result()
                except Exception:  # counted: a consumer that reads must not lose its stream
                    errors += 1
                    break
                seen.append(message.id)
                last = time.monotonic()
                reading = asyncio.ensure_future(anext(stream))
            await stream.aclose()
        return seen, errors

    async def all_of_them() -> list[tuple[list[str], int]]:
        ended = asyncio.Event()
        loop = asyncio.get_running_loop()
        waiting = loop.run_in_executor(None, over.get)
        waiting.add_done_callback(lambda _: ended.set())
        return list(await asyncio.gather(*(one(key, ended) for key in keys)))

    answers.put(asyncio.run(all_of_them()))


def _unread(router: str, key: str) -> socket.socket:
    host, port = router.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    request = f"GET /matches/stream HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {key}\r\n\r\n"
    sock.sendall(request.encode())
    return sock


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def run(args: argparse.Namespace) -> dict[str, Any]:
    posts = sample_posts(args.posts, seed=39)
    tenants = [f"soak{n}" for n in range(args.tenants)]
    with Cluster(matchers=2, port=free_port(), receiver=False, out=lambda line: None) as cluster:
        router = cluster.router_url
        api = httpx.Client(base_url=router, timeout=60)
        keys = {}
        for n, tenant in enumerate(tenants):
            made = api.post("/admin/tenants", json={"tenant": tenant}, headers=ADMIN)
            made.raise_for_status()
            keys[tenant] = made.json()["api_key"]
            queries = post_queries(posts, args.queries, seed=100 + n, sizes=(1, 2))
            api.post(
                "/subscriptions/batch",
                json={"subscriptions": [{"query": q} for q in queries]},
                headers={"authorization": f"Bearer {keys[tenant]}"},
            ).raise_for_status()
        fast_keys = [keys[tenants[k % len(tenants)]] for k in range(args.fast)]
        idle_keys = [keys[tenants[k % len(tenants)]] for k in range(args.idle)]

        context = multiprocessing.get_context("spawn")
        connected, over, answered = context.Queue(), context.Queue(), context.Queue()
        consumers = context.Process(
            target=_follow, args=(router, fast_keys, connected, over, answered)
        )
        consumers.start()
        for _ in fast_keys:
            connected.get(timeout=120)

        pid = int(api.get("/stats").json()["pid"])
        statuses: Counter[int] = Counter()
        samples: list[tuple[float, float]] = []
        idle: list[socket.socket] = []
        started = time.monotonic()
        ends = started + args.minutes * 60
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                samples.append((time.monotonic() - started, _rss_mib(pid)))
                stop.wait(5)

        def publish(n: int) -> None:
            tenant = tenants[n % len(tenants)]
            chunk = [posts[(n * BATCH + k) % len(posts)] for k in range(BATCH)]
            body = {
                "publications": [{"id": f"{n}:{k}", "text": p.text} for k, p in enumerate(chunk)]
            }
            try:
                answer = api.post(
                    "/publications",
                    content=orjson.dumps(body),
                    headers={
                        "authorization": f"Bearer {keys[tenant]}",
                        "content-type": "application/json",
                    },
                )
                statuses[answer.status_code] += 1
            except httpx.HTTPError:
                statuses[-1] += 1

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        step = BATCH / args.rate
        reopened = 0.0
        sent = 0
        with ThreadPoolExecutor(4) as pool:
            while time.monotonic() < ends:
                now = time.monotonic()
                if now - reopened >= args.reopen_s:
                    for sock in idle:
                        sock.close()
                    idle = [_unread(router, key) for key in idle_keys]
                    reopened = now
                pool.submit(publish, sent)
                sent += 1
                time.sleep(max(0.0, started + sent * step - time.monotonic()))
        elapsed = time.monotonic() - started
        for sock in idle:
            sock.close()
        over.put("over")
        answers = answered.get(timeout=900)
        consumers.join(30)
        stop.set()
        sampler.join(10)
        complete = _completeness(cluster, tenants, fast_keys, keys, answers)
        stats = api.get("/stats").json()
    warm = [rss for t, rss in samples if t >= args.warmup_s]
    return {
        "machine": machine(),
        "minutes": args.minutes,
        "rate_asked": args.rate,
        "published": sent * BATCH,
        "published_per_s": sent * BATCH / elapsed,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "server_errors": sum(v for k, v in statuses.items() if k >= 500 or k < 0),
        "fast_consumers": args.fast,
        "idle_consumers": args.idle,
        "consumers_complete": complete["complete"],
        "consumer_errors": sum(errors for _, errors in answers),
        "messages_per_tenant": complete["messages"],
        "matches": complete["matches"],
        "matches_per_post": complete["matches"] / max(1, sent * BATCH),
        "router_rss_at_warmup_mib": warm[0] if warm else None,
        "router_rss_max_after_warmup_mib": max(warm) if warm else None,
        "router_rss_ratio": max(warm) / warm[0] if warm else None,
        "router_rss_samples": samples,
        "router_stats": {k: stats.get(k) for k in ("match_streams", "pid")},
    }


def _completeness(
    cluster: Cluster,
    tenants: list[str],
    fast_keys: list[str],
    keys: dict[str, str],
    answers: list[tuple[list[str], int]],
) -> dict[str, Any]:
    """Whether each fast consumer saw exactly its tenant's stream, each message once."""
    client = connect_sync(cluster.redis_url)
    tenant_of = {key: tenant for tenant, key in keys.items()}
    entries = {tenant: client.xrange(f"{cluster.namespace}:matches:{tenant}") for tenant in tenants}
    kept = {tenant: [entry_id for entry_id, _ in found] for tenant, found in entries.items()}
    matches = sum(
        len(orjson.loads(fields["body"])["matches"])
        for found in entries.values()
        for _, fields in found
    )
    complete = sum(
        1 for key, (seen, _) in zip(fast_keys, answers, strict=True) if seen == kept[tenant_of[key]]
    )
    messages = {t: len(ids) for t, ids in kept.items()}
    return {"complete": complete, "messages": messages, "matches": matches}


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seconds, rss = zip(*result["router_rss_samples"], strict=True)
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(seconds, rss, label="router resident memory")
    if result["router_rss_at_warmup_mib"]:
        ax.axhline(1.2 * result["router_rss_at_warmup_mib"], ls="--", c="grey", label="1.2× warm")
    ax.set_xlabel("seconds into the soak")
    ax.set_ylabel("MiB")
    ax.set_title(
        f"{result['fast_consumers']} reading + {result['idle_consumers']} non-reading streams, "
        f"{result['published_per_s']:,.0f} posts/s"
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--rate", type=int, default=5_000, help="posts published a second")
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--queries", type=int, default=300, help="subscriptions per tenant")
    parser.add_argument("--posts", type=int, default=50_000, help="distinct posts, cycled")
    parser.add_argument("--fast", type=int, default=50, help="consumers that read")
    parser.add_argument("--idle", type=int, default=50, help="consumers that never read")
    parser.add_argument("--reopen-s", type=float, default=60.0)
    parser.add_argument("--warmup-s", type=float, default=120.0)
    parser.add_argument("--name", default="soak_streams")
    args = parser.parse_args()
    result = run(args)
    path = write_json(args.name, result)
    plot(result, RESULTS / f"{args.name}.png")
    print(
        f"{result['published_per_s']:,.0f} posts/s for {args.minutes:g} min; 5xx: "
        f"{result['server_errors']}; consumers that saw all: {result['consumers_complete']}/"
        f"{args.fast}; router {result['router_rss_at_warmup_mib']:.0f} MiB after warm-up, at "
        f"most {result['router_rss_max_after_warmup_mib']:.0f} MiB "
        f"({result['router_rss_ratio']:.2f}x); {path}"
    )


if __name__ == "__main__":
    main()
