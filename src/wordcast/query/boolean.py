r"""Boolean keyword queries: ``OR``, ``NOT`` (or a leading ``-``) and parentheses over keywords.

docs/ARCHITECTURE.md names boolean queries as the richer subscriptions after keyword conjunctions; the
Luwak thesis (§2) matches such queries by presearching on terms, then checking each candidate in
full. wordcast does the same within S³-TM's routing: a query is rewritten into disjunctive normal
form, alternatives C₀ ∨ C₁ ∨ … where each Cᵢ is a conjunction of words it must contain and words it
must not. Each alternative is stored, routed, placed (LASP, Alg. 2) and moved like a keyword
subscription of its required words, so nothing in routing changes: a publication satisfying Cᵢ
contains Cᵢ's words and reaches the matcher holding Cᵢ. There the full check runs on the
publication's terms (the router sends them all), and **only the first alternative that holds
delivers**: Cᵢ stays silent when some Cⱼ with j < i holds too. A publication matching the query is
therefore delivered exactly once, by the alternative that every matcher agrees is first.

Syntax (operators in capitals, as in Lucene; words are analysed like any query)::

    white house                  both words (AND is implicit; "AND" may be written)
    obama OR biden               either
    (white OR black) house       grouping
    senate -house                senate, not house; "NOT house" says the same
    NOT (red blue) apple         apple, unless it has both red and blue
    "white house"                the phrase: the terms adjacent and in order (:mod:`.spans`)
    NEAR/3(senate vote)          the words within 3 positions of one another, in any order
    "senate vote"~3              Lucene's way to write NEAR/3(senate vote)
    hous*  te?t  *ing            a word with wildcards (:mod:`.wildcards`)
    #python @guido $aapl         a hashtag, a mention, a cashtag (entities of the text)
    source:rss  has:links        a filter on the publication (:mod:`.filters`)
    source:(rss OR atom)         either value of the attribute
    score:>3  score:[1 TO 5]     a comparison or range on an attribute (:mod:`.conditions`)
    url:"example.com"            a part of a link in the text

Lucene's spellings read the same: ``&&`` for AND, ``||`` for OR, ``!`` for NOT, ``+word`` a
required word (every word is, AND being implicit here as in X's rules), ``\`` escaping the
character after it (``\-word`` is the word, ``a\:b`` two words); a boost (``^2``) changes
nothing, there being no scores (:mod:`.misreadings` warns of it).

A phrase or proximity condition requires its terms, so its alternative is stored and routed on
them, and the matcher checks the positions (the publication's text analysed again, for the
candidates only). A query without any of these is a plain conjunction of its terms, whatever
punctuation it holds (a stray ``:)`` is not a parse error). Limits: at most
``MAX_ALTERNATIVES`` alternatives after rewriting, each with at least one required word (one made
only of exclusions would match almost everything) and at most
:data:`wordcast.limits.MAX_TERMS_PER_SUBSCRIPTION` required and as many excluded terms;
parentheses and NOTs nested at most ``MAX_NESTING`` deep.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from wordcast.limits import MAX_TERMS_PER_SUBSCRIPTION
from wordcast.query.analysis import TermAnalyser
from wordcast.query.conditions import Condition
from wordcast.query.filters import written
from wordcast.query.spans import Span
from wordcast.query.syntax import (
    MAX_NESTING,
    And,
    Filter,
    InvalidQuery,
    Node,
    Not,
    Or,
    Word,
    evaluate,
    has_operators,
    parse_tree,
)

__all__ = [
    "MAX_ALTERNATIVES",
    "MAX_NESTING",
    "And",
    "BooleanQuery",
    "Clause",
    "Filter",
    "InvalidQuery",
    "Node",
    "Not",
    "Or",
    "Word",
    "evaluate",
    "has_operators",
    "parse_query",
    "parse_tree",
    "part_id",
    "part_ids",
    "split_part_id",
]

MAX_ALTERNATIVES = 16
PART_SEPARATOR = "~"  # never in a subscription id the router makes (hex)

# -- disjunctive normal form (what gets stored and routed) ----------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class Clause:
    """One alternative: every term of ``words`` and none of ``without``; every span of ``spans``
    (phrases, proximity) and none of ``not_spans``; every filter term of ``filters`` (excluded
    filter terms are in ``without``: a publication's filter terms are among its terms); every
    condition of ``conditions`` and none of ``not_conditions``."""

    words: tuple[str, ...]
    without: tuple[str, ...] = ()
    spans: tuple[Span, ...] = ()
    not_spans: tuple[Span, ...] = ()
    filters: tuple[str, ...] = ()
    conditions: tuple[Condition, ...] = ()
    not_conditions: tuple[Condition, ...] = ()

    @property
    def positional(self) -> bool:
        return bool(self.spans or self.not_spans)

    def holds(
        self, terms: AbstractSet[str], positions: Mapping[str, Sequence[int]] | None = None
    ) -> bool:
        if not all(t in terms for t in self.words) or any(t in terms for t in self.without):
            return False
        if not all(t in terms for t in self.filters) or not self.conditions_hold(terms):
            return False
        return not self.positional or self.spans_hold(positions)

    def conditions_hold(self, terms: AbstractSet[str]) -> bool:
        return all(c.holds(terms) for c in self.conditions) and not any(
            c.holds(terms) for c in self.not_conditions
        )

    def __str__(self) -> str:
        """The alternative in query syntax, written in analysed terms."""
        parts = [*self.words, *map(str, self.spans), *map(written, self.filters)]
        parts += map(str, self.conditions)
        parts += [f"-{written(term) if ':' in term else term}" for term in self.without]
        parts += [f"-{span}" if not span.near else f"NOT {span}" for span in self.not_spans]
        parts += [f"-{condition}" for condition in self.not_conditions]
        return " ".join(parts)

    def spans_hold(self, positions: Mapping[str, Sequence[int]] | None) -> bool:
        if positions is None:
            raise ValueError("a phrase or proximity condition needs the terms' positions")
        return all(s.holds(positions) for s in self.spans) and not any(
            s.holds(positions) for s in self.not_spans
        )


@dataclass(frozen=True, slots=True)
class BooleanQuery:
    clauses: tuple[Clause, ...]

    @property
    def is_plain(self) -> bool:
        """A single conjunction without exclusions or spans: an ordinary keyword subscription."""
        only = self.clauses[0]
        return len(self.clauses) == 1 and only == Clause(only.words)

    def matches(
        self, terms: AbstractSet[str], positions: Mapping[str, Sequence[int]] | None = None
    ) -> bool:
        return any(clause.holds(terms, positions) for clause in self.clauses)


# (required, excluded, spans required, spans excluded, filter terms required, conditions
# required, conditions excluded): a Clause's fields, as sets.
_Conjunct = tuple[frozenset[Any], ...]
_REQUIRED, _EXCLUDED, _SPANS, _NOT_SPANS, _FILTERS, _CONDITIONS, _NOT_CONDITIONS = range(7)
_TRUE: _Conjunct = (frozenset(),) * 7


def _atom(field: int, item: object) -> _Conjunct:
    return _conjunct({field: frozenset({item})})


def _conjunct(fields: dict[int, frozenset[Any]]) -> _Conjunct:
    return tuple(fields.get(k, frozenset()) for k in range(7))


def _contradicts(c: _Conjunct) -> bool:
    return bool(
        c[_REQUIRED] & c[_EXCLUDED]
        or c[_SPANS] & c[_NOT_SPANS]
        or c[_FILTERS] & c[_EXCLUDED]
        or c[_CONDITIONS] & c[_NOT_CONDITIONS]
    )


def _simplified(clauses: Iterable[_Conjunct]) -> list[_Conjunct]:
    """Drop contradictions and alternatives implied by a weaker one (A ∨ (A ∧ B) is A)."""
    kept: list[_Conjunct] = []
    by_size = sorted(
        set(clauses), key=lambda c: (sum(map(len, c)), [sorted(map(str, f)) for f in c])
    )
    for conjunct in by_size:
        if _contradicts(conjunct):
            continue
        if any(all(a <= b for a, b in zip(weaker, conjunct, strict=True)) for weaker in kept):
            continue
        kept.append(conjunct)
    return kept


def _dnf(node: Node, negated: bool, text: str) -> list[_Conjunct]:
    if isinstance(node, Not):
        return _dnf(node.child, not negated, text)
    if isinstance(node, Word):
        if negated:  # ¬(a ∧ b) = ¬a ∨ ¬b
            return [_atom(_EXCLUDED, term) for term in node.terms]
        return [_conjunct({_REQUIRED: node.terms})]
    if isinstance(node, Filter):  # never a word: routing does not see it
        return [_atom(_EXCLUDED if negated else _FILTERS, node.term)]
    if isinstance(node, Condition):
        return [_atom(_NOT_CONDITIONS if negated else _CONDITIONS, node)]
    if isinstance(node, Span):  # an atom: its terms required, its positions checked
        if negated:
            return [_atom(_NOT_SPANS, node)]
        return [_conjunct({_REQUIRED: node.terms, _SPANS: frozenset({node})})]
    conjunctive = isinstance(node, And) != negated
    parts = [_dnf(child, negated, text) for child in node.children]
    if not conjunctive:
        result = _simplified(c for part in parts for c in part)
    else:
        result = [_TRUE]
        for part in parts:
            result = _simplified(
                tuple(a | b for a, b in zip(c1, c2, strict=True)) for c1 in result for c2 in part
            )
            if len(result) > 4 * MAX_ALTERNATIVES:
                break  # refused below; stop before the product explodes
    if len(result) > MAX_ALTERNATIVES:
        raise InvalidQuery(
            f"query {text!r} has more than {MAX_ALTERNATIVES} alternatives once written as "
            "ORs of ANDs; split it into several subscriptions"
        )
    return result


def parse_query(text: str, analyser: TermAnalyser | None = None) -> BooleanQuery:
    """The query as alternatives, in the order every matcher uses; raises InvalidQuery."""
    conjuncts = _dnf(parse_tree(text, analyser), False, text)
    if not conjuncts:
        raise InvalidQuery(f"query {text!r} can never match: every alternative contradicts itself")
    clauses = sorted(Clause(*(tuple(sorted(field)) for field in c)) for c in conjuncts)
    for clause in clauses:
        if not clause.words:
            conditions = [*clause.filters, *(f"NOT {t}" for t in clause.without)]
            conditions += [f"NOT {span}" for span in clause.not_spans]
            conditions += map(str, clause.conditions)
            conditions += [f"NOT {c}" for c in clause.not_conditions]
            raise InvalidQuery(
                f"query {text!r}: the alternative '{' '.join(conditions)}' requires no word, so "
                "it would match almost every publication (a filter narrows a query's words, it "
                "does not replace them); add a word it must contain"
            )
        for kind, terms in (("required", clause.words), ("excluded", clause.without)):
            if len(terms) > MAX_TERMS_PER_SUBSCRIPTION:
                where = "an alternative has" if has_operators(text) else "the query has"
                raise InvalidQuery(
                    f"query {text!r}: {where} {len(terms)} {kind} terms after analysis; the "
                    f"limit is {MAX_TERMS_PER_SUBSCRIPTION}"
                )
    return BooleanQuery(tuple(clauses))


# -- ids of the stored alternatives -------------------------------------------------------------


def part_id(subscription_id: str, part: int) -> str:
    """Alternative 0 is stored under the subscription's own id, the others beside it."""
    return subscription_id if part == 0 else f"{subscription_id}{PART_SEPARATOR}{part}"


def split_part_id(stored_id: str) -> tuple[str, int]:
    """(subscription id, alternative) of a stored id."""
    parent, _, part = stored_id.partition(PART_SEPARATOR)
    return parent, int(part) if part else 0


def part_ids(subscription_id: str, parts: int) -> Sequence[str]:
    return [part_id(subscription_id, k) for k in range(parts)]
