"""Wildcards inside queries (issue 53): Lucene's ``hous*``, ``te?t`` and ``*ing``, each on one word.

A wildcard word holds where some normalised token of the publication (case-folded, not stemmed,
stop words included: :func:`wordcast.query.analysis.normalised_tokens`) is an instantiation of
it: ``*`` stands for any run of characters, ``?`` for exactly one. In a query it is a term like
any other, written as normalised (``Hous*`` is the term ``hous*``), which no analysed term can be
(a term is letters, marks and digits). So it is stored, placed (LASP) and routed like a word:
routers and matchers add to each publication's terms the wildcard terms they hold that one of its
tokens instantiates (:class:`WildcardTerms`), and from there a wildcard is matched, required or
excluded, as a word is.

Limits, as Lucene's (which refuses a leading wildcard unless told otherwise): a wildcard word
needs at least ``MIN_WILDCARD_LITERAL`` characters before its first wildcard (its *prefix*) or
after its last (its *suffix*), which is what :class:`WildcardTerms` finds it by; a bare ``*``
or a one-letter prefix is refused. Its characters are letters, marks, digits and wildcards: a
wildcard applies to one word.

Pure: imports only the errors and the analysis module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import regex

from wordcast.errors import InvalidInput
from wordcast.query.analysis import MAX_TOKEN_CHARS, normalised_tokens

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
    prefix, suffix = _prefix(term), _suffix(term)
    if len(prefix) < MIN_WILDCARD_LITERAL and len(suffix) < MIN_WILDCARD_LITERAL:
        raise InvalidInput(
            f"query {query!r}: {word!r} needs at least {MIN_WILDCARD_LITERAL} letters before its "
            f"first wildcard or after its last (a one-letter prefix would match too many words)"
        )
    if len(term) > MAX_TOKEN_CHARS:
        raise InvalidInput(f"query {query!r}: {word!r} is longer than {MAX_TOKEN_CHARS} characters")
    return term


def _prefix(term: str) -> str:
    return re.split(r"[*?]", term, maxsplit=1)[0]


def _suffix(term: str) -> str:
    return re.split(r"[*?]", term)[-1]


def wildcard_regex(term: str) -> re.Pattern[str]:
    """The tokens a wildcard term holds on, as a regular expression (``fullmatch``)."""
    return re.compile(
        "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in term)
    )


class WildcardTerms:
    """The wildcard terms a router or a matcher holds, found in a text's tokens: each term
    filed under its prefix (else its suffix), so a token looks up only its own prefixes and
    suffixes, and checks the few terms filed there."""

    def __init__(self, terms: Iterable[str] = ()) -> None:
        self._count: dict[str, int] = {}
        self._by_prefix: dict[str, dict[str, re.Pattern[str]]] = {}
        self._by_suffix: dict[str, dict[str, re.Pattern[str]]] = {}
        self._prefix_sizes: set[int] = set()
        self._suffix_sizes: set[int] = set()
        for term in terms:
            self.add(term)

    def __len__(self) -> int:
        return len(self._count)

    def __contains__(self, term: object) -> bool:
        return term in self._count

    def add(self, term: str) -> None:
        """Hold ``term`` (once more: each holder counted)."""
        held = self._count.get(term, 0)
        self._count[term] = held + 1
        if held:
            return
        key, filed, sizes = self._filing(term)
        filed.setdefault(key, {})[term] = wildcard_regex(term)
        sizes.add(len(key))

    def discard(self, term: str) -> None:
        """Let one holder of ``term`` go."""
        held = self._count.get(term, 0)
        if held > 1:
            self._count[term] = held - 1
            return
        if not held:
            return
        del self._count[term]
        key, filed, _ = self._filing(term)
        filed[key].pop(term, None)
        if not filed[key]:
            del filed[key]
        # The sizes looked up stay (a few small numbers): a size with no key finds nothing.

    def _filing(self, term: str) -> tuple[str, dict[str, dict[str, re.Pattern[str]]], set[int]]:
        prefix = _prefix(term)
        if len(prefix) >= MIN_WILDCARD_LITERAL:
            return prefix, self._by_prefix, self._prefix_sizes
        return _suffix(term), self._by_suffix, self._suffix_sizes

    def found(self, tokens: Iterable[str]) -> list[str]:
        """The terms held that some token instantiates, each once, sorted."""
        found: set[str] = set()
        by_prefix, by_suffix = self._by_prefix, self._by_suffix
        prefix_sizes = sorted(self._prefix_sizes)
        suffix_sizes = sorted(self._suffix_sizes)
        for token in set(tokens):
            for size in prefix_sizes:
                if size > len(token):
                    break
                filed = by_prefix.get(token[:size])
                if filed:
                    found.update(t for t, r in filed.items() if r.fullmatch(token))
            for size in suffix_sizes:
                if size > len(token):
                    break
                filed = by_suffix.get(token[-size:])
                if filed:
                    found.update(t for t, r in filed.items() if r.fullmatch(token))
        return sorted(found)
