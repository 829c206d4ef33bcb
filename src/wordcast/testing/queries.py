"""The reference reading of a query on a publication, as the tests' oracle: each query's tree
evaluated as written (:func:`wordcast.query.boolean.evaluate`) on the publication's terms as
defined, computed the plain way: its words and entities (the reference analyser, in English and
in its language), its filter terms, and the wildcard words of the queries that one of its tokens
instantiates, each checked against each token (issue 53).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from wordcast.query.analysis import Analyser, normalised_tokens, term_positions
from wordcast.query.boolean import evaluate, parse_query, parse_tree
from wordcast.query.filters import Value, filter_terms
from wordcast.query.languages import analyse_in_languages
from wordcast.query.wildcards import (
    MIN_WILDCARD_LITERAL,
    is_wildcard,
    prefix_of,
    suffix_of,
    wildcard_regex,
)


class ReferenceWildcardTerms:
    """The reference of ``wordcast._core.WildcardTerms`` (``query.wildcards.held_wildcards``):
    the wildcard terms a router or a matcher holds, found in a text's tokens, each term filed
    under its prefix (else its suffix), so a token looks up only its own prefixes and suffixes,
    and checks the few terms filed there."""

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
        prefix = prefix_of(term)
        if len(prefix) >= MIN_WILDCARD_LITERAL:
            return prefix, self._by_prefix, self._prefix_sizes
        return suffix_of(term), self._by_suffix, self._suffix_sizes

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


def wildcard_terms_of(text: str, terms: Iterable[str]) -> list[str]:
    """Which wildcard ``terms`` some normalised token of ``text`` instantiates."""
    tokens = set(normalised_tokens(text))
    return sorted(
        t for t in set(terms) if any(wildcard_regex(t).fullmatch(token) for token in tokens)
    )


def wildcard_terms_in(queries: Iterable[str]) -> set[str]:
    """The wildcard words the queries hold, required or excluded."""
    return {
        term
        for query in queries
        for clause in parse_query(query).clauses
        for term in (*clause.words, *clause.without)
        if is_wildcard(term)
    }


def query_oracle(
    queries: Mapping[str, str],
    texts: Mapping[str, str],
    attributes: Mapping[str, Mapping[str, Value]] | None = None,
    languages: Mapping[str, str | None] | None = None,
    detect: bool = True,
) -> set[tuple[str, str]]:
    """The (query id, publication id) pairs where the query, read as written, holds."""
    trees = {sid: parse_tree(query) for sid, query in queries.items()}
    wild = wildcard_terms_in(queries.values())
    ids: Sequence[str] = list(texts)
    given = [(languages or {}).get(pid) for pid in ids]
    terms_of, codes = analyse_in_languages(
        [texts[pid] for pid in ids], given, detect, analyser=Analyser()
    )
    found: set[tuple[str, str]] = set()
    for pid, terms, code in zip(ids, terms_of, codes, strict=True):
        text = texts[pid]
        held = {*terms, *filter_terms((attributes or {}).get(pid), code)}
        held.update(wildcard_terms_of(text, wild))
        positions = term_positions(text)
        found.update((sid, pid) for sid, tree in trees.items() if evaluate(tree, held, positions))
    return found
