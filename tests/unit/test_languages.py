"""Languages (wordcast.query.languages): detection, analysis in a publication's own language
beside English, queries analysed in the language they name, and the refusals."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wordcast import _core
from wordcast.corpus.files import debian_documents
from wordcast.corpus.workload import sample_posts
from wordcast.errors import InvalidInput
from wordcast.query.analysis import Analyser, analyse, compiled_analyser, default_analyser
from wordcast.query.boolean import parse_query
from wordcast.query.explain import AnalysedText, explain_clause
from wordcast.query.languages import (
    CODES,
    Detector,
    analyse_in_languages,
    analyser_for,
    canonical,
    check_code,
    model_path,
)
from wordcast.testing.languages import FastTextReference


def test_clear_sentences_are_detected() -> None:
    texts = [
        "Eine Bibliothek zum Lesen und Schreiben von Dateien",
        "Une bibliothèque pour lire et écrire des fichiers",
        "Una biblioteca para leer y escribir archivos",
        "A library to read and write files",
        "Библиотека для чтения и записи файлов",
        "",
    ]
    assert Detector.detect_many(texts) == ["de", "fr", "es", "en", "ru", "en"]


# Texts where fastText's reading of a line has corners: its end-of-line word inside the text,
# a label-like word, NUL and the separators Python splits on and fastText does not.
CORNERS = [
    "a</s> b",
    "</s>",
    "__label__de Hallo Welt",
    "x\0y z",
    "\x1c\x1d Bibliothek\x1fund",
    "\u00a0\u2003Библиотека\u3000для",
    "ﬁle ǅ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🙂🙃",
    "\t\n\r",
]


def test_the_compiled_detector_names_the_language_fasttext_names_on_the_corpora() -> None:
    texts = [post.text for post in sample_posts(4000, seed=11)]
    texts += [text for _, text in itertools.islice(debian_documents(), 1500)]
    texts += CORNERS
    assert Detector.detect_many(texts) == FastTextReference.detect_many(texts)


SCRIPTS = st.sampled_from(
    [
        "abcdefghijklmnopqrstuvwxyzäöüßéèêàçñ",
        "абвгдежзийклмнопрстуфхцчшщыьэюя",
        "αβγδεζηθικλμνξοπρστυφχψω",
        "的一是不了人我在有他这中大来上个国",
        "あいうえおかきくけこさしすせそアイウエオ",
        "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
        "אבגדהוזחטיכלמנסעפצקרשת",
        " \t\n\x00\x1c\xa0\u2003.,!?-'\"0123456789<>/_",
    ]
)


@st.composite
def mixed_texts(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(st.tuples(SCRIPTS, st.integers(1, 12)), max_size=8))
    return "".join(draw(st.text(alphabet, min_size=n, max_size=n)) for alphabet, n in pieces)


@settings(max_examples=300, deadline=None)
@given(st.lists(mixed_texts(), min_size=1, max_size=20))
def test_the_compiled_detector_names_the_language_fasttext_names_on_any_text(
    texts: list[str],
) -> None:
    assert Detector.detect_many(texts) == FastTextReference.detect_many(texts)


def test_a_file_that_is_no_model_is_refused_naming_the_problem(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="cannot read"):
        _core.LanguageDetector(tmp_path / "missing.ftz")
    broken = tmp_path / "broken.ftz"
    broken.write_bytes(model_path().read_bytes()[:100_000])
    with pytest.raises(
        _core.ModelError, match="not a fastText language model: the model file ends"
    ):
        _core.LanguageDetector(broken)
    assert len(_core.LanguageDetector(model_path()).labels) == len(CODES)


def test_a_language_is_analysed_with_its_stop_words_and_stemmer_and_marked() -> None:
    assert analyser_for("de").terms("Die Bibliotheken und die Häuser") == {
        "bibliothek@de",
        "haus@de",
    }
    assert analyser_for("fr").terms("les maisons") == {"maison@fr"}


def test_a_publication_keeps_its_english_terms_and_adds_its_own_languages() -> None:
    texts = ["Die Bibliotheken", "The libraries", "ライブラリ"]
    english = default_analyser().term_tuples(texts)
    terms, codes = analyse_in_languages(texts, [None, "de", None], detect=True)
    assert codes == ["de", "de", "ja"]  # a given language wins over detection
    assert set(terms[0]) == set(english[0]) | {"bibliothek@de"}
    assert set(terms[1]) == set(english[1]) | {"the@de", "librari@de"}  # "the": not German
    assert terms[2] == english[2]  # no Snowball stemmer: English analysis only
    assert analyse_in_languages(texts, [None] * 3, detect=False) == (
        list(english),
        [None, None, None],
    )


def test_a_query_is_analysed_in_the_language_it_names() -> None:
    assert [str(c) for c in parse_query("Bibliotheken lang:de").clauses] == [
        "bibliothek@de lang:de"
    ]
    assert parse_query("Bibliotheken").clauses[0].words == tuple(analyse("Bibliotheken"))
    assert [str(c) for c in parse_query("apple -lang:de").clauses] == ["appl -lang:de"]
    assert parse_query("データ lang:ja").clauses[0].words == ("データ",)  # no stemmer: as before


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("Haus lang:de OR house lang:en", "names 2 languages (de, en)"),
        ("house lang:zz", "unknown language 'zz'"),
        ("lang:de", "requires no word"),
    ],
)
def test_bad_language_filters_are_refused_naming_the_problem(query: str, problem: str) -> None:
    with pytest.raises(InvalidInput, match=problem.replace("(", r"\(").replace(")", r"\)")):
        parse_query(query)


def test_codes_are_the_models_and_aliases_are_read() -> None:
    assert len(CODES) == 176
    assert canonical("pt_BR") == "pt"
    assert check_code("NB") == "no"
    with pytest.raises(ValueError, match="unknown language"):
        check_code("klingon")


def test_explanations_point_at_terms_of_the_publications_language() -> None:
    text = "Die Bibliotheken von Python"
    clause = parse_query("Bibliothek Python lang:de").clauses[0]
    matched = explain_clause(clause, AnalysedText(text, "de"), 0)
    assert matched["terms"] == {"bibliothek@de": [(4, 16)], "python@de": [(21, 27)]}
    assert matched["filters"] == ["lang:de"]


@pytest.mark.parametrize("compiled", [True, False])
def test_a_text_in_another_language_is_read_once_for_both_its_analyses(
    compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its own language's terms come from the tokens its English analysis read, and are the
    terms that language's analyser reads from the text (a text the tables cannot vouch for
    is read by the reference, in both)."""
    texts = [
        "Die Bibliotheken und die Häuser der Straße",
        "Les maisons de la bibliothèque numérique",
        "Библиотеки и дома",
        "Οι βιβλιοθήκες του σπιτιού",
        "İstanbul'daki kütüphaneler ve EVLER",
        "Bücher a\u0558b",  # a code point the compiled tables do not know
        "The libraries",
    ]
    codes: list[str | None] = ["de", "fr", "ru", "el", "tr", "de", None]
    expected = []
    for text, code in zip(texts, codes, strict=True):
        both = set(Analyser().terms(text))
        expected.append(both | analyser_for(code).terms(text) if code else both)
    analyser = compiled_analyser() if compiled else Analyser()
    read_whole: list[str] = []
    terms_of_text = Analyser.terms

    def counted(self: Analyser, text: str) -> frozenset[str]:
        read_whole.append(text)
        return terms_of_text(self, text)

    monkeypatch.setattr(Analyser, "terms", counted)
    terms, found = analyse_in_languages(texts, codes, detect=False, analyser=analyser)
    assert found == codes
    if compiled:  # the analyser given read them (a fresh one, which remembers no word, is falsy)
        assert len(analyser) > 0
    assert [set(read) for read in terms] == expected
    assert all(len(read) == len(set(read)) for read in terms)
    # No text read again for its own language, but the one the reference reads anyway.
    assert read_whole == (["Bücher a\u0558b"] if compiled else [])
