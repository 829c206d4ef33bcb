from __future__ import annotations

import string
import unicodedata

import pytest
import regex
import Stemmer
from hypothesis import given
from hypothesis import strategies as st

from wordcast.query import analysis
from wordcast.query.analysis import (
    MAX_TOKEN_CHARS,
    STOP_WORDS,
    Analyser,
    analyse,
    entity_terms,
)

_STEMMER = Stemmer.Stemmer("porter")


def _reference_terms(text: str) -> frozenset[str]:
    """The pipeline of the module docstring, step by step, with no shortcut and no memory."""
    visible = regex.sub(r"\p{Default_Ignorable_Code_Point}", "", text)
    tokens = [
        part
        for raw in regex.findall(r"[\p{L}\p{M}\p{N}]+", visible)
        for part in regex.findall(
            r"[\p{L}\p{M}\p{N}]+", unicodedata.normalize("NFKC", raw).casefold()
        )
    ]
    kept = [t for t in tokens if 1 < len(t) <= MAX_TOKEN_CHARS and t not in STOP_WORDS]
    return frozenset(_STEMMER.stemWords(kept)) | frozenset(entity_terms(text))


def test_stemming_makes_inflections_meet() -> None:
    assert analyse("Running") == analyse("runs") == {"run"}
    assert analyse("White House") <= analyse("the white houses of Washington")


def test_stop_words_and_one_letter_tokens_are_dropped() -> None:
    assert analyse("The and of a I x") == frozenset()
    assert analyse("to be or not to be") == frozenset()


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
            {"http", "github", "com", "psf", "request", "tab", "readm", "usag", "has:links"}
            | {"url:https://github.com/psf/requests?tab=readme#usage"},
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
        # Symbols that decompose into letters do not glue them onto the word before them.
        ("Just Works™", {"just", "work"}),
        ("Acme® Service℠ 5㎏", {"acm", "servic"}),
        # Mathematical letters are still letters of the word.
        ("𝐋odash 𝖕𝖆𝖓𝖉𝖆𝖘", {"lodash", "panda"}),
        # Invisible code points do not split a word.
        ("hou\u200dse", {"hous"}),
        ("white\u200chouse soft\u00adware \ufeffbom", {"whitehous", "softwar", "bom"}),
    ],
)
def test_unicode_punctuation_urls_emoji(text: str, expected: set[str]) -> None:
    assert analyse(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("#Python rocks", {"#python", "has:hashtags"}),
        ("by @Guido_vR.", {"@guido_vr", "has:mentions"}),
        ("$AAPL and $TSLA up", {"$aapl", "$tsla", "has:cashtags"}),
        ("see HTTPS://Example.com/a?b=1).", {"url:https://example.com/a?b=1", "has:links"}),
        ("#hello_world #Straße #ca\u200dfé", {"#hello_world", "#strasse", "#café", "has:hashtags"}),
        # Inside a word, an address, an HTML entity or a number, a marker starts nothing.
        ("mail a@b.com &#39; #123 $100 $AAPL1 xhttp://a.b http:// ...", set()),
    ],
)
def test_entities_are_found_in_the_text(text: str, expected: set[str]) -> None:
    assert set(entity_terms(text)) == expected
    assert expected <= analyse(text)  # and the words still match as words
    assert analyse(text) - expected == _reference_terms(text) - expected


def test_terms_never_contain_whitespace_and_have_bounded_length() -> None:
    long_word = "x" * (MAX_TOKEN_CHARS + 1)
    assert analyse(f"{long_word} fine") == {"fine"}


@given(st.text(max_size=300))
def test_any_text_gives_clean_terms(text: str) -> None:
    analyser = Analyser()
    for token in analyser.tokens(text):
        assert token not in STOP_WORDS
        assert 1 < len(token) <= MAX_TOKEN_CHARS
    terms = analyser.terms(text)
    for term in terms:
        assert term
        assert not any(ch.isspace() for ch in term)
    assert Analyser().terms(text) == terms


@given(st.lists(st.sampled_from(["cat", "dogs", "running", "house", "über", "naïve"]), max_size=6))
def test_analysis_of_a_concatenation_is_the_union(words: list[str]) -> None:
    joined = " ".join(words)
    union: frozenset[str] = frozenset().union(*(analyse(w) for w in words))
    assert analyse(joined) == union


_ASCII_TEXT = st.text(alphabet=string.printable, max_size=300)
_WORDY_TEXT = st.lists(
    st.sampled_from(
        ["The", "RUNNING", "runs", "x", "Ünïcode", "ﬁle", "Straße", "v3.11", "a-b", "数据"]
    ),
    max_size=20,
).map(" ".join)


@given(st.one_of(st.text(max_size=300), _ASCII_TEXT, _WORDY_TEXT))
def test_terms_are_the_documented_pipeline(text: str) -> None:
    """The ASCII shortcut and the remembered terms change nothing: a fresh analyser, one that
    has seen the text before, and the shared one all agree with the plain pipeline."""
    expected = _reference_terms(text)
    analyser = Analyser()
    assert analyser.terms(text) == expected
    assert analyser.terms(text) == expected
    assert analyse(text) == expected


def test_remembered_terms_stay_bounded_and_correct(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analysis, "STEM_CACHE_WORDS", 50)
    analyser = Analyser()
    texts = [f"running{k} houses{k % 7} the cats" for k in range(200)]
    for text in texts + texts:
        assert analyser.terms(text) == _reference_terms(text)
        assert len(analyser._term_of) <= 50
