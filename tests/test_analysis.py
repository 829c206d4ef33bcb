from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wordcast.analysis import MAX_TOKEN_CHARS, STOP_WORDS, Analyzer, analyze


def test_stemming_makes_inflections_meet() -> None:
    assert analyze("Running") == analyze("runs") == {"run"}
    assert analyze("White House") <= analyze("the white houses of Washington")


def test_stop_words_and_one_letter_tokens_are_dropped() -> None:
    assert analyze("The and of a I x") == frozenset()
    assert analyze("to be or not to be") == frozenset()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", set()),
        ("   \n\t ", set()),
        ("!!! ... ??? --- ***", set()),
        ("😀🎉🔥 👍🏽", set()),
        ("Python 🐍 rocks", {"python", "rock"}),
        ("numpy,pandas;scipy/matplotlib", {"numpi", "panda", "scipi", "matplotlib"}),
        (
            "https://github.com/psf/requests?tab=readme#usage",
            {"http", "github", "com", "psf", "request", "tab", "readm", "usag"},
        ),
        ("snake_case and kebab-case", {"snake", "case", "kebab"}),
        ("Straße", {"strass"}),
        ("ＦＵＬＬ ｗｉｄｔｈ", {"full", "width"}),
        ("ﬁnance", {"financ"}),
        ("Café naïve", {"café", "naïv"}),
        ("Москва столица", {"москва", "столица"}),
        ("हिन्दी भाषा", {"हिन्दी", "भाषा"}),
        ("数据 分析", {"数据", "分析"}),
        ("version 3.11 released", {"version", "11", "releas"}),
    ],
)
def test_unicode_punctuation_urls_emoji(text: str, expected: set[str]) -> None:
    assert analyze(text) == expected


def test_terms_never_contain_whitespace_and_have_bounded_length() -> None:
    long_word = "x" * (MAX_TOKEN_CHARS + 1)
    assert analyze(f"{long_word} fine") == {"fine"}


@given(st.text(max_size=300))
def test_any_text_gives_clean_terms(text: str) -> None:
    analyzer = Analyzer()
    for token in analyzer.tokens(text):
        assert token not in STOP_WORDS
        assert 1 < len(token) <= MAX_TOKEN_CHARS
    terms = analyzer.terms(text)
    for term in terms:
        assert term and not any(ch.isspace() for ch in term)
    assert Analyzer().terms(text) == terms


@given(st.lists(st.sampled_from(["cat", "dogs", "running", "house", "über", "naïve"]), max_size=6))
def test_analysis_of_a_concatenation_is_the_union(words: list[str]) -> None:
    joined = " ".join(words)
    union: frozenset[str] = frozenset().union(*(analyze(w) for w in words))
    assert analyze(joined) == union
