"""What finding a text's entities adds to its analysis (issue 53): ``make bench-entities``.

The compiled analyser's ``term_tuples`` (what a router runs on every batch) on 20,000 short pypi
posts, as they are, with a hashtag and a mention added to each (a tweet's share), and with an
entity in every fifth word; each against the same posts with the markers taken out (the same
words, no entity), back to back, median of passes. The issue's target: at most a tenth of the
analysis. ``cargo bench --bench engines -- entities`` times the scan alone against tokenising.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from wordcast.corpus.workload import sample_posts
from wordcast.query.analysis import compiled_analyser, normalised_tokens

from .common import machine, write_json

MARKS = ["#", "@", "$", "https://x.co/"]


def marked(text: str, every: int) -> str:
    """``text`` with one word in ``every`` made an entity (the kinds in turn)."""
    words = text.split()
    return " ".join(
        MARKS[k // every % len(MARKS)] + w if k % every == 0 else w for k, w in enumerate(words)
    )


def unmarked(text: str) -> str:
    """The same words without an entity."""
    for mark in ("#", "@", "$", ":"):
        text = text.replace(mark, " ")
    return text


def per_post_ns(texts: list[str], passes: int) -> float:
    analyser = compiled_analyser()
    analyser.term_tuples(texts)  # every word stemmed and remembered once
    seconds = []
    for _ in range(passes):
        started = time.perf_counter()
        analyser.term_tuples(texts)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds) / len(texts) * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=20_000)
    parser.add_argument("--passes", type=int, default=9)
    parser.add_argument("--name", default="entities")
    args = parser.parse_args()
    posts = [p.text for p in sample_posts(args.posts, seed=1)]
    tweets = [marked(t, max(2, len(normalised_tokens(t)) // 2)) for t in posts]
    rows: list[dict[str, Any]] = []
    for name, texts in [
        ("pypi posts", posts),
        ("a hashtag and a mention a post", tweets),
        ("an entity in every fifth word", [marked(t, 5) for t in posts]),
    ]:
        with_entities = per_post_ns(texts, args.passes)
        without = per_post_ns([unmarked(t) for t in texts], args.passes)
        rows.append(
            {
                "posts": name,
                "ns_with": with_entities,
                "ns_without": without,
                "added": with_entities / without - 1,
            }
        )
        print(
            f"{name}: {with_entities:,.0f} ns a post, {without:,.0f} without its entities: "
            f"+{(with_entities / without - 1) * 100:.1f}%",
            file=sys.stderr,
        )
    print(f"wrote {write_json(args.name, {'machine': machine(), 'rows': rows})}", file=sys.stderr)


if __name__ == "__main__":
    main()
