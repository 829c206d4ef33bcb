"""A matcher restarted with many subscriptions: seconds until it serves again (issue 9's target,
part of ``make bench-matcher``'s ``compiled`` part).

A real Redis is filled with ``n`` tweet-based keyword subscriptions placed on matcher 0, written
with the fields routers write (a hash per subscription, the matcher's set), then a real matcher process is
started with the default (compiled) engines. Measured: from its spawn until ``/readyz`` answers
200, then one routed publication through ``/internal/match`` that must find a match (the index
is really there). The time splits into the process's start (imports, an empty Redis answered:
the same matcher pointed at an empty namespace) and the snapshot's load.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import httpx
import redis

from wordcast.local.redis_server import start_redis_server
from wordcast.local.supervisor import free_port
from wordcast.routing.placement import Placement
from wordcast.storage.keys import Keys
from wordcast.storage.records import Subscription, pack_record

NAMESPACE = "restart-bench"
PLACED = (Placement(0, 0),)  # on matcher 0 from mapping version 0 on, as routers write


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def fill(client: redis.Redis, keys: Keys, subs: Sequence[frozenset[str]], tenant: str) -> None:
    pipe = client.pipeline(transaction=False)
    for k, terms in enumerate(subs):
        words = " ".join(sorted(terms))
        sub_id = f"s{k:016x}"
        record = Subscription(
            sub_id, words, tuple(words.split()), "http://127.0.0.1:9/hook", 0, 1700000000.0,
            tenant=tenant, secret="whsec_" + "0" * 32, placements=PLACED,
        )  # fmt: skip
        pipe.hset(keys.record_of(sub_id), sub_id, pack_record(record))
        pipe.hincrby(keys.matcher_counts, "0", 1)
        pipe.hincrby(keys.tenant_counts, tenant, 1)
        if k % 5_000 == 4_999:
            pipe.execute()
    pipe.execute()


def start_matcher(redis_url: str, namespace: str) -> tuple[subprocess.Popen[bytes], str, float]:
    """A matcher on a port of its own; returns it, its URL and the seconds until it was ready."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = os.environ | {
        "REDIS_URL": redis_url,
        "WORDCAST_NAMESPACE": namespace,
        "WORDCAST_MATCHER_ORDINAL": "0",
        "WORDCAST_MATCHER_PORT": str(port),
        "WORDCAST_MATCHER_LOG_LEVEL": "warning",
        "WORDCAST_CALLBACK_ALLOW": "127.0.0.0/8",
    }
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "wordcast", "matcher"], env=env)
    deadline = started + 300
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=1.0).status_code == 200:
                return process, url, time.perf_counter() - started
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.perf_counter() > deadline:
            process.kill()
            raise SystemExit("the matcher did not become ready")
        time.sleep(0.05)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def matcher_restart(subs: Sequence[frozenset[str]]) -> dict[str, Any]:
    tenant = "bench"
    with tempfile.TemporaryDirectory() as data:
        port = free_port()
        server = start_redis_server(port, data)
        redis_url = f"redis://127.0.0.1:{port}/0"
        try:
            client = redis.Redis.from_url(redis_url, decode_responses=True)
            keys = Keys(NAMESPACE)
            started = time.perf_counter()
            fill(client, keys, subs, tenant)
            log(
                f"  restart: {len(subs):,} subscriptions written in {time.perf_counter() - started:.0f} s"
            )
            empty, _, bare = start_matcher(redis_url, NAMESPACE + "-empty")
            stop(empty)
            matcher, url, ready = start_matcher(redis_url, NAMESPACE)
            try:
                token = str(client.get(keys.internal_token) or "")
                probe = sorted(subs[0])
                reply = httpx.post(
                    f"{url}/internal/match",
                    headers={"Authorization": f"Bearer {token}"},
                    json={
                        "publisher": tenant,
                        "ids": ["probe"],
                        "texts": [" ".join(probe)],
                        "terms": [probe],
                    },
                    timeout=30,
                )
                reply.raise_for_status()
                matches = reply.json()["matches"]
            finally:
                stop(matcher)
        finally:
            server.kill()
            server.wait()
    if matches < 1:
        raise SystemExit("the restarted matcher found no match for its own subscription's terms")
    log(
        f"  restart: ready in {ready:.1f} s with {len(subs):,} subscriptions "
        f"(an empty matcher: {bare:.1f} s); the probe matched {matches}"
    )
    return {
        "subscriptions": len(subs),
        "ready_s": ready,
        "empty_ready_s": bare,
        "probe_matches": matches,
    }
