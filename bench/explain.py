"""What ``matched`` (issue 13, part 4) costs a matcher: ``make bench-explain``.

The workload of the end-to-end benchmark's matchers: 10,000 plain keyword queries drawn from pypi
posts (``post_queries``) and 1,000 of the posts; the (subscription, publication) matches found by
a trie, then the messages a matcher records for them (``MessageWriter.write``: grouping, JSON,
ids, in the compiled core), built
with and without each match's explanation, alternating, median of the passes, the garbage
collector tuned as the services tune it. Then the same with
phrase and proximity queries (``post_span_queries``), whose explanations also find every place
each span holds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from wordcast.corpus.workload import post_queries, post_span_queries, sample_posts
from wordcast.engines.registry import pattern_index, term_index
from wordcast.engines.trie import Trie
from wordcast.query.alternatives import HeldAlternatives
from wordcast.query.analysis import analyse, term_positions
from wordcast.query.boolean import parse_query, part_id
from wordcast.services.common import tune_garbage_collection
from wordcast.services.matcher.index import Batch, MatcherIndex
from wordcast.services.matcher.messages import MessageOptions, MessageWriter
from wordcast.storage.records import Subscription

from .common import machine, write_json


def _workload(queries: list[str], texts: list[str]) -> tuple[Any, ...]:
    subscriptions: dict[str, Subscription] = {}
    held = HeldAlternatives()
    trie: Trie[str] = Trie()
    for n, query in enumerate(queries):
        read = parse_query(query)
        for k, clause in enumerate(read.clauses):
            stored = part_id(f"s{n:06d}", k)
            subscriptions[stored] = Subscription(
                stored, query, clause.words, f"http://127.0.0.1:9/{n % 50}", 0
            )
            trie.add(stored, clause.words)
            if not read.is_plain:
                held.add(stored, read)
    terms = [analyse(text) for text in texts]
    pairs = [(s, k) for k, t in enumerate(terms) for s in trie.match(t)]
    if held:
        pairs = held.delivering(pairs, terms.__getitem__, lambda k: term_positions(texts[k]))
    batch = Batch([f"p{k}" for k in range(len(texts))], texts, [tuple(t) for t in terms])
    index = MatcherIndex(0, lambda: term_index("trie"), lambda: pattern_index("naive"))
    index.load(subscriptions.values())
    return pairs, batch, index


def measure(name: str, queries: list[str], texts: list[str], passes: int) -> dict[str, Any]:
    pairs, batch, index = _workload(queries, texts)
    writers = {
        explain: MessageWriter(index, MessageOptions(most=500, explain=explain))
        for explain in (False, True)
    }
    tune_garbage_collection()  # as a matcher runs: the collector rarely, the index frozen
    seconds: dict[bool, list[float]] = {False: [], True: []}
    sizes: dict[bool, int] = {}
    for _ in range(passes):
        for explain in (False, True):
            started = time.perf_counter()
            found, _ = writers[explain].write(batch, pairs)
            seconds[explain].append(time.perf_counter() - started)
            sizes[explain] = sum(len(m.body) for m in found)
    plain, explained = (statistics.median(seconds[e]) for e in (False, True))
    row = {
        "workload": name,
        "queries": len(queries),
        "publications": len(texts),
        "matches": len(pairs),
        "us_per_match_without": plain / len(pairs) * 1e6,
        "us_per_match_with": explained / len(pairs) * 1e6,
        "us_per_publication_without": plain / len(texts) * 1e6,
        "us_per_publication_with": explained / len(texts) * 1e6,
        "ratio": explained / plain,
        "body_bytes_without": sizes[False],
        "body_bytes_with": sizes[True],
    }
    print(
        f"{name}: {len(pairs):,} matches; the writer {row['us_per_match_without']:.2f} → "
        f"{row['us_per_match_with']:.2f} µs a match, {row['us_per_publication_without']:.1f} → "
        f"{row['us_per_publication_with']:.1f} µs a publication ({row['ratio']:.2f}×); bodies "
        f"{sizes[False] / 1e6:.1f} → {sizes[True] / 1e6:.1f} MB",
        file=sys.stderr,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--posts", type=int, default=1_000)
    parser.add_argument("--passes", type=int, default=7)
    args = parser.parse_args()
    pool = sample_posts(args.queries + args.posts, seed=4242)
    texts = [post.text for post in pool[: args.posts]]
    source = pool[args.posts :]
    rows = [
        measure("plain", post_queries(source, args.queries, seed=1), texts, args.passes),
        measure(
            "phrases and proximity",
            post_span_queries(source, args.queries // 10, seed=2),
            texts,
            args.passes,
        ),
    ]
    path = write_json("explain", {"machine": machine(), "passes": args.passes, "rows": rows})
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
