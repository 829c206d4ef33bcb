"""Boolean queries: the rewriting into alternatives agrees with the query's tree on every term set,
and exactly one alternative delivers for a matching publication."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wordcast.errors import EmptyQuery, InvalidInput
from wordcast.query.alternatives import HeldAlternatives
from wordcast.query.analysis import analyse
from wordcast.query.boolean import (
    MAX_ALTERNATIVES,
    And,
    BooleanQuery,
    Clause,
    InvalidQuery,
    Node,
    Not,
    Or,
    Word,
    evaluate,
    parse_query,
    parse_tree,
    part_id,
    split_part_id,
)

# "ice-cream" is one written word of two terms: excluding it excludes only posts with both.
WORDS = ["apple", "berry", "cherry", "dates", "cream", "ice-cream"]
TERMS = sorted({term for word in WORDS for term in analyse(word)})
WRITTEN = {analyse(word): word for word in WORDS}


def _render(node: Node, dash: bool) -> str:
    """Query text for a tree, negations written as NOT or as a leading '-'."""
    if isinstance(node, Word):
        return WRITTEN[node.terms]
    if isinstance(node, Not):
        inner = _render(node.child, dash)
        if dash:
            return f"-{inner}" if isinstance(node.child, Word) else f"-({inner})"
        return f"NOT ({inner})"
    joiner = " OR " if isinstance(node, Or) else " AND " if dash else " "
    return "(" + joiner.join(_render(child, dash) for child in node.children) + ")"


trees = st.recursive(
    st.sampled_from(WORDS).map(lambda w: Word(analyse(w))),
    lambda children: st.one_of(
        st.lists(children, min_size=2, max_size=3).map(lambda c: And(tuple(c))),
        st.lists(children, min_size=2, max_size=3).map(lambda c: Or(tuple(c))),
        children.map(Not),
    ),
    max_leaves=7,
)


@settings(max_examples=400, deadline=None)
@given(trees, st.booleans(), st.lists(st.sets(st.sampled_from(TERMS)), min_size=8, max_size=8))
def test_alternatives_agree_with_the_tree_and_exactly_one_delivers(
    tree: Node, dash: bool, samples: list[set[str]]
) -> None:
    text = _render(tree, dash)
    try:
        query = parse_query(text)
    except InvalidQuery as exc:
        refused = str(exc)
    else:
        refused = ""
    if refused:
        # Refused only for the documented reasons: an alternative without a required word,
        # too many alternatives, or a query that can never match.
        assert any(s in refused for s in ("requires no word", "alternatives", "never match"))
        return
    assert parse_tree(text) == tree or all(
        evaluate(parse_tree(text), s) == evaluate(tree, s) for s in samples
    )
    for terms in samples:
        expected = evaluate(tree, terms)
        assert query.matches(terms) == expected, (text, terms, query)
        delivering = _delivering(query, frozenset(terms))
        assert len(delivering) == (1 if expected else 0), (text, terms, query)


def _delivering(query: BooleanQuery, terms: frozenset[str]) -> list[int]:
    """The alternatives a matcher lets deliver for a publication: its index finds every
    alternative whose required words occur, then HeldAlternatives keeps what stands."""
    held = HeldAlternatives()
    if not query.is_plain:
        for k in range(len(query.clauses)):
            held.add(part_id("q", k), query)
    found = [(part_id("q", k), 0) for k, c in enumerate(query.clauses) if set(c.words) <= terms]
    return [split_part_id(i)[1] for i, _ in held.delivering(found, lambda _: terms)]


def test_plain_queries_stay_plain_conjunctions() -> None:
    for text in ["white house", "smile :) at the camera", "covid-19 cases", "AND-gate"]:
        query = parse_query(text)
        assert query.is_plain
        assert set(query.clauses[0].words) == analyse(text)


def test_the_documented_examples() -> None:
    assert parse_query("obama OR biden").clauses == (Clause(("biden",)), Clause(("obama",)))
    assert parse_query("(white OR black) house").clauses == (
        Clause(("black", "hous")),
        Clause(("hous", "white")),
    )
    assert parse_query("senate -house") == parse_query("senate NOT house")
    assert parse_query("senate -house").clauses == (Clause(("senat",), ("hous",)),)
    # NOT (red blue) apple: apple without red, or apple without blue.
    assert parse_query("NOT (red blue) apple").clauses == (
        Clause(("appl",), ("blue",)),
        Clause(("appl",), ("red",)),
    )
    # Excluding a word of two terms excludes the posts that have both.
    assert parse_query("apple -ice-cream").matches(analyse("apple cream"))
    assert not parse_query("apple -ice-cream").matches(analyse("apple ice cream"))
    # Implied alternatives go: apple OR (apple berry) is apple.
    assert parse_query("apple OR (apple berry)").is_plain


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("NOT apple", "requires no word"),
        ("-apple -berry", "requires no word"),
        ("apple OR", "both sides"),
        ("OR apple", "both sides"),
        ("the OR apple", "both sides"),
        ("(apple OR berry", "without its ')'"),
        ("apple OR berry)", "unmatched ')'"),
        ("apple NOT", "NOT needs"),
        ("apple -the", "excludes nothing"),
        ("apple -(the)", "excludes nothing"),
        ("apple -apple", "never match"),
        (" ".join(f"(a{k} OR b{k})" for k in range(5)) + " OR xy", "alternatives"),
        ("(" * 33 + "apple OR berry" + ")" * 33, "nested more than 32"),
        ("NOT " * 33 + "apple berry", "nested more than 32"),
    ],
)
def test_bad_queries_are_refused_naming_the_problem(text: str, problem: str) -> None:
    with pytest.raises(InvalidQuery, match=re.escape(problem)):
        parse_query(text)


def test_a_query_of_stop_words_is_empty_whatever_its_operators() -> None:
    with pytest.raises(EmptyQuery):
        parse_query("the AND of")
    with pytest.raises(EmptyQuery):
        parse_query("(the)")


def test_sixteen_alternatives_and_32_levels_are_allowed() -> None:
    text = " ".join(f"(a{k} OR b{k})" for k in range(4))
    assert len(parse_query(text).clauses) == MAX_ALTERNATIVES
    assert len(parse_query("(" * 32 + "apple OR berry" + ")" * 32).clauses) == 2
    siblings = "(" * 32 + "apple" + ")" * 32 + " AND " + "(" * 32 + "berry" + ")" * 32
    assert parse_query(siblings).is_plain  # depth, not the count of parentheses


def test_part_ids_round_trip() -> None:
    assert part_id("abc", 0) == "abc"
    assert split_part_id(part_id("abc", 3)) == ("abc", 3)
    assert split_part_id("abc") == ("abc", 0)


def test_held_alternatives_keep_one_match_per_query_and_name_it() -> None:
    held = HeldAlternatives()
    queries = {
        "q": parse_query("apple OR berry OR (cherry -dates)"),
        "r": parse_query("apple -figs"),
    }
    for sub_id, query in queries.items():
        for k in range(len(query.clauses)):
            held.add(part_id(sub_id, k), query)
    posts = [analyse(t) for t in ["apple berry cherry", "cherry dates", "cherry", "figs apple"]]
    # What a trie over the required words would find: every alternative whose words occur.
    found = [
        (part_id(sub_id, k), position)
        for position, terms in enumerate(posts)
        for sub_id, query in queries.items()
        for k, clause in enumerate(query.clauses)
        if set(clause.words) <= terms
    ]
    kept = held.delivering(found, posts.__getitem__)
    assert sorted((held.subscription_id(i), p) for i, p in kept) == [
        ("q", 0),
        ("q", 2),
        ("q", 3),
        ("r", 0),
    ]
    held.discard(part_id("q", 1))
    assert part_id("q", 1) not in held
    assert len(held) == len(queries["q"].clauses)
    assert held.subscription_id("plain") == "plain"
    with pytest.raises(ValueError, match="not an alternative"):
        held.add("x", parse_query("apple berry"))


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.sampled_from(["(", ")", "-(", "-", "OR", "AND", "NOT", "apple", "-berry", "the", ":)"]),
        max_size=20,
    ).map(" ".join)
    | st.text(alphabet="()- ORANDTapl", max_size=40)
)
def test_any_text_is_parsed_or_refused_as_bad_input(text: str) -> None:
    """Whatever is sent, the answer is alternatives or InvalidInput (a 422), never a crash."""
    try:
        query = parse_query(text)
    except InvalidInput:
        return
    assert query.clauses
    assert all(clause.words for clause in query.clauses)
