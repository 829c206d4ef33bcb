"""Workloads drawn from the corpora for demos, tests and benchmarks.

The pypi corpus is ordered by package name, so samples are drawn with a seeded shuffle to get
posts from every part of it. Subscriptions are "post-based" (S³-TM §6.1 draws them from random
posts): a few words of a random post, which keeps them realistic and gives them real matches.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from wordcast.corpus.files import pypi_posts
from wordcast.errors import InvalidInput
from wordcast.query.analysis import Analyser, normalised_tokens
from wordcast.query.boolean import parse_query

_REFERENCE: Analyser | None = None


def _reference() -> Analyser:
    """The reference analyser: workloads need its unstemmed ``tokens`` too."""
    global _REFERENCE
    if _REFERENCE is None:
        _REFERENCE = Analyser()
    return _REFERENCE


@dataclass(frozen=True, slots=True)
class Post:
    id: str
    text: str


def sample_posts(count: int, *, seed: int = 0, pool: int | None = None) -> list[Post]:
    """``count`` distinct corpus posts chosen at random from the first ``pool`` rows (all if None)."""
    rows = [(name, text) for name, _month, text in pypi_posts(limit=pool)]
    chosen = random.Random(seed).sample(rows, min(count, len(rows)))
    return [Post(id=f"pypi:{name}", text=text) for name, text in chosen]


def post_queries(
    posts: list[Post],
    count: int,
    *,
    seed: int = 1,
    sizes: tuple[int, ...] = (1, 2, 2, 3, 3, 3),
    analyser: Analyser | None = None,
) -> list[str]:
    """Queries made of 1-3 words of random posts (words kept unstemmed, as a user writes them)."""
    analyser = analyser or _reference()
    rng = random.Random(seed)
    queries: list[str] = []
    while len(queries) < count:
        tokens = sorted(set(analyser.tokens(rng.choice(posts).text)))
        if not tokens:
            continue
        k = min(rng.choice(sizes), len(tokens))
        queries.append(" ".join(rng.sample(tokens, k)))
    return queries


BOOLEAN_SHAPES = (
    "{a} OR {b}",
    "{a} {b} -{c}",
    "({a} OR {b}) {c}",
    "{a} NOT ({b} {c})",
    "({a} {b}) OR ({c} -{d})",
    "{a} OR {b} OR ({c} AND {d})",
)


SPAN_SHAPES = (
    '"{phrase}"',
    '"{phrase}" OR {c}',
    '"{phrase}" -{c}',
    "NEAR/{n}({a} {b})",
    "NEAR/{n}({a} {b}) {c}",
    '{c} NOT "{phrase}"',
)


def post_span_queries(
    posts: list[Post], count: int, *, seed: int = 1, shapes: tuple[str, ...] = SPAN_SHAPES
) -> list[str]:
    """Phrase and proximity queries (:mod:`wordcast.query.spans`) from random posts: a run of 2
    or 3 words of a post as a phrase (stop words inside it included, so gaps are exercised), two
    of its words a few positions apart in ``NEAR/n`` (n drawn from 1 to 4, so the window holds
    in some posts and not in others), and a word c of another post."""
    rng = random.Random(seed)
    queries: list[str] = []
    while len(queries) < count:
        words = normalised_tokens(rng.choice(posts).text)
        other = normalised_tokens(rng.choice(posts).text)
        if len(words) < 4 or not other:
            continue
        start = rng.randrange(len(words) - 3)
        phrase = " ".join(words[start : start + rng.choice((2, 3))])
        a, b = words[start], words[start + rng.randint(1, 3)]
        query = rng.choice(shapes).format(
            phrase=phrase, a=a, b=b, c=rng.choice(other), n=rng.randint(1, 4)
        )
        try:  # a phrase of stop words, one word twice in NEAR, a c that is a stop word…
            parse_query(query)
        except InvalidInput:
            continue
        queries.append(query)
    return queries


def post_boolean_queries(
    posts: list[Post], count: int, *, seed: int = 1, analyser: Analyser | None = None
) -> list[str]:
    """Boolean queries (:mod:`wordcast.query.boolean`) over words of random posts, in the shapes above.

    a and b come from one post, d from another; c comes from the first post half the time, from
    the second otherwise, so alternatives have real matches and exclusions bite."""
    analyser = analyser or _reference()
    rng = random.Random(seed)

    def words(k: int) -> list[str]:
        while True:
            tokens = sorted(set(analyser.tokens(rng.choice(posts).text)))
            if len(tokens) >= k:
                return rng.sample(tokens, k)

    queries: list[str] = []
    while len(queries) < count:
        shape = rng.choice(BOOLEAN_SHAPES)
        first, second = words(3), words(2)
        a, b = first[:2]
        c, d = (first[2] if rng.random() < 0.5 else second[0]), second[1]
        query = shape.format(a=a, b=b, c=c, d=d)
        try:  # two words can stem alike: "models -model" can never match and is refused
            parse_query(query, analyser)
        except InvalidInput:
            continue
        queries.append(query)
    return queries


def analysed_posts(count: int, *, seed: int = 0, skip: int = 0) -> list[frozenset[str]]:
    """Term sets of random non-empty corpus posts (tweet-based subscriptions, short items).

    Drawn with replacement when ``count`` exceeds the corpus; ``skip`` discards the first draws so
    two calls with the same seed can give disjoint samples.
    """
    analyser = _reference()
    texts = [text for _name, _month, text in pypi_posts()]
    rng = random.Random(seed)
    order = rng.sample(range(len(texts)), len(texts))
    out: list[frozenset[str]] = []
    for index in itertools.chain(
        order[skip:], (rng.randrange(len(texts)) for _ in itertools.count())
    ):
        terms = analyser.terms(texts[index])
        if terms:
            out.append(terms)
            if len(out) >= count:
                return out
    return out


def package_name_queries(count: int, *, seed: int = 0) -> list[frozenset[str]]:
    """Query-like subscriptions: package names split on ``-``, ``_`` and ``.``, analysed.

    Names with fewer than two terms are skipped, as the Luwak thesis uses queries of 2+ terms;
    drawn with replacement beyond the distinct names (the thesis allows duplicate queries).
    """
    analyser = _reference()
    names = []
    for name, _month, _text in pypi_posts():
        terms = analyser.terms(name.replace("-", " ").replace("_", " ").replace(".", " "))
        if len(terms) >= 2:
            names.append(terms)
    rng = random.Random(seed)
    if count <= len(names):
        return rng.sample(names, count)
    return names + [rng.choice(names) for _ in range(count - len(names))]


def _escape(literal: str) -> str:
    return "".join("\\" + ch if ch in "?*\\" else ch for ch in literal)


def post_patterns(
    posts: list[Post], count: int, *, seed: int = 0, min_length: int = 8, max_length: int = 24
) -> list[str]:
    """Wildcard patterns cut from the posts' normalised text (each matches at least its source).

    A window of ``min_length``…``max_length`` characters is cut from a random post; then one
    character may become ``?`` and an inner run of 1–6 characters may become ``*``, so patterns
    have zero, one or two operators. Windows whose longest literal run would be under the routing
    minimum are redrawn.
    """
    from wordcast.query.patterns import (  # workload is imported by the CLI; keep that light
        normalise,
        parse,
    )

    rng = random.Random(seed)
    texts = [t for t in (normalise(p.text) for p in posts) if len(t) >= min_length]
    out: list[str] = []
    while len(out) < count:
        text = rng.choice(texts)
        length = rng.randint(min_length, min(max_length, len(text)))
        start = rng.randint(0, len(text) - length)
        # Literal characters are escaped now, so the operators placed below stay distinct.
        pieces = [_escape(ch) for ch in text[start : start + length]]
        if rng.random() < 0.5:
            pieces[rng.randrange(1, length - 1)] = "?"
        if rng.random() < 0.5 and length >= 10:
            cut = rng.randrange(2, length - 7)
            pieces[cut : cut + rng.randint(1, 6)] = ["*"]
        source = "".join(pieces)
        try:
            parse(source)
        except ValueError:
            continue
        out.append(source)
    return out
