"""Where a trie match spends its time: ``python -m bench.profile_trie [--subscriptions N]``.

Splits the per-post cost of the plain trie into sorting the post's terms, the traversal without
emitting matches (hash probes and node visits, counted), and the full match, on the benchmark's
tweet-based workload and short posts.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from wordcast.engines.trie import Trie, _Node

from .matcher import short_items, tweets


def traverse_only(trie: Trie[int], terms: frozenset[str]) -> int:
    """The match loop of ``Trie.match`` without collecting ids; returns the nodes visited."""
    post = sorted(terms)
    end = len(post)
    stack: list[tuple[_Node, int]] = [(trie._root, 0)]
    visits = 0
    while stack:
        node, start = stack.pop()
        for j in range(start, end):
            child = node.children.get(post[j])
            if child is None:
                continue
            visits += 1
            if child.children and j + 1 < end:
                stack.append((child, j + 1))
    return visits


def per_item(
    items: list[frozenset[str]], work: Callable[[frozenset[str]], Any]
) -> tuple[float, list[Any]]:
    started = time.perf_counter()
    results = [work(item) for item in items]
    return (time.perf_counter() - started) / len(items) * 1e6, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscriptions", type=int, default=100_000)
    args = parser.parse_args()
    trie: Trie[int] = Trie()
    for i, terms in enumerate(tweets(args.subscriptions)):
        trie.add(i, terms)
    items = short_items()
    sort_us, _ = per_item(items, lambda x: sorted(set(x)))
    walk_us, visits = per_item(items, lambda x: traverse_only(trie, x))
    full_us, found = per_item(items, trie.match)
    matches = sum(map(len, found)) / len(found)
    probes = sum(trie.operations(x) for x in items) / len(items)
    print(
        f"{args.subscriptions:,} tweet-based subscriptions, {len(items):,} short posts "
        f"({sum(map(len, items)) / len(items):.1f} terms each):\n"
        f"  sorting terms        {sort_us:5.1f} µs\n"
        f"  traversal            {walk_us - sort_us:5.1f} µs ({probes:.1f} probes, "
        f"{sum(visits) / len(visits):.1f} node visits)\n"
        f"  emitting matches     {full_us - walk_us:5.1f} µs ({matches:.1f} matches)\n"
        f"  full match           {full_us:5.1f} µs = {1e6 / full_us:,.0f} posts/s"
    )


if __name__ == "__main__":
    main()
