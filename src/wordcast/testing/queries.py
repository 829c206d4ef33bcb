"""The reference reading of a query on a publication, as the tests' oracle: each query's tree
evaluated as written (:func:`wordcast.query.boolean.evaluate`) on the publication's terms as
defined, computed the plain way: its words and entities (the reference analyser, in English and
in its language), its filter terms, and the wildcard words of the queries that one of its tokens
instantiates, each checked against each token (issue 53).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from wordcast.query.analysis import Analyser, normalised_tokens, term_positions
from wordcast.query.boolean import evaluate, parse_query, parse_tree
from wordcast.query.filters import Value, filter_terms
from wordcast.query.languages import analyse_in_languages
from wordcast.query.wildcards import is_wildcard, wildcard_regex


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
