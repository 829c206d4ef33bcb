"""Why a publication matched: the ``matched`` object each delivered match carries (issue 13).

For a boolean query it names the alternative that delivered (its place in the query's
disjunctive normal form, :mod:`.boolean`, and that alternative written in analysed terms), every
occurrence in the text of each term the alternative requires, and each place its phrases and
proximity windows (:mod:`.spans`) hold; for a plain conjunction of keywords, which is its own only
alternative, the terms' occurrences alone. For a wildcard pattern it gives the first
instantiation of the pattern in the text. Excluded terms are not listed: they are absent.

Offsets are ``[start, end)`` in Unicode code points of the publication's text as published (as
X's filtered stream counts its entity indices), so ``text[start:end]`` is the highlighted part;
a JavaScript client, which counts UTF-16 units, converts them for text outside the Basic
Multilingual Plane. A term's occurrence is the token it was analysed from
(:func:`wordcast.query.analysis.token_offsets`); a span's runs from its first token to its last.

Pure: imports only the query package.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from wordcast.query.analysis import (
    compiled_analyser,
    reference_asked,
    terms_of_tokens,
    token_offsets,
)
from wordcast.query.boolean import Clause
from wordcast.query.languages import ENGLISH, SNOWBALL, analyser_for
from wordcast.query.patterns import normalise, parse

if TYPE_CHECKING:
    from wordcast._core import TextReading


class AnalysedText:
    """Where each term of a publication occurs (token positions, and offsets in its text),
    worked out once however many of its matches are explained."""

    __slots__ = ("_spans", "positions", "term_offsets", "text")

    def __init__(self, text: str, language: str | None = None) -> None:
        self.text = text
        tokens = token_offsets(text)
        self._spans = spans = [(start, end) for _, start, end in tokens]
        positions: dict[str, list[int]] = {}
        # Each term's occurrences as [start, end) offsets: one list a term, shared by every
        # match that names it.
        offsets: dict[str, list[tuple[int, int]]] = {}
        for position, term in enumerate(terms_of_tokens([token for token, _, _ in tokens])):
            if term:
                where = positions.get(term)
                if where is None:
                    positions[term] = [position]
                    offsets[term] = [spans[position]]
                else:
                    where.append(position)
                    offsets[term].append(spans[position])
        self.positions = positions
        self.term_offsets = offsets
        if language is not None and language != ENGLISH and language in SNOWBALL:
            term_of = analyser_for(language).term_of  # its marked terms (bibliothek@de)
            for token, start, end in tokens:
                term = term_of(token)
                if term:
                    offsets.setdefault(term, []).append((start, end))

    @classmethod
    def of(
        cls, text: str, positions: dict[str, list[int]], spans: list[tuple[int, int]]
    ) -> AnalysedText:
        """The text as a reading of it found it (its terms' positions and its tokens' places,
        :func:`compiled_readings`): an English text, not read again."""
        analysed = cls.__new__(cls)
        analysed.text = text
        analysed._spans = spans
        analysed.positions = positions
        analysed.term_offsets = {
            term: [spans[at] for at in where] for term, where in positions.items()
        }
        return analysed

    @property
    def token_spans(self) -> list[tuple[int, int]]:
        """The [start, end) in the text of each normalised token, by position."""
        return self._spans

    def offsets(self, first: int, last: int) -> tuple[int, int]:
        """The text's offsets from the token at position ``first`` to the one at ``last``."""
        return self._spans[first][0], self._spans[last][1]


_compiled: Any = None  # the compiled analyser that reads offsets, made at first use


def offsets_analyser() -> Any:
    """The process's compiled analyser for reading offsets (one, so that its words are stemmed
    and remembered once), or None when ``WORDCAST_ANALYSER=python`` asks for the reference."""
    global _compiled
    if reference_asked():
        return None
    if _compiled is None:
        _compiled = compiled_analyser()
    return _compiled


def compiled_readings(texts: Sequence[str]) -> list[TextReading | None]:
    """Each English text read once by the compiled analyser (``wordcast._core.TextReading``:
    its terms' JSON members of a ``matched``, as :attr:`AnalysedText.term_offsets`, their
    positions, as :attr:`AnalysedText.positions`, and its tokens' places, as
    :attr:`AnalysedText.token_spans`, each made when asked), many at once; None for a text it
    leaves to :class:`AnalysedText` (one holding a code point its tables do not know), and for
    every text when ``WORDCAST_ANALYSER=python`` asks for the reference."""
    analyser = offsets_analyser()
    if analyser is None:
        return [None] * len(texts)
    found: list[TextReading | None] = analyser.readings_many(texts)
    return found


def explain_terms(words: Iterable[str], text: AnalysedText) -> dict[str, Any]:
    """``matched`` for a plain conjunction of keywords: the query is its only alternative."""
    offsets = text.term_offsets
    return {"terms": {term: offsets.get(term, []) for term in words}}


def explain_clause(
    clause: Clause, text: AnalysedText, alternative: int, written: str | None = None
) -> dict[str, Any]:
    """``matched`` for a match of alternative number ``alternative`` of a boolean query
    (``written``: the clause as text, when the caller keeps it)."""
    offsets = text.term_offsets
    matched: dict[str, Any] = {
        "alternative": alternative,
        "clause": str(clause) if written is None else written,
        "terms": {term: offsets.get(term, []) for term in clause.words},
    }
    if clause.filters or clause.conditions:
        matched["filters"] = [*clause.filters, *map(str, clause.conditions)]
    if clause.spans:
        positions = text.positions
        matched["spans"] = {
            str(span): [text.offsets(first, last) for first, last in span.occurrences(positions)]
            for span in clause.spans
        }
    return matched


@lru_cache(maxsize=4096)
def _pattern_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(parse(pattern, min_anchor=1).regex(), re.DOTALL)


def explain_pattern(pattern: str, text: str, normalised: str | None = None) -> dict[str, Any]:
    """``matched`` for a match of a wildcard pattern: where its first instantiation lies
    (``normalised``: the text as patterns match it, when the caller has it already)."""
    normalised, origin = _normalised_with_origin(text, normalised)
    found = _pattern_regex(pattern).search(normalised)
    if found is None:  # the pattern index matched it: only a changed normalisation gets here
        return {"pattern": pattern, "offsets": []}
    start, end = found.span()
    if end == start:
        return {"pattern": pattern, "offsets": [[origin[start], origin[start]]]}
    return {"pattern": pattern, "offsets": [[origin[start], origin[end - 1] + 1]]}


def _normalised_with_origin(text: str, normalised: str | None = None) -> tuple[str, list[int]]:
    """:func:`~wordcast.query.patterns.normalise` of ``text`` (given, or worked out), and for
    each of its characters the offset in ``text`` of the character it came from (with one past
    the end appended)."""
    if normalised is None:
        normalised = normalise(text)
    if len(normalised) == len(text) and text.isascii():  # nothing folded or collapsed
        return normalised, list(range(len(text) + 1))
    chars: list[str] = []
    origin: list[int] = []
    in_space = False
    for at, char in enumerate(text):
        if char.isspace():
            if not in_space:
                chars.append(" ")
                origin.append(at)
            in_space = True
            continue
        in_space = False
        folded = char.casefold()
        chars.append(folded)
        origin += [at] * len(folded)
    origin.append(len(text))
    return "".join(chars), origin
