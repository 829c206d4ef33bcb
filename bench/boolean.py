"""Boolean queries matched as the matcher does it, against the plain workload and two peers:
``make bench-boolean``.

On short pypi posts, for 1K … 100K queries drawn from other posts (``post_boolean_queries``):

* ``plain``: a trie of as many plain conjunctions (``post_queries``), the cost boolean queries add to;
* ``wordcast``: a trie over the alternatives' required words (one record per alternative), then
  :class:`wordcast.query.boolean.HeldAlternatives`' check (exclusions, first alternative delivers);
* ``luwak``: Luwak's two-phase matching (Luwak thesis §2): each query is indexed under one
  representative term per alternative, its rarest required term by document frequency here; a
  post's candidates are the queries with a representative term in it, each evaluated in full on
  the query's tree;
* ``brute force``: every query's tree evaluated on every post (the tests' oracle), up to 10K.

Then phrases and proximity (issue 13), against plain conjunctions of the same words: as many
phrase queries (``"a b"`` or ``"a b c"``, runs of words of other posts) and as many ``NEAR/n(a b)``
queries (``post_span_queries``), each timed as the matcher runs it (the trie over the required
words, then the check on positions, the text of each candidate post analysed again) and as a plain
conjunction of its words in a trie (what the same subscription would cost without positions).

Then wildcard words and X's text operators (issue 53), at the matcher, against plain
conjunctions of as many words, on posts with a hashtag each and a link in one of two: ``a hous*``
(a required wildcard: a term the router adds to the posts whose tokens instantiate it, timed as
the router finds them too) against ``a house``, ``a b -hous*`` (an excluded one, which the
matcher finds in the candidates' tokens) against ``a b -c``, ``a #tag``, ``a c has:links`` and
``a c url:"example"`` against ``a c``.

Every figure is one core, single-threaded, matching already analysed term sets, median of passes
over the same posts. Every engine's matches are checked against brute force before timing.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

import orjson

from wordcast.corpus.workload import (
    post_boolean_queries,
    post_queries,
    post_span_queries,
    sample_posts,
)
from wordcast.engines.compiled import CompiledCompactTrie
from wordcast.engines.registry import pattern_index
from wordcast.engines.trie import Trie
from wordcast.errors import InvalidInput
from wordcast.query.alternatives import HeldAlternatives
from wordcast.query.analysis import analyse, normalised_tokens, term_positions
from wordcast.query.boolean import BooleanQuery, Node, evaluate, parse_query, parse_tree, part_id
from wordcast.query.wildcards import found_in_texts, held_wildcards
from wordcast.services.matcher.index import Batch, MatcherIndex
from wordcast.services.matcher.messages import MessageOptions, MessageWriter
from wordcast.storage.outbox import Message
from wordcast.storage.records import Subscription
from wordcast.testing.queries import query_oracle, wildcard_terms_in
from wordcast.webhooks.payload import matches_of

from .common import RESULTS, machine, plot_engines, write_json

Terms = frozenset[str]
LABELS = {
    "plain": "plain conjunctions (as many queries, trie)",
    "wordcast": "boolean: wordcast (alternatives in a trie, then the check)",
    "luwak": "boolean: Luwak two-phase (representative terms, then the query)",
    "brute force": "boolean: brute force (every query on every post)",
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Alternatives:
    """wordcast's way, as the matcher runs it."""

    def __init__(self, queries: dict[str, str]) -> None:
        self.trie: Trie[str] = Trie()
        self.held = HeldAlternatives()
        for sub_id, text in queries.items():
            query = parse_query(text)
            for k, clause in enumerate(query.clauses):
                stored = part_id(sub_id, k)
                self.trie.add(stored, clause.words)
                if not query.is_plain:
                    self.held.add(stored, query)

    def match(self, posts: list[Terms]) -> list[tuple[str, int]]:
        pairs = [(s, k) for k, terms in enumerate(posts) for s in self.trie.match(terms)]
        if self.held:
            pairs = self.held.delivering(pairs, posts.__getitem__)
        return [(self.held.subscription_id(s), k) for s, k in pairs]


class SpanAlternatives(Alternatives):
    """Phrases and proximity as the matcher checks them: positions from each candidate's text."""

    def __init__(self, queries: dict[str, str], texts: list[str]) -> None:
        super().__init__(queries)
        self.texts = texts

    def match(self, posts: list[Terms]) -> list[tuple[str, int]]:
        pairs = [(s, k) for k, terms in enumerate(posts) for s in self.trie.match(terms)]
        texts = self.texts
        pairs = self.held.delivering(pairs, posts.__getitem__, lambda k: term_positions(texts[k]))
        return [(self.held.subscription_id(s), k) for s, k in pairs]


class SameWords:
    """The same queries as plain conjunctions of their required words, in a trie."""

    def __init__(self, queries: dict[str, str]) -> None:
        self.trie: Trie[str] = Trie()
        for sub_id, text in queries.items():
            self.trie.add(sub_id, parse_query(text).clauses[0].words)

    def match(self, posts: list[Terms]) -> list[tuple[str, int]]:
        return [(s, k) for k, terms in enumerate(posts) for s in self.trie.match(terms)]


class AtTheMatcher:
    """Queries as a matcher holds them: records in a :class:`MatcherIndex` over the compiled
    trie, matched and written into messages (explained, the default) by its compiled writer. A phrase
    or window's candidates are checked in the compiled core, on its analyser's positions; the
    matches kept are written by the Python reference."""

    def __init__(self, queries: dict[str, str], texts: list[str], plain: bool) -> None:
        subs = []
        for sub_id, text in queries.items():
            read = parse_query(text)
            if plain:  # the same words, as a plain conjunction
                words = read.clauses[0].words
                subs.append(Subscription(sub_id, " ".join(words), words, "http://a/", 0))
                continue
            for k, clause in enumerate(read.clauses):
                subs.append(Subscription(part_id(sub_id, k), text, clause.words, "http://a/", 0))
        self.index = MatcherIndex(0, CompiledCompactTrie, lambda: pattern_index("retriever"))
        self.index.load(subs)
        self.writer = MessageWriter(self.index, MessageOptions(most=1_000, max_bytes=1 << 24))
        self.writer.follow()
        self.texts = texts

    def messages(self, posts: list[Terms]) -> tuple[list[Message], int]:
        ids = [str(k) for k in range(len(posts))]
        batch = Batch(ids, self.texts[: len(posts)], [tuple(terms) for terms in posts])
        return self.writer.messages(batch)

    def match(self, posts: list[Terms]) -> list[tuple[str, int]]:
        """What is timed: the messages written; as many placeholders as matches (reading the
        bodies back is the check's work, not the matcher's)."""
        return [("", 0)] * self.messages(posts)[1]

    def pairs(self, posts: list[Terms]) -> set[tuple[str, int]]:
        """The (query, post) of every match the messages hold: what is checked."""
        return {
            (match["subscription_id"], int(match["publication_id"]))
            for message in self.messages(posts)[0]
            for match in matches_of(orjson.loads(message.body))
        }


class LuwakPresearch:
    """Two phases: candidates by one representative term per alternative, then the full query."""

    def __init__(self, queries: dict[str, str], df: Counter[str]) -> None:
        self.trees: dict[str, Node] = {}
        self.by_term: dict[str, list[str]] = {}
        for sub_id, text in queries.items():
            self.trees[sub_id] = parse_tree(text)
            query: BooleanQuery = parse_query(text)
            representatives = {min(c.words, key=lambda t: (df[t], t)) for c in query.clauses}
            for term in representatives:
                self.by_term.setdefault(term, []).append(sub_id)

    def match(self, posts: list[Terms]) -> list[tuple[str, int]]:
        pairs = []
        by_term, trees = self.by_term, self.trees
        for k, terms in enumerate(posts):
            candidates = {s for t in terms for s in by_term.get(t, ())}
            pairs += [(s, k) for s in candidates if evaluate(trees[s], terms)]
        return pairs


class BruteForce:
    def __init__(self, queries: dict[str, str]) -> None:
        self.trees = {sub_id: parse_tree(text) for sub_id, text in queries.items()}

    def match(self, posts: list[Terms]) -> list[tuple[str, int]]:
        items = self.trees.items()
        return [
            (s, k) for k, terms in enumerate(posts) for s, tree in items if evaluate(tree, terms)
        ]


def timed(
    name: str,
    build: Callable[[], Any],
    posts: list[Terms],
    passes: int,
    check: set[tuple[str, int]] | None,
) -> dict[str, Any]:
    gc.collect()
    started = time.perf_counter()
    engine = build()
    build_s = time.perf_counter() - started
    found = engine.match(posts)
    if check is not None:
        assert len(found) == len(set(found)), f"{name}: a match found twice"
        assert set(found) == check, f"{name}: {len(set(found) ^ check)} matches differ"
    seconds = []
    for _ in range(passes):
        started = time.perf_counter()
        engine.match(posts)
        seconds.append(time.perf_counter() - started)
    per_post = statistics.median(seconds) / len(posts)
    return {
        "engine": name,
        "build_s": build_s,
        "publications_per_s": 1 / per_post,
        "us_per_publication": per_post * 1e6,
        "matches_per_publication": len(found) / len(posts),
    }


def run(sizes: list[int], posts_count: int, passes: int, brute_max: int) -> dict[str, Any]:
    pool = sample_posts(max(sizes) * 2 + posts_count, seed=4242)
    stream = [analyse(p.text) for p in pool[:posts_count]]
    source = pool[posts_count:]
    df: Counter[str] = Counter(t for post in source for t in analyse(post.text))
    rows: list[dict[str, Any]] = []
    for size in sizes:
        log(f"{size:,} queries…")
        boolean = dict(enumerate(post_boolean_queries(source, size, seed=size)))
        queries = {str(k): q for k, q in boolean.items()}
        plain = {str(k): q for k, q in enumerate(post_queries(source, size, seed=size + 1))}
        alternatives = sum(len(parse_query(q).clauses) for q in queries.values())
        # Brute force is the judge; past brute_max it is checked on a slice and not timed.
        judged = stream if size <= brute_max else stream[: max(50, posts_count * brute_max // size)]
        truth = set(BruteForce(queries).match(judged))
        engines: list[tuple[str, Callable[[], Any], set[tuple[str, int]] | None]] = [
            ("plain", lambda p=plain: Alternatives(p), None),  # type: ignore[misc]
            ("wordcast", lambda q=queries: Alternatives(q), truth),  # type: ignore[misc]
            ("luwak", lambda q=queries: LuwakPresearch(q, df), truth),  # type: ignore[misc]
        ]
        for name, build, check in engines:
            if check is not None and judged is not stream:
                engine = build()
                assert set(engine.match(judged)) == check, f"{name} differs from brute force"
                check = None
            rows.append({**timed(name, build, stream, passes, check), "subscriptions": size})
        if size <= brute_max:
            brute = timed("brute force", lambda q=queries: BruteForce(q), stream[:200], 1, None)  # type: ignore[misc]
            rows.append({**brute, "subscriptions": size})
        rows[-1]["alternatives"] = alternatives
        for row in rows:
            if row["subscriptions"] == size:
                row["alternatives_per_query"] = alternatives / size
        mine = {r["engine"]: r for r in rows if r["subscriptions"] == size}
        log(
            "  "
            + ", ".join(f"{n} {r['publications_per_s']:,.0f}/s" for n, r in mine.items())
            + f"; {alternatives / size:.2f} alternatives a query"
        )
    return {"machine": machine(), "posts": posts_count, "passes": passes, "rows": rows}


SPAN_KINDS = {"phrase": ('"{phrase}"',), "proximity": ("NEAR/{n}({a} {b})",)}


def run_spans(sizes: list[int], posts_count: int, passes: int) -> list[dict[str, Any]]:
    """Phrase and proximity queries against plain conjunctions of the same words."""
    pool = sample_posts(max(sizes) * 2 + posts_count, seed=4343)
    posts, source = pool[:posts_count], pool[posts_count:]
    stream, texts = [analyse(p.text) for p in posts], [p.text for p in posts]
    rows: list[dict[str, Any]] = []
    for size in sizes:
        for kind, shapes in SPAN_KINDS.items():
            drawn = post_span_queries(source, size * 2, seed=size, shapes=shapes)
            queries = {
                str(k): q for k, q in enumerate(q for q in drawn if not parse_query(q).is_plain)
            }
            queries = dict(list(queries.items())[:size])
            trees = {s: parse_tree(q) for s, q in queries.items()}
            judged = range(min(posts_count, max(50, posts_count * 1_000 // size)))
            truth = {
                (s, k)
                for k in judged
                for positions in [term_positions(texts[k])]
                for s, tree in trees.items()
                if evaluate(tree, stream[k], positions)
            }
            spans = SpanAlternatives(queries, texts)
            assert {p for p in spans.match(stream) if p[1] in judged} == truth, kind
            same = timed("same words", partial(SameWords, queries), stream, passes, None)
            checked = timed(kind, partial(SpanAlternatives, queries, texts), stream, passes, None)
            ratio = checked["us_per_publication"] / same["us_per_publication"]
            for row in (same, checked):
                rows.append({**row, "kind": kind, "subscriptions": len(queries), "cost": ratio})
            log(
                f"  {len(queries):,} {kind} queries: plain {same['publications_per_s']:,.0f}/s, "
                f"checked {checked['publications_per_s']:,.0f}/s: {ratio:.2f}× the cost "
                f"({checked['matches_per_publication']:.2f} against "
                f"{same['matches_per_publication']:.2f} matches a post)"
            )
            # At the matcher: the compiled trie, writer and span checks (issue 40).
            at_matcher = AtTheMatcher(queries, texts, plain=False)
            assert {p for p in at_matcher.pairs(stream) if p[1] in judged} == truth, kind
            same = timed(
                "same words, matcher",
                partial(AtTheMatcher, queries, texts, True),
                stream,
                passes,
                None,
            )
            checked = timed(
                f"{kind}, matcher",
                partial(AtTheMatcher, queries, texts, False),
                stream,
                passes,
                None,
            )
            ratio = checked["us_per_publication"] / same["us_per_publication"]
            for row in (same, checked):
                rows.append({**row, "kind": kind, "subscriptions": len(queries), "cost": ratio})
            log(
                f"  at the matcher: plain {same['publications_per_s']:,.0f}/s, "
                f"checked {checked['publications_per_s']:,.0f}/s: {ratio:.2f}× the cost"
            )
    return rows


# (the shape of the queries timed, the plain queries of as many words they are timed against)
TEXT_KINDS = {
    "wildcard required": ("{a} {w}", "{a} {c}"),
    "wildcard excluded": ("{a} {b} -{w}", "{a} {b} -{c}"),
    "hashtag": ("{a} #{c}", "{a} {c}"),
    "has:links": ("{a} {c} has:links", "{a} {c}"),
    "url:": ('{a} {c} url:"example"', "{a} {c}"),
}


def with_entities(k: int, text: str) -> str:
    """A post with a hashtag of one of its words, and (one in two) a link: what the text
    operators look for."""
    words = [t for t in normalised_tokens(text) if len(t) >= 5]
    tag = f" #{words[0]}" if words else ""
    link = f" https://example.org/{k}" if k % 2 else ""
    return text + tag + link


def wildcard_queries(
    source: list[Any], count: int, seed: int, shapes: tuple[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """``count`` queries of a wildcard shape, and as many plain ones of the same words (a
    wildcard word ``w`` is a word ``b`` or ``c`` of 5 letters or more, its last two cut)."""
    rng = random.Random(seed)
    wild: dict[str, str] = {}
    plain: dict[str, str] = {}
    while len(wild) < count:
        words = sorted(set(normalised_tokens(rng.choice(source).text)))
        other = [t for t in normalised_tokens(rng.choice(source).text) if len(t) >= 5]
        long = [t for t in words if len(t) >= 5]
        if len(words) < 3 or not long or not other:
            continue
        a, b = rng.sample(words, 2)
        c = rng.choice(other if "-" in shapes[0] else long)
        queries = [shape.format(a=a, b=b, c=c, w=c[:-2] + "*") for shape in shapes]
        try:
            for query in queries:
                parse_query(query)
        except InvalidInput:  # a stop word alone, a contradiction…
            continue
        wild[str(len(wild))], plain[str(len(plain))] = queries
    return wild, plain


def run_text_operators(sizes: list[int], posts_count: int, passes: int) -> list[dict[str, Any]]:
    """Wildcard words and X's text operators at the matcher against plain conjunctions of as
    many words, on posts with a hashtag each and a link in one of two."""
    pool = sample_posts(max(sizes) * 2 + posts_count, seed=4444)
    posts, source = pool[:posts_count], pool[posts_count:]
    texts = [with_entities(k, p.text) for k, p in enumerate(posts)]
    stream = [analyse(text) for text in texts]
    rows: list[dict[str, Any]] = []
    for size in sizes:
        for kind, shapes in TEXT_KINDS.items():
            wild, plain = wildcard_queries(source, size, size, shapes)
            # The router carries the wildcard words held: required ones (excluded ones, which
            # no matcher holds as a word, the matcher finds).
            held = held_wildcards(
                w for w in wildcard_terms_in(wild.values()) if "-" not in shapes[0]
            )
            started = time.perf_counter()
            found = found_in_texts(held, texts)  # tokenised too, as the router does it
            router_us = (time.perf_counter() - started) / len(texts) * 1e6
            carried = [terms | set(more) for terms, more in zip(stream, found, strict=True)]
            judged = {str(k): texts[k] for k in range(min(posts_count, 300))}
            truth = query_oracle(wild, judged, detect=False)
            at_matcher = AtTheMatcher(wild, texts, plain=False)
            assert {
                (s, str(k)) for s, k in at_matcher.pairs(carried) if str(k) in judged
            } == truth, kind
            same = timed("plain, matcher", partial(AtTheMatcher, plain, texts, False), stream,
                         passes, None)  # fmt: skip
            checked = timed(f"{kind}, matcher", partial(AtTheMatcher, wild, texts, False),
                            carried, passes, None)  # fmt: skip
            ratio = checked["us_per_publication"] / same["us_per_publication"]
            for row in (same, checked):
                rows.append({**row, "kind": kind, "subscriptions": size, "cost": ratio})
            rows[-1]["router_us_per_publication"] = router_us
            log(
                f"  {size:,} queries ({kind}) at the matcher: plain "
                f"{same['publications_per_s']:,.0f}/s, {kind} "
                f"{checked['publications_per_s']:,.0f}/s: {ratio:.2f}× the cost; the router finds "
                f"the held ones in {router_us:.1f} µs a post"
            )
    return rows


def plot(result: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    rows = result["rows"]
    plot_engines(ax, rows, "subscriptions", "publications_per_s", labels=LABELS)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="queries",
        ylabel="publications per second (one core)",
        title="Boolean queries on short pypi posts",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "boolean.png", dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--posts", type=int, default=2_000)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--brute-max", type=int, default=10_000)
    parser.add_argument(
        "--parts",
        nargs="+",
        choices=("boolean", "spans", "text"),
        default=["boolean", "spans", "text"],
        help="the boolean engines, phrases and proximity, wildcard words and text operators",
    )
    parser.add_argument("--name", default="boolean", help="results file name")
    args = parser.parse_args()
    result: dict[str, Any] = {"machine": machine(), "rows": []}
    if "boolean" in args.parts:
        result = run(args.sizes, args.posts, args.passes, args.brute_max)
    if "spans" in args.parts:
        result["spans"] = run_spans(args.sizes, args.posts, args.passes)
    if "text" in args.parts:
        result["text_operators"] = run_text_operators(args.sizes, args.posts, args.passes)
    path = write_json(args.name, result)
    if not result["rows"]:
        log(f"wrote {path}")
        return
    plot(result)
    log(f"wrote {path} and {RESULTS / 'boolean.png'}")


if __name__ == "__main__":
    main()
