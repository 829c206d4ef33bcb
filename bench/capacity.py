"""A capacity model of wordcast's Redis, from measured per-operation costs (issue 11):
``make bench-capacity``.

What one Redis, and a Redis Cluster of K shards, holds and carries, for 16 to 256 matchers and 10 to
100 million subscriptions, and which limit is met first. Every input is a figure measured on this
machine and recorded in BENCHMARKS.md (the constants below say where); what is assumed is said
too. It is arithmetic, not a run: its worth is in saying which wall comes first, and what moves it
when the layout changes. Three layouts of a namespace on a Redis Cluster:

- ``slot``: every key in the namespace's slot (issue 11's first step): the shards add failover,
  not capacity;
- ``outboxes`` (issue 11's second step): each matcher's outbox in a slot of its own, spread over
  the masters; the records, word maps and event stream still in the namespace's slot, and with
  them the signing-secret reads, up to one per match;
- ``spread`` (today): the records sharded over the masters too (:mod:`wordcast.storage.shards`),
  each shard with its share of the word maps and an event stream of its own, so the secret
  reads, the subscription writes and the events spread with them.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from typing import Any

from .common import machine, write_json

# Measured (BENCHMARKS.md, "The firehose (issue 10)" and "Past one Redis (issue 11)").
REDIS_BYTES_PER_SUBSCRIPTION = 222  # bench.ingest at 1,000,000, packed records: records, H(i), s(W)
REDIS_CPU_US_PER_PUBLICATION = 7.1  # bench.e2e, 2 matchers, 4.3 matches a post, one Redis
REDIS_CPU_US_PER_SUBSCRIPTION = 24.6  # bench.ingest at 1,000,000: Redis's CPU a subscription
EVENT_BYTES = 180  # one subscription event as followers read it (WORDCAST_EVENTS_MAX note)
MATCHER_LOAD_US_PER_SUBSCRIPTION = 27.8  # bench.ingest: 13.9 s for ~500,000 after a SIGKILL
OUTBOX_BYTES_PER_MATCH = 460  # e2e soak: ~46 KB messages of ~100 matches, texts included
MATCHES_PER_PUBLICATION = 4.3  # the held-out workload of issue 10
# INFO commandstats of one Redis over 10 s of bench.e2e (3 matchers, 10,000 subscriptions):
# 39% of Redis's command time was HMGET of signing secrets (2.2 µs each, 0.4 a publication), the
# outboxes' commands 58% (XADD, XREADGROUP, XACK, XDEL, MULTI/EXEC), everything else 3%.
SECRET_READ_US = 2.5  # one secret read (HMGET of a record), parsing included
SECRET_CACHE_S = 300.0  # a dispatcher keeps a secret this long at most (secrets.MAX_AGE_S)
SECRET_SHARE = 0.39
OUTBOX_SHARE_OF_THE_REST = 0.95

# Assumed: one Redis core serves this share of a core's time before latency climbs; a node has
# this much memory for Redis (maxmemory, as deploy/k8s sets 6 GB of a 10 GiB limit).
REDIS_CORE_BUSY = 0.7
REDIS_NODE_BYTES = 24 * 2**30
MATCHER_RESTART_TARGET_S = 20.0
ROUTERS_PER_16_MATCHERS = 2
CHURN_PER_S = 2_000  # subscriptions added or deleted a second, steady state


@dataclass
class Capacity:
    matchers: int
    subscriptions: int
    shards: int
    layout: str
    redis_gb_per_master: float
    fits_in_memory: bool
    publications_per_s_max: float
    event_fan_out_mb_per_s: float
    matcher_restart_s: float
    subscriptions_per_s_max: float
    first_wall: str


def capacity(matchers: int, subscriptions: int, shards: int, layout: str) -> Capacity:
    """What a cluster of ``matchers`` with ``subscriptions`` on a Redis of ``shards`` masters
    holds and carries, with the namespace laid out as ``layout`` (module docstring)."""
    records_over = shards if layout == "spread" else 1  # masters the records share
    per_master = subscriptions * REDIS_BYTES_PER_SUBSCRIPTION / records_over
    # A publication's Redis work grows with the matchers it reaches (each writes its outbox):
    # measured at 2 matchers with a spread of 1.8; learned routing keeps the spread near 2.
    spread = min(matchers, 2.0)
    rest = REDIS_CPU_US_PER_PUBLICATION * spread / 1.8 * (1 - SECRET_SHARE)
    outbox_us, namespace_us = rest * OUTBOX_SHARE_OF_THE_REST, rest * (1 - OUTBOX_SHARE_OF_THE_REST)
    budget = REDIS_CORE_BUSY * 1e6  # µs of Redis CPU a master spends a second
    # Secret reads: one per match while the subscriptions matched in SECRET_CACHE_S are many and
    # distinct; at most each dispatcher's once per SECRET_CACHE_S for each subscription.
    reads_cap = matchers * subscriptions / SECRET_CACHE_S
    if layout == "slot":
        publications = _solve(budget, outbox_us + namespace_us, reads_cap)
    elif layout == "outboxes":
        publications = min(
            shards * budget / (outbox_us + namespace_us / shards),
            _solve(budget, namespace_us, reads_cap),
        )
    else:
        publications = shards * _solve(budget, outbox_us + namespace_us, reads_cap / shards)
    routers = max(2, ROUTERS_PER_16_MATCHERS * matchers // 16)
    # Every router and matcher follows every event stream: each change is read by all of them,
    # from the master of its shard (the one stream's, unless the records are spread).
    fan_out = CHURN_PER_S * (matchers + routers) * EVENT_BYTES / 1e6 / records_over
    restart = subscriptions / matchers * MATCHER_LOAD_US_PER_SUBSCRIPTION / 1e6
    subscribing = records_over * budget / REDIS_CPU_US_PER_SUBSCRIPTION
    walls = []
    if per_master > REDIS_NODE_BYTES:
        walls.append(f"Redis memory ({per_master / 2**30:,.0f} GiB a master)")
    if restart > MATCHER_RESTART_TARGET_S:
        walls.append(f"matcher restart ({restart:,.0f} s)")
    if fan_out > 100:
        walls.append(f"event fan-out ({fan_out:,.0f} MB/s a master)")
    return Capacity(
        matchers=matchers,
        subscriptions=subscriptions,
        shards=shards,
        layout=layout,
        redis_gb_per_master=per_master / 2**30,
        fits_in_memory=per_master <= REDIS_NODE_BYTES,
        publications_per_s_max=publications,
        event_fan_out_mb_per_s=fan_out,
        matcher_restart_s=restart,
        subscriptions_per_s_max=subscribing,
        first_wall=walls[0] if walls else f"Redis CPU at {publications:,.0f} publications/s",
    )


def _solve(budget: float, us_per_publication: float, reads_cap: float) -> float:
    """Publications a second one master carries when each costs ``us_per_publication`` plus a
    secret read per match, the reads no more than ``reads_cap`` a second."""
    per_match = MATCHES_PER_PUBLICATION * SECRET_READ_US
    publications = budget / (us_per_publication + per_match)
    if publications * MATCHES_PER_PUBLICATION <= reads_cap:
        return publications
    return max(0.0, budget - reads_cap * SECRET_READ_US) / us_per_publication


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 3, 6])
    options = parser.parse_args()
    rows: list[dict[str, Any]] = []
    print(
        f"{'matchers':>8} {'subs':>6} {'shards':>6} {'layout':>8} {'GiB/master':>10} "
        f"{'pub/s max':>10} {'restart s':>9}  first wall"
    )
    for matchers in (16, 32, 64, 128, 256):
        for millions in (10, 30, 100):
            for shards in options.shards:
                for layout in ("slot", "outboxes", "spread") if shards > 1 else ("slot",):
                    row = capacity(matchers, millions * 1_000_000, shards, layout)
                    rows.append(asdict(row))
                    print(
                        f"{matchers:>8} {millions:>5}M {shards:>6} "
                        f"{layout:>8} "
                        f"{row.redis_gb_per_master:>10,.1f} {row.publications_per_s_max:>10,.0f} "
                        f"{row.matcher_restart_s:>9,.0f}  {row.first_wall}"
                    )
    path = write_json(
        "capacity",
        {
            "benchmark": "capacity",
            "machine": machine(),
            "inputs": {k: v for k, v in globals().items() if k.isupper()},
            "rows": rows,
        },
    )
    print(f"results in {path}")


if __name__ == "__main__":
    main()
