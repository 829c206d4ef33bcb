"""A matcher's restart from its checkpoint, step by step, in one process (issue 41).

``--subscriptions`` keyword subscriptions drawn from corpus posts are written as a matcher's
checkpoint, then read back, indexed (``MatcherIndex.load``) and given to the compiled message
writer (``MessageWriter.follow``): the three steps a restarted matcher takes before it serves,
without the process's start or Redis. ``bench.ingest`` measures the whole restart.
→ ``results/checkpoint.json``.
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from pathlib import Path
from typing import Any

from wordcast.corpus.workload import post_queries, sample_posts
from wordcast.engines.registry import pattern_index, term_index
from wordcast.routing.placement import Placement, decode, encode
from wordcast.services.matcher.checkpoint import MatcherCheckpoints
from wordcast.services.matcher.index import MatcherIndex
from wordcast.services.matcher.messages import MessageOptions, MessageWriter
from wordcast.storage.records import Subscription

from .common import machine, write_json


def run(args: argparse.Namespace) -> dict[str, Any]:
    queries = post_queries(sample_posts(args.pool, seed=7), args.subscriptions, seed=8)
    placed = decode(encode((Placement(0, 0),)))
    subs = [
        Subscription(f"{k:032x}", q, tuple(sorted(set(q.split()))), "http://127.0.0.1:9/h", 0,
                     1.7e9 + k, tenant="bench", placements=placed)
        for k, q in enumerate(queries)
    ]  # fmt: skip
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as directory:
        files = MatcherCheckpoints(Path(directory), "bench", 0)
        started = time.perf_counter()
        size = files.write("1-0", subs)
        seconds["write"] = time.perf_counter() - started
        del subs
        gc.disable()  # as a matcher loading its index
        started = time.perf_counter()
        checkpoint = files.read()
        seconds["read"] = time.perf_counter() - started
    assert checkpoint is not None
    index = MatcherIndex(
        0,
        lambda: term_index("compiled-compact-trie", None),
        lambda: pattern_index("compiled", "none", 2, 2),
    )
    started = time.perf_counter()
    index.load(checkpoint.subscriptions)
    seconds["index"] = time.perf_counter() - started
    started = time.perf_counter()
    MessageWriter(index, MessageOptions()).follow()
    seconds["compiled_writer"] = time.perf_counter() - started
    print(", ".join(f"{step} {s:.2f} s" for step, s in seconds.items()), f"({size / 1e6:.0f} MB)")
    return {
        "benchmark": "checkpoint",
        "machine": machine(),
        "parameters": vars(args),
        "seconds": seconds,
        "bytes": size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscriptions", type=int, default=1_000_000)
    parser.add_argument("--pool", type=int, default=50_000, help="corpus posts drawn from")
    parser.add_argument("--name", default="checkpoint")
    args = parser.parse_args()
    result = run(args)
    print(f"results in {write_json(args.name, result)}")


if __name__ == "__main__":
    main()
