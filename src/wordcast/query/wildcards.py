"""Wildcards inside queries (issue 53): Lucene's ``hous*``, ``te?t`` and ``*ing``, each on one word.

A wildcard word holds where some normalised token of the publication (case-folded, not stemmed,
stop words included: :func:`wordcast.query.analysis.normalised_tokens`) is an instantiation of
it: ``*`` stands for any run of characters, ``?`` for exactly one. In a query it is a term like
any other, written as normalised (``Hous*`` is the term ``hous*``), which no analysed term can be
(a term is letters, marks and digits). So it is stored, placed (LASP) and routed like a word:
routers and matchers add to each publication's terms the wildcard terms they hold that one of its
tokens instantiates (:func:`held_wildcards`), and from there a wildcard is matched, required or
excluded, as a word is.

Limits, as Lucene's (which refuses a leading wildcard unless told otherwise): a wildcard word
needs at least ``MIN_WILDCARD_LITERAL`` characters before its first wildcard (its *prefix*) or
after its last (its *suffix*), which is what :func:`held_wildcards` finds it by; a bare ``*``
or a one-letter prefix is refused. Its characters are letters, marks, digits and wildcards: a
wildcard applies to one word.

Pure: imports only the errors and the analysis module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import regex

from wordcast.errors import InvalidInput
from wordcast.query.analysis import MAX_TOKEN_CHARS, normalised_tokens

if TYPE_CHECKING:
    from wordcast._core import WildcardTerms

MIN_WILDCARD_LITERAL = 2
WILDCARDS = "*?"
_LITERAL = regex.compile(r"[\p{L}\p{M}\p{N}]+")


def is_wildcard(term: str) -> bool:
    """Whether a term is a wildcard word's (an analysed term holds neither ``*`` nor ``?``)."""
    return "*" in term or "?" in term


def read_wildcard(word: str, query: str) -> str:
    """The term of a wildcard word as written in ``query``; raises InvalidInput naming the
    limit it breaks."""
    pieces = re.split(r"([*?])", word)
    literal = [piece for piece in pieces[::2] if piece]
    if not literal:
        raise InvalidInput(
            f"query {query!r}: {word!r} is only wildcards, which would match every word: a "
            f"wildcard needs at least {MIN_WILDCARD_LITERAL} letters before or after it"
        )
    normalised = []
    for piece in pieces:
        if piece in ("*", "?") or not piece:
            normalised.append(piece)
            continue
        tokens = normalised_tokens(piece)
        if not _LITERAL.fullmatch(piece) or len(tokens) != 1:
            raise InvalidInput(
                f"query {query!r}: {word!r}: a wildcard applies to one word, of letters and "
                "digits (write each word of a phrase apart)"
            )
        normalised.append(tokens[0])
    term = re.sub(r"\*+", "*", "".join(normalised))
    prefix, suffix = prefix_of(term), suffix_of(term)
    if len(prefix) < MIN_WILDCARD_LITERAL and len(suffix) < MIN_WILDCARD_LITERAL:
        raise InvalidInput(
            f"query {query!r}: {word!r} needs at least {MIN_WILDCARD_LITERAL} letters before its "
            f"first wildcard or after its last (a one-letter prefix would match too many words)"
        )
    if len(term) > MAX_TOKEN_CHARS:
        raise InvalidInput(f"query {query!r}: {word!r} is longer than {MAX_TOKEN_CHARS} characters")
    return term


def prefix_of(term: str) -> str:
    """A wildcard term's characters before its first wildcard."""
    return re.split(r"[*?]", term, maxsplit=1)[0]


def suffix_of(term: str) -> str:
    """A wildcard term's characters after its last wildcard."""
    return re.split(r"[*?]", term)[-1]


def wildcard_regex(term: str) -> re.Pattern[str]:
    """The tokens a wildcard term holds on, as a regular expression (``fullmatch``)."""
    return re.compile(
        "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in term)
    )


def held_wildcards(terms: Iterable[str] = ()) -> WildcardTerms:
    """An index of held wildcard words, compiled (``wordcast._core.WildcardTerms``: each word
    filed under its prefix, else its suffix, so a token looks up only its own prefixes and
    suffixes; the reference it is held to is
    :class:`wordcast.testing.queries.ReferenceWildcardTerms`)."""
    from wordcast import _core

    return _core.WildcardTerms(list(terms))


def found_in_texts(held: WildcardTerms, texts: Sequence[str]) -> list[list[str]]:
    """The words ``held`` that a normalised token of each text instantiates (a text the
    compiled tables cannot vouch for tokenised by the reference analyser)."""
    found = held.found_in_texts(list(texts))
    return [
        held.found(normalised_tokens(text)) if words is None else words
        for words, text in zip(found, texts, strict=True)
    ]
