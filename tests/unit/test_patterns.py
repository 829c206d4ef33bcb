"""Wildcard pattern engines against Python's ``re``, plus REtriever's own worked examples."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wordcast.engines.ac_retriever import AhoCorasickREtriever
from wordcast.engines.compiled import CompiledPatterns
from wordcast.engines.naive_patterns import NaivePatterns
from wordcast.engines.nfa import NFAMatcher
from wordcast.engines.retriever import REtriever
from wordcast.errors import InvalidPattern
from wordcast.query.patterns import Gap, normalise, parse
from wordcast.routing.anchors import AnchorIndex

ENGINES: dict[str, Callable[[], Any]] = {
    "retriever-none": lambda: REtriever("none"),
    "retriever-none-paper": lambda: REtriever("none", recombination="paper"),
    "retriever-multiple-paper-recombination": lambda: REtriever(
        "multiple", min_word_len=1, min_split_score=0, recombination="paper"
    ),
    "retriever-single": lambda: REtriever("single", min_word_len=1, min_split_score=0),
    "retriever-multiple": lambda: REtriever("multiple", min_word_len=1, min_split_score=0),
    "retriever-multiple-paper": lambda: REtriever("multiple", min_word_len=2, min_split_score=2),
    "nfa": NFAMatcher,
    "naive": NaivePatterns,
    "aho-corasick": lambda: AhoCorasickREtriever(rebuild_after=3),
    "compiled": CompiledPatterns,
    # Rebuilt after every new keyword: the automaton, not the pending search, finds them.
    "compiled-eager": lambda: CompiledPatterns(rebuild_after=0),
}


@pytest.mark.parametrize("engine", ENGINES)
def test_the_papers_examples(engine: str) -> None:
    index = ENGINES[engine]()
    for pattern in ["aaa", "a?b", "b*b", "bb"]:
        index.add(pattern, parse(pattern, min_anchor=1))
    assert index.match("aabcbaaabc") == {"aaa", "a?b", "b*b"}

    index = ENGINES[engine]()
    for pattern in ["song?blue", "berry", "applepie", "blueberrypie", "pie*tea"]:
        index.add(pattern, parse(pattern))
    assert index.match("welikeapplepieandtea") == {"applepie", "pie*tea"}


def test_split_variants_follow_the_paper() -> None:
    # §3.1.3: with "blue…" and "berry" shared, multipleSplit cuts "blueberrypie" into three words.
    index = REtriever("multiple", min_word_len=2, min_split_score=2)
    for pattern in ["song?blue", "berry", "pie*tea"]:
        index.add(pattern, parse(pattern))
    assert index.words("blueberrypie") == ["blue", "berry", "pie"]
    single = REtriever("single", min_word_len=2, min_split_score=2)
    for pattern in ["song?blue", "berry", "pie*tea"]:
        single.add(pattern, parse(pattern))
    assert single.words("blueberrypie") in (["blue", "berrypie"], ["blueberry", "pie"])
    assert REtriever("none").words("blueberrypie") == ["blueberrypie"]
    # Splitting shares states: the split DFAs are smaller than the unsplit one.
    sizes = {}
    for split in ("none", "single", "multiple"):
        dfa = REtriever(split)  # type: ignore[arg-type]
        for pattern in ["song?blue", "berry", "pie*tea", "applepie", "blueberrypie"]:
            dfa.add(pattern, parse(pattern))
        sizes[split] = dfa.state_count()
    assert sizes["single"] < sizes["none"]
    assert sizes["multiple"] < sizes["none"]


@pytest.mark.parametrize("split", ["none", "single", "multiple"])
def test_delete_restores_exactly_the_previous_dfa(split: Any) -> None:
    index = REtriever(split, min_word_len=2, min_split_score=0)
    for pattern in ["song?blue", "berry", "pie*tea", "blueberry?jam"]:
        index.add(pattern, parse(pattern))
    before = index.structure()
    for pattern in ["applepie", "blueberrypie", "berry*song", "song?blue*pie"]:
        index.add(("new", pattern), parse(pattern))
    assert index.structure() != before
    for pattern in ["applepie", "blueberrypie", "berry*song", "song?blue*pie"]:
        assert index.remove(("new", pattern))
    assert index.structure() == before
    assert not index.remove(("new", "applepie"))


def test_parse_syntax_and_normalisation() -> None:
    pattern = parse(r"Song?  BLUE*\*x\?\\")
    assert pattern.phrases == ("song", " blue", "*x?\\")
    assert pattern.gaps == (Gap(0, False), Gap(1, False), Gap(0, True), Gap(0, False))
    assert pattern.anchor == " blue"
    assert parse("ab?cde").anchor == "cde"
    assert parse("Straße*x").phrases == ("strasse", "x")
    assert normalise("A\t\n b  C") == "a b c"


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("", "empty"),
        ("ab?cd", "at least 3"),
        ("*?*", "no literal"),
        ("abc\\", "lone backslash"),
        ("abc\\d", "unknown escape"),
        ("x" * 300, "limit is 256"),
        ("?".join(["abc"] * 20), "literal runs"),
    ],
)
def test_parse_refuses_what_cannot_be_routed(source: str, problem: str) -> None:
    with pytest.raises(InvalidPattern, match=problem):
        parse(source)


def test_anchor_index_finds_owners_of_occurring_anchors() -> None:
    index = AnchorIndex(rebuild_after=2)
    for n, anchor in enumerate(["blue", "berry", "pie", "tea", "coffee", "jam"]):
        index.add(anchor, n % 3)
    index.add("pie", 2)
    assert index.targets("blueberry pie") == {0, 1, 2}
    assert index.targets("green tea") == {0}
    index.discard("tea", 0)
    assert index.targets("green tea") == set()
    index.add("green", 1)  # found before the next rebuild
    assert index.targets("green tea") == {1}
    assert index.targets("nothing here") == set()


def test_anchor_index_leaves_out_owners_beyond_the_matchers_asked_for() -> None:
    """After a shrink, owners on removed matchers linger until their events arrive."""
    index = AnchorIndex()
    index.add("tea", 0)
    index.add("tea", 2)
    index.add("jam", 3)
    assert index.targets("tea and jam") == {0, 2, 3}
    assert index.targets("tea and jam", 3) == {0, 2}
    assert index.targets("tea and jam", 1) == {0}
    assert index.targets("jam", 2) == set()


# -- property tests: every engine agrees with re ----------------------------------------------------

LITERALS = ["a", "b", "é", "Ж", " ", "?", "*", "\\"]
TOKEN = st.one_of(st.sampled_from(LITERALS), st.sampled_from(["OP?", "OP*"]))


def _source_and_regex(tokens: list[str]) -> tuple[str, str]:
    """Pattern text (with escapes) and an independent regex for the same language."""
    source, regex, run = [], [], []

    def flush() -> None:
        if run:
            regex.append(re.escape(normalise("".join(run))))
            run.clear()

    for token in tokens:
        if token == "OP?":
            flush()
            source.append("?")
            regex.append(".")
        elif token == "OP*":
            flush()
            source.append("*")
            regex.append(".*")
        else:
            source.append("\\" + token if token in "?*\\" else token)
            run.append(token)
    flush()
    return "".join(source), "".join(regex)


patterns_strategy = st.lists(TOKEN, min_size=1, max_size=8).filter(
    lambda tokens: any(not t.startswith("OP") for t in tokens)
)
texts_strategy = st.text(alphabet="abéжЖ ?*\\c", max_size=30).map(normalise)


@settings(max_examples=150, deadline=None)
@given(st.lists(patterns_strategy, min_size=1, max_size=12), st.lists(texts_strategy, max_size=8))
def test_every_engine_agrees_with_re(pattern_tokens: list[list[str]], texts: list[str]) -> None:
    compiled = [_source_and_regex(tokens) for tokens in pattern_tokens]
    indexes = {name: make() for name, make in ENGINES.items()}
    for index in indexes.values():
        for sub_id, (source, _) in enumerate(compiled):
            index.add(sub_id, parse(source, min_anchor=1))
    removed = set(range(0, len(compiled), 3))
    for index in indexes.values():
        for sub_id in removed:
            assert index.remove(sub_id)
    for text in texts:
        expected = {
            sub_id
            for sub_id, (_, regex) in enumerate(compiled)
            if sub_id not in removed and re.search(regex, text, re.DOTALL)
        }
        for name, index in indexes.items():
            assert index.match(text) == expected, (name, text, [c[0] for c in compiled])
