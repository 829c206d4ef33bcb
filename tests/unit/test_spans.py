"""Phrases and proximity (wordcast.query.spans): every way of evaluating them agrees with a
brute-force reading of the token list, and bad syntax is refused naming the problem."""

from __future__ import annotations

import random

import pytest

from tests.unit.support import delivered_by_alternatives
from wordcast.errors import InvalidInput
from wordcast.query.analysis import analyse, term_positions, token_terms
from wordcast.query.boolean import evaluate, parse_query, parse_tree
from wordcast.query.spans import Span

VOCABULARY = ["white", "house", "of", "cards", "senate", "vote", "the", "big", "apple", "a", "x"]


def _brute(span: Span, text: str) -> bool:
    """The definition, on the list of each token's term ("" for a dropped one)."""
    terms = token_terms(text)
    if span.near:
        wanted = span.terms
        return any(
            wanted <= set(terms[start : start + span.near + 1]) for start in range(len(terms))
        )
    return any(
        all(0 <= start + offset < len(terms) and terms[start + offset] == term
            for term, offset in span.offsets)
        for start in range(len(terms))
    )  # fmt: skip


def _spans(node: object) -> list[Span]:
    if isinstance(node, Span):
        return [node]
    children = getattr(node, "children", None) or [getattr(node, "child", None)]
    return [span for child in children if child is not None for span in _spans(child)]


@pytest.mark.parametrize(
    ("query", "text", "holds"),
    [
        ('"white house"', "The White House said", True),
        ('"white house"', "a house, white", False),
        ('"white house"', "white the house", False),  # a stop word keeps its place
        ('"house of cards"', "a house in cards", True),  # the phrase's stop word is a gap
        ('"house of cards"', "a house cards", False),
        ("NEAR/1(senate vote)", "vote senate", True),
        ("NEAR/2(senate vote)", "senate to vote", True),
        ("NEAR/2(senate vote)", "the vote in the senate", False),
        ('obama NOT "white house"', "obama at the white house", False),
        ('obama NOT "white house"', "obama in a white big house", True),
    ],
)
def test_phrases_and_proximity_hold_where_the_definition_says(
    query: str, text: str, holds: bool
) -> None:
    tree = parse_tree(query)
    assert evaluate(tree, analyse(text), term_positions(text)) is holds
    assert parse_query(query).matches(analyse(text), term_positions(text)) is holds


def test_random_queries_agree_with_the_brute_force_reading_every_way() -> None:
    rng = random.Random(11)
    shapes = ['"{a} {b}"', '"{a} {b} {c}"', "NEAR/{n}({a} {b})", '"{a} {b}" OR {c}',
              '{c} NOT "{a} {b}"', "NEAR/{n}({a} {b}) -{c}", '("{a} {b}" OR {c}) {d}']  # fmt: skip
    checked = 0
    for _ in range(3_000):
        a, b, c, d = (rng.choice(VOCABULARY) for _ in range(4))
        query = rng.choice(shapes).format(a=a, b=b, c=c, d=d, n=rng.randint(1, 3))
        text = " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(1, 9)))
        try:
            read = parse_query(query)
        except InvalidInput:
            continue
        tree = parse_tree(query)
        terms, positions = analyse(text), term_positions(text)
        for span in _spans(tree):
            assert span.holds(positions) == _brute(span, text), (span, text)
        expected = evaluate(tree, terms, positions)
        assert read.matches(terms, positions) == expected, (query, text)
        # The matcher's check: each alternative that matched on its words, only the first
        # that holds delivers.
        kept = delivered_by_alternatives(read, terms, positions)
        assert len(kept) == int(expected), (query, text, kept)
        checked += 1
    assert checked > 1_000


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ('"white house', "a quote without its closing quote"),
        ('white "', "a quote without its closing quote"),
        ('"the of a"', "has no terms left after analysis"),
        ("NEAR/0(senate vote)", "NEAR/0 needs a window of 1 to 100"),
        ("NEAR/x(senate vote)", "NEAR/x needs a window of 1 to 100"),
        ("NEAR/2(senate)", "needs at least two words"),
        ("NEAR/2(senate vote", "without its ')'"),
        ("NEAR/2(senate OR vote)", "takes words only"),
        ('NOT "white house"', "requires no word"),
    ],
)
def test_bad_phrases_and_proximity_are_refused_naming_the_problem(query: str, problem: str) -> None:
    with pytest.raises(InvalidInput, match=problem.replace("(", r"\(").replace(")", r"\)")):
        parse_query(query)


def test_a_span_needs_positions_where_a_plain_clause_does_not() -> None:
    read = parse_query('"white house" OR senate')
    assert not read.is_plain
    with pytest.raises(ValueError, match="positions"):
        read.matches(analyse("white house"))
    assert read.matches(analyse("the senate"), term_positions("the senate"))
