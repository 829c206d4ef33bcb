"""The match stream (GET /matches/stream): ``make bench-stream``.

A local cluster (two matchers, one Redis) holds ``--queries`` subscriptions drawn from corpus
posts, every one delivered to the match stream only. A consumer in a process of its own follows
the stream with ``RouterClient.matches`` (httpx and httpx-sse, as a user's program would) and
notes when each match arrives. Three measurements, each run ``--runs`` times (medians reported):

1. **Backlog**: the stream already holds every match of ``--posts`` posts; a consumer reads it
   from the oldest (``Last-Event-ID: 0``): what the router and one client do with nothing else
   running. Target ≥ 20,000 matches/s.
2. **Live**: the posts are published as fast as the router takes them while the consumer follows:
   the whole pipeline (routing, matching, outbox, dispatcher, stream) on this 2-core machine,
   every process sharing it.
3. **Latency at a paced rate**: posts published in batches every 50 ms, paced so that about
   ``--rate`` matches a second arrive, for ``--seconds``; for each match, the time from the POST
   of its publication's batch to the consumer holding it: publish→consumer, which includes the
   match→stream latency of the target (p99 ≤ 100 ms at 2,000 matches/s).
4. **One match a message**: a stream of ``--small`` messages of one match each (the worst case
   for a consumer counting matches: every match an event), read from the oldest.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import time
from typing import Any

import httpx

from wordcast.client import RouterClient
from wordcast.corpus.workload import Post, post_queries, sample_posts
from wordcast.defaults import DEFAULT_ADMIN_TOKEN, DEVELOPMENT_API_KEY
from wordcast.local.cluster import Cluster
from wordcast.local.supervisor import free_port
from wordcast.storage import Store

from .common import RESULTS, machine, median, write_json

KEY = {"authorization": f"Bearer {DEVELOPMENT_API_KEY}"}
QUIET_S = 3.0  # a consumer that has seen nothing for this long has seen everything


def _consume(
    router: str, start: str | None, ready: Any, results: Any, api_key: str | None = None
) -> None:
    """Follow the stream (from ``start``) until it is quiet; (publication id, arrival) pairs."""

    messages: list[float] = []

    async def run() -> list[tuple[str, float]]:
        seen: list[tuple[str, float]] = []
        async with RouterClient(router, api_key=api_key) as client:
            stream = client.matches(start, on_connect=lambda _: ready.set())
            while True:
                try:
                    async with asyncio.timeout(QUIET_S if seen else 120):
                        message = await anext(stream)
                except TimeoutError:
                    break
                now = time.time()
                seen += [(m["publication_id"], now) for m in message.matches]
                messages.append(now)
            await stream.aclose()
        return seen

    results.put((asyncio.run(run()), len(messages)))


def _following(router: str, start: str | None, api_key: str | None = None) -> tuple[Any, Any, Any]:
    context = multiprocessing.get_context("spawn")
    ready, results = context.Event(), context.Queue()
    process = context.Process(target=_consume, args=(router, start, ready, results, api_key))
    process.start()
    if not ready.wait(60):
        raise RuntimeError("the consumer did not connect")
    return process, results, ready


def _finish(process: Any, results: Any) -> tuple[list[tuple[str, float]], int]:
    """The matches the consumer saw, when; and in how many messages (SSE events)."""
    seen, messages = results.get(timeout=600)
    process.join(30)
    return seen, messages


def _publish(api: httpx.Client, posts: list[Post], per_second: float | None) -> dict[str, float]:
    """Batches of 500 as fast as they are taken, or every 50 ms at ``per_second`` posts a
    second; when each batch was sent."""
    sent: dict[str, float] = {}
    step = 500 if per_second is None else max(1, round(per_second * 0.05))
    started = time.monotonic()
    for n, k in enumerate(range(0, len(posts), step)):
        if per_second is not None:
            time.sleep(max(0.0, started + n * 0.05 - time.monotonic()))
        chunk = posts[k : k + step]
        now = time.time()
        sent.update((p.id, now) for p in chunk)
        body = {"publications": [{"id": p.id, "text": p.text} for p in chunk]}
        api.post("/publications", json=body).raise_for_status()
    return sent


def _small_messages(cluster: Cluster, api: httpx.Client, count: int) -> float:
    """A tenant's stream holding ``count`` messages of one match each (written straight into it,
    as a dispatcher would), read from the oldest: the consumer's rate in events, the worst case
    for matches a second."""
    made = api.post(
        "/admin/tenants",
        json={"tenant": "bench-small"},
        headers={"authorization": f"Bearer {DEFAULT_ADMIN_TOKEN}"},
    )
    made.raise_for_status()
    body = '{"type": "matches", "publisher": "bench-small", "stream": null, "matches": [%s]}'
    match = '{"subscription_id": "s", "query": "fast http", "publication_id": "p%d", "text": "%s"}'

    async def fill() -> None:
        store = Store.connect(cluster.redis_url, cluster.namespace)
        try:
            for start in range(0, count, 1_000):
                messages = [
                    (f"msg_small_{n}", body % (match % (n, "a fast http server " * 4)))
                    for n in range(start, min(count, start + 1_000))
                ]
                await store.match_streams.append("bench-small", messages, 3600, 1_000_000)
        finally:
            await store.aclose()

    asyncio.run(fill())
    process, results, _ = _following(cluster.router_url, "0", made.json()["api_key"])
    began = time.time()
    seen, messages = _finish(process, results)
    assert messages == len(seen) == count, (messages, len(seen), count)
    return messages / max(seen[-1][1] - began, 1e-9)


def _rate(seen: list[tuple[str, float]], since: float | None = None) -> float:
    first = since if since is not None else seen[0][1]
    return len(seen) / max(seen[-1][1] - first, 1e-9)


def one_run(args: argparse.Namespace, run: int) -> dict[str, Any]:
    posts = sample_posts(args.posts * 2 + args.rate * args.seconds, seed=run)
    queries = post_queries(posts, args.queries, seed=run)
    with Cluster(matchers=2, port=free_port(), receiver=False, out=lambda line: None) as cluster:
        router = cluster.router_url
        with httpx.Client(base_url=router, timeout=60, headers=KEY) as api:
            for k in range(0, len(queries), 1_000):
                items = [{"query": q} for q in queries[k : k + 1_000]]
                api.post("/subscriptions/batch", json={"subscriptions": items}).raise_for_status()
            # Live first: the consumer follows while the posts go in as fast as they are taken.
            live_posts = posts[: args.posts]
            process, results, _ = _following(router, None)
            started = time.time()
            _publish(api, live_posts, None)
            live, live_messages = _finish(process, results)
            # The same stream again from its oldest: only the serving of what is kept.
            process, results, _ = _following(router, "0")
            began = time.time()
            backlog, backlog_messages = _finish(process, results)
            # Paced: how many matches a post makes here, to come to --rate matches a second.
            per_post = len(live) / len(live_posts)
            paced_posts = posts[args.posts : args.posts + int(args.rate * args.seconds / per_post)]
            process, results, _ = _following(router, None)
            sent = _publish(api, paced_posts, args.rate / per_post)
            paced, paced_messages = _finish(process, results)
            small_per_s = _small_messages(cluster, api, args.small)
    delays = sorted(arrived - sent[pub] for pub, arrived in paced)
    result: dict[str, Any] = {
        "matches_per_post": per_post,
        "live_matches": len(live),
        "live_matches_per_s": _rate(live, started),
        "live_messages": live_messages,
        "backlog_matches": len(backlog),
        "backlog_matches_per_s": _rate(backlog, began),
        "backlog_messages_per_s": backlog_messages / max(backlog[-1][1] - began, 1e-9),
        "paced_matches": len(paced),
        "paced_matches_per_s": _rate(paced),
        "paced_messages": paced_messages,
        "paced_p50_ms": 1000 * statistics.median(delays),
        "paced_p99_ms": 1000 * delays[int(0.99 * (len(delays) - 1))],
        "paced_max_ms": 1000 * delays[-1],
        "small_messages_per_s": small_per_s,
    }
    # Every match the live consumer saw is in the stream once, and nothing else was then.
    assert len(backlog) == len(live), (len(backlog), len(live))
    result["paced_delays_ms"] = [1000 * d for d in delays]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=5_000)
    parser.add_argument("--posts", type=int, default=20_000, help="posts of the live run")
    parser.add_argument("--rate", type=int, default=2_000, help="matches/s of the paced run")
    parser.add_argument("--seconds", type=int, default=20, help="length of the paced run")
    parser.add_argument(
        "--small", type=int, default=50_000, help="one-match messages of the small-message read"
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--name", default="stream", help="results file name")
    args = parser.parse_args()
    runs = []
    for run in range(args.runs):
        result = one_run(args, run)
        print(
            f"run {run + 1}/{args.runs}: backlog {result['backlog_matches_per_s']:,.0f} "
            f"matches/s ({result['backlog_messages_per_s']:,.0f} messages/s), "
            f"live {result['live_matches_per_s']:,.0f}/s "
            f"({result['live_matches']:,} matches), paced at "
            f"{result['paced_matches_per_s']:,.0f}/s: p50 {result['paced_p50_ms']:.1f} ms, "
            f"p99 {result['paced_p99_ms']:.1f} ms; one-match messages "
            f"{result['small_messages_per_s']:,.0f}/s",
            flush=True,
        )
        runs.append(result)
    summary = {
        key: median([r[key] for r in runs])
        for key in (
            "backlog_matches_per_s",
            "backlog_messages_per_s",
            "live_matches_per_s",
            "paced_matches_per_s",
            "paced_p50_ms",
            "paced_p99_ms",
            "small_messages_per_s",
        )
    }
    _plot(runs, args)
    for r in runs:
        del r["paced_delays_ms"]
    path = write_json(
        args.name,
        {
            "benchmark": "stream",
            "machine": machine(),
            "parameters": vars(args),
            "runs": runs,
            "median": summary,
        },
    )
    print(f"medians: {summary}; results in {path}")


def _plot(runs: list[dict[str, Any]], args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for n, r in enumerate(runs):
        delays = r["paced_delays_ms"]
        ax.plot(delays, [k / len(delays) for k in range(len(delays))], label=f"run {n + 1}")
    ax.axvline(100, color="grey", linestyle="--", label="target p99 (100 ms)")
    ax.axhline(0.99, color="grey", linestyle=":")
    ax.set_xscale("log")
    ax.set_xlabel("publish → consumer (ms)")
    ax.set_ylabel("fraction of matches")
    ax.set_title(f"match stream at about {args.rate:,} matches/s")
    ax.legend()
    RESULTS.mkdir(parents=True, exist_ok=True)
    fig.savefig(RESULTS / f"{args.name}.png", dpi=120, bbox_inches="tight")


if __name__ == "__main__":
    main()
