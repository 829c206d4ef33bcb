"""The compiled core against the Python engines, in one run (issue 9's targets): the ``compiled``
part of ``make bench-matcher`` (``python -m bench.matcher --parts compiled``).

* analysis: short posts (pypi summaries) a second, the Python analyser and the compiled one;
* the compact trie with tweet-based subscriptions: short posts a second at 100K and 1M, long
  Debian documents a second at 800K, Python and compiled; the compiled trie's bytes per
  subscription (its own structures, and the process's RSS growth), the time to build it from a
  million subscriptions, and to rebuild it as a restarted matcher does (ids and analysed terms
  from its snapshot pages, through the adapter the matcher uses); a real matcher process
  restarted on a real Redis holding a million subscriptions, until it serves (``bench.restart``);
* QueryNote compiled against the compiled representative-term presearch (Luwak), on long
  documents in batches of 600, with 1M query-like subscriptions and the cost constants measured
  on the compiled path.

One core, single-threaded; each throughput figure is the best of three passes of a fixed set.
"""

from __future__ import annotations

import gc
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

from wordcast import _core
from wordcast.corpus.files import pypi_posts
from wordcast.engines.compact_trie import CompactTrie
from wordcast.engines.compiled import CompiledCompactTrie
from wordcast.engines.querynote import CostModel, QueryNoteIndex
from wordcast.engines.termstats import TermOrder
from wordcast.query.analysis import Analyser, compiled_analyser

from .matcher import (
    corpus_stats,
    debian_stats,
    log,
    long_documents,
    queries,
    rss_bytes,
    short_items,
    tweets,
)
from .restart import matcher_restart

Terms = frozenset[str]


def best_rate(run: Callable[[], object], items: int, passes: int = 3) -> float:
    """Items a second of ``run`` over ``items``, best of ``passes`` (the collector held off)."""
    best = 0.0
    gc.disable()
    try:
        for _ in range(passes):
            started = time.perf_counter()
            run()
            best = max(best, items / (time.perf_counter() - started))
    finally:
        gc.enable()
    return best


def analysis(count: int) -> dict[str, Any]:
    texts = [t for _, _, t in itertools.islice(pypi_posts(), count)]
    python, compiled = Analyser(), compiled_analyser()
    compiled.term_tuples(texts)  # each new word stemmed once: the steady state is measured
    [python.terms(t) for t in texts]
    row = {
        "posts": len(texts),
        "python_posts_per_s": best_rate(lambda: [python.terms(t) for t in texts], len(texts)),
        "compiled_posts_per_s": best_rate(lambda: compiled.term_tuples(texts), len(texts)),
        "compiled_frozensets_per_s": best_rate(lambda: compiled.terms_many(texts), len(texts)),
    }
    row["speedup"] = row["compiled_posts_per_s"] / row["python_posts_per_s"]
    log(
        f"  analysis: Python {row['python_posts_per_s']:,.0f} posts/s, compiled "
        f"{row['compiled_posts_per_s']:,.0f} ({row['speedup']:.1f}x)"
    )
    return row


def trie(subs: Sequence[Terms], items: Sequence[Terms], label: str, python: bool) -> dict[str, Any]:
    """One size: build and match with the compiled trie, and with the Python one if asked."""
    # Both tries sort paths rarest term first, as a matcher with corpus statistics does.
    order = TermOrder("rare-first", corpus_stats())
    term_lists = [list(s) for s in subs]
    ids = list(range(len(subs)))
    gc.collect()
    before = rss_bytes()
    started = time.perf_counter()
    compiled = _core.CompactTrie(dict(order.rank))
    compiled.add_many(ids, term_lists)
    build = time.perf_counter() - started
    grown = rss_bytes() - before  # the input lists were there before: this is the trie's
    del term_lists
    batch = [list(i) for i in items]
    row: dict[str, Any] = {
        "workload": label,
        "subscriptions": len(subs),
        "items": len(items),
        "compiled_build_s": build,
        "compiled_heap_bytes_per_subscription": compiled.heap_bytes / len(subs),
        "compiled_rss_bytes_per_subscription": grown / len(subs),
        "compiled_items_per_s": best_rate(lambda: compiled.match_many(batch), len(items)),
        # The flat answer: two buffers of ids, no Python list or int per match.
        "compiled_flat_items_per_s": best_rate(lambda: compiled.match_many_flat(batch), len(items)),
        "matches_per_item": sum(len(m) for m in compiled.match_many(batch)) / len(items),
    }

    if python:
        reference = CompactTrie[int](order)
        for i, terms in enumerate(subs):
            reference.add(i, terms)
        few = items[: max(200, len(items) // 10)]
        row["python_items_per_s"] = best_rate(
            lambda: [reference.match(i) for i in few], len(few), passes=1
        )
        row["speedup"] = row["compiled_items_per_s"] / row["python_items_per_s"]
        del reference
    log(
        f"  trie {label} {len(subs):>9,}: compiled {row['compiled_items_per_s']:>11,.0f}/s"
        + f" (flat {row['compiled_flat_items_per_s']:,.0f}/s)"
        + (f", Python {row['python_items_per_s']:,.0f}/s ({row['speedup']:.0f}x)" if python else "")
        + f", {row['compiled_heap_bytes_per_subscription']:.0f} B/sub, build {build:.2f} s"
    )
    return row


def restart(subs: Sequence[Terms]) -> dict[str, Any]:
    """A restarted matcher's rebuild: string ids and term lists, pages of 2,000 into the adapter."""
    pages = [
        [(f"s{k:032x}", list(terms)) for k, terms in enumerate(subs[start : start + 2_000], start)]
        for start in range(0, len(subs), 2_000)
    ]
    started = time.perf_counter()
    index = CompiledCompactTrie()
    for page in pages:
        for sub_id, terms in page:
            index.add(sub_id, terms)
    took = time.perf_counter() - started
    log(f"  restart: {len(subs):,} subscriptions indexed through the adapter in {took:.2f} s")
    return {"subscriptions": len(subs), "index_s": took}


def querynote(count: int, batch_size: int, min_pair_df: int) -> dict[str, Any]:
    stats = debian_stats(min_pair_df)
    subs = queries(count)
    docs = long_documents()
    test_docs = docs[15_000:]
    batches = [test_docs[k : k + batch_size] for k in range(0, 6 * batch_size, batch_size)]
    plan = QueryNoteIndex[int](stats)
    keys = [plan.sort_terms(terms) for terms in subs]
    probe = _core.QueryNote()
    for k, key in enumerate(keys[:50_000]):
        probe.add(k, list(key), 0)
    time_check, time_and, time_avoid = probe.operation_costs(
        batches[0], [list(k) for k in keys[:5_000]]
    )
    plan.costs = CostModel(time_check, time_and, time_avoid, batch_size)
    row: dict[str, Any] = {
        "queries": len(subs),
        "batch": batch_size,
        "costs": {"check": time_check, "and": time_and, "avoid": time_avoid},
    }
    for mode in ("querynote", "luwak"):
        index = _core.QueryNote()
        for k, key in enumerate(keys):
            index.add(k, list(key), plan.decide_extra_terms(key) if mode == "querynote" else 0)
        lists = [[list(d) for d in batch] for batch in batches]

        def run(index: Any = index, lists: list[list[list[str]]] = lists) -> None:
            for batch in lists:
                index.match_batch(batch)

        rate = best_rate(run, len(lists))
        row[f"{mode}_seconds_per_batch"] = 1 / rate
        del index
    row["speedup"] = row["luwak_seconds_per_batch"] / row["querynote_seconds_per_batch"]
    log(
        f"  QueryNote {count:,} queries, batches of {batch_size}: "
        f"{row['querynote_seconds_per_batch'] * 1000:.1f} ms against Luwak's "
        f"{row['luwak_seconds_per_batch'] * 1000:.1f} ms ({row['speedup']:.1f}x)"
    )
    return row


def compiled_part(quick: bool) -> dict[str, Any]:
    small, large = (10_000, 50_000) if quick else (100_000, 1_000_000)
    items = short_items()
    longs = long_documents()[15_000:18_000]
    out: dict[str, Any] = {"analysis": analysis(20_000 if quick else 200_000)}
    out["trie"] = [
        trie(tweets(small), items, "tweets/short", python=True),
        trie(tweets(large), items, "tweets/short", python=True),
        trie(tweets(80_000 if quick else 800_000), longs, "tweets/debian", python=True),
    ]
    out["restart"] = restart(tweets(large))
    out["matcher_restart"] = matcher_restart(tweets(large))
    out["querynote"] = querynote(50_000 if quick else 1_000_000, 600, min_pair_df=50)
    return out
