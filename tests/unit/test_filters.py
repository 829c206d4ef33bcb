"""Filters on attributes (wordcast.query.filters): a publication's filter terms say what its
attributes hold, and a query's filters are checked as written every way the cluster checks
them (the tree, the alternatives, the matcher's check of each alternative)."""

from __future__ import annotations

import random

import pytest

from tests.unit.support import delivered_by_alternatives
from wordcast.errors import InvalidInput
from wordcast.query.analysis import analyse
from wordcast.query.boolean import evaluate, parse_query, parse_tree
from wordcast.query.filters import filter_terms

WORDS = ["apple", "pie", "tea", "cake", "the"]
FILTERS = ["source:rss", "-source:rss", "has:url", 'author:"ap  News"', "tags:sport", "score:2",
           "NOT tags:tech", "flag:true", "has:tags"]  # fmt: skip


def test_filter_terms_say_what_the_attributes_hold() -> None:
    terms = filter_terms(
        {
            "source": "RSS",
            "author": "AP  News",
            "tags": ["Sport", " "],
            "url": "",
            "n": 2,
            "f": False,
        }
    )
    assert set(terms) == {
        "has:source", "source:rss", "has:author", "author:ap news", "has:tags", "tags:sport",
        "has:n", "n:2", "has:f", "f:false",
    }  # fmt: skip
    assert filter_terms(None) == []


@pytest.mark.parametrize(
    ("query", "attributes", "holds"),
    [
        ("apple source:rss", {"source": "rss"}, True),
        ("apple source:rss", {"source": "api"}, False),
        ("apple -source:rss", {}, True),
        ('apple author:"AP News"', {"author": "ap   news"}, True),
        ("apple has:url", {"url": ""}, False),
        ("apple has:url", {"url": "https://example.org"}, True),
        ("apple tags:sport", {"tags": ["tech", "sport"]}, True),
        ("apple OR (pie source:rss)", {"source": "api"}, True),  # the apple alternative
        ("http://apple.example", {}, True),  # a URL is words, not a filter
    ],
)
def test_filters_hold_where_the_attributes_say(
    query: str, attributes: dict[str, object], holds: bool
) -> None:
    terms = analyse("an apple pie") | set(filter_terms(attributes))  # type: ignore[arg-type]
    if "example" in query:
        terms |= {"exampl", "http"}
    assert evaluate(parse_tree(query), terms) is holds
    assert parse_query(query).matches(terms) is holds


def test_random_queries_with_filters_agree_every_way() -> None:
    rng = random.Random(21)
    checked = 0
    for _ in range(3_000):
        a, b = rng.choice(WORDS), rng.choice(WORDS)
        f, g = rng.choice(FILTERS), rng.choice(FILTERS)
        query = rng.choice(["{a} {f}", "{a} {f} {g}", "{a} OR ({b} {f})", "({a} OR {b}) {f}",
                            "{a} {f} OR {b} {g}", "{a} NOT ({f} {g})"]).format(
            a=a, b=b, f=f, g=g)  # fmt: skip
        attributes = {
            "source": rng.choice(["rss", "api"]),
            "author": rng.choice(["AP News", "reuters"]),
            "tags": rng.sample(["sport", "tech"], rng.randint(0, 2)),
            "score": rng.randint(1, 3),
            "flag": rng.random() < 0.5,
        }
        if rng.random() < 0.5:
            attributes["url"] = "https://example.org"
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
        try:
            read = parse_query(query)
        except InvalidInput:
            continue
        terms = analyse(text) | set(filter_terms(attributes))  # type: ignore[arg-type]
        expected = evaluate(parse_tree(query), terms)
        assert read.matches(terms) == expected, (query, text, attributes)
        kept = delivered_by_alternatives(read, terms)
        assert len(kept) == int(expected), (query, text, attributes, kept)
        checked += 1
    assert checked > 1_500
