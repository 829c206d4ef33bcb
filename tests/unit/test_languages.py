"""Languages (wordcast.query.languages): detection, analysis in a publication's own language
beside English, queries analysed in the language they name, and the refusals."""

from __future__ import annotations

import pytest

from wordcast.errors import InvalidInput
from wordcast.query.analysis import analyse, default_analyser
from wordcast.query.boolean import parse_query
from wordcast.query.explain import AnalysedText, explain_clause
from wordcast.query.languages import (
    CODES,
    Detector,
    analyse_in_languages,
    analyser_for,
    canonical,
    check_code,
)


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


def test_a_language_is_analysed_with_its_stop_words_and_stemmer_and_marked() -> None:
    assert analyser_for("de").terms("Die Bibliotheken und die Häuser") == {
        "bibliothek@de",
        "haus@de",
    }
    assert analyser_for("fr").terms("les maisons") == {"maison@fr"}


def test_a_publication_keeps_its_english_terms_and_adds_its_own_languages() -> None:
    texts = ["Die Bibliotheken", "The libraries", "ライブラリ"]
    english = default_analyser().term_tuples(texts)
    terms, codes = analyse_in_languages(texts, english, [None, "de", None], detect=True)
    assert codes == ["de", "de", "ja"]  # a given language wins over detection
    assert set(terms[0]) == set(english[0]) | {"bibliothek@de"}
    assert set(terms[1]) == set(english[1]) | {"the@de", "librari@de"}  # "the": not German
    assert terms[2] == english[2]  # no Snowball stemmer: English analysis only
    assert analyse_in_languages(texts, english, [None] * 3, detect=False) == (
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
