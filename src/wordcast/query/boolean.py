"""Boolean keyword queries: ``OR``, ``NOT`` (or a leading ``-``) and parentheses over keywords.

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

A phrase or proximity condition requires its terms, so its alternative is stored and routed on
them, and the matcher checks the positions (the publication's text analysed again, for the
candidates only). A query without ``OR``, ``AND``, ``NOT``, a quote, ``NEAR/`` or a word starting
with ``-`` is a plain conjunction of
its terms, whatever punctuation it holds (a stray ``:)`` is not a parse error). Limits: at most
``MAX_ALTERNATIVES`` alternatives after rewriting, each with at least one required word (one made
only of exclusions would match almost everything) and at most
:data:`wordcast.limits.MAX_TERMS_PER_SUBSCRIPTION` required and as many excluded terms;
parentheses and NOTs nested at most ``MAX_NESTING`` deep.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from wordcast.errors import EmptyQuery, InvalidInput
from wordcast.limits import MAX_TERMS_PER_SUBSCRIPTION
from wordcast.query.analysis import TermAnalyser, default_analyser, token_terms
from wordcast.query.filters import LANG, is_filter, read_filter, written
from wordcast.query.languages import SNOWBALL, analyser_for
from wordcast.query.spans import Span, phrase, proximity

MAX_ALTERNATIVES = 16
MAX_NESTING = 32  # parentheses and NOTs inside one another
PART_SEPARATOR = "~"  # never in a subscription id the router makes (hex)

_TOKEN = re.compile(
    r'-?"[^"]*"?|NEAR/\w*\(|-?\(|\)|-?[A-Za-z][A-Za-z0-9_]*:(?!//)"[^"]*"?|[^\s()"]+'
)
_OPERATORS = frozenset({"OR", "AND", "NOT"})


class InvalidQuery(InvalidInput):
    """A boolean query that cannot be parsed or breaks a limit."""


# -- the parsed tree (what the query says) ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Word:
    terms: frozenset[str]  # one written word may analyse into several terms ("covid-19")


@dataclass(frozen=True, slots=True)
class And:
    children: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Or:
    children: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Not:
    child: Node


@dataclass(frozen=True, slots=True, order=True)
class Filter:
    term: str  # name:value (:mod:`.filters`)


Node = Word | And | Or | Not | Span | Filter


def evaluate(
    node: Node,
    terms: AbstractSet[str],
    positions: Mapping[str, Sequence[int]] | None = None,
) -> bool:
    """Whether a publication with analysed ``terms`` (and, for phrases and proximity, their
    ``positions``) satisfies the tree (the definition)."""
    if isinstance(node, Word):
        return node.terms <= terms
    if isinstance(node, Filter):
        return node.term in terms
    if isinstance(node, Span):
        if positions is None:
            raise ValueError("a phrase or proximity condition needs the terms' positions")
        return node.terms <= terms and node.holds(positions)
    if isinstance(node, And):
        return all(evaluate(child, terms, positions) for child in node.children)
    if isinstance(node, Or):
        return any(evaluate(child, terms, positions) for child in node.children)
    return not evaluate(node.child, terms, positions)


def has_operators(text: str) -> bool:
    # Matchers ask this of every subscription they load: most have none of these substrings.
    if '"' in text or "NEAR/" in text:
        return True
    if (
        "-" not in text
        and "OR" not in text
        and "AND" not in text
        and "NOT" not in text
        and ":" not in text
    ):
        return False
    return any(t in _OPERATORS or t.startswith("-") or is_filter(t) for t in _TOKEN.findall(text))


def parse_tree(text: str, analyser: TermAnalyser | None = None) -> Node:
    """The query's tree, its words analysed in the language its ``lang:`` filters name, else
    in English (by ``analyser``: the reference analyser, or the compiled one, which equals it);
    raises InvalidQuery (or EmptyQuery) naming the problem."""
    tree = _parse_tree(text, default_analyser() if analyser is None else analyser)
    languages = sorted(_languages(tree, False))
    if len(languages) > 1:
        raise InvalidQuery(
            f"query {text!r} names {len(languages)} languages ({', '.join(languages)}), and a "
            "query is analysed in one: make one subscription per language"
        )
    if languages and languages[0] in SNOWBALL:
        return _parse_tree(text, analyser_for(languages[0]))
    return tree


def _languages(node: Node, negated: bool) -> set[str]:
    """The languages the tree's lang: filters require (not those it excludes)."""
    if isinstance(node, Filter):
        name, _, code = node.term.partition(":")
        return {code} if name == LANG and not negated else set()
    if isinstance(node, Not):
        return _languages(node.child, not negated)
    if isinstance(node, And | Or):
        return {code for child in node.children for code in _languages(child, negated)}
    return set()


def _parse_tree(text: str, analyser: TermAnalyser) -> Node:
    if not has_operators(text):
        terms = analyser.terms(text)
        if not terms:
            raise EmptyQuery(text)
        return Word(terms)
    parser = _Parser(_TOKEN.findall(text), analyser, text)
    tree = parser.alternatives()
    if parser.position < len(parser.tokens):
        raise InvalidQuery(f"query {text!r}: unmatched ')'")
    if tree is None:
        raise EmptyQuery(text)
    return tree


class _Parser:
    """Recursive descent: alternatives := conjunction (OR conjunction)*;
    conjunction := factor+; factor := NOT factor | -word | -( … ) | ( … ) | word."""

    def __init__(self, tokens: list[str], analyser: TermAnalyser, text: str) -> None:
        self.tokens, self.analyser, self.text = tokens, analyser, text
        self.position = 0
        self.depth = 0

    def _nested(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self._fail(f"nested more than {MAX_NESTING} levels deep")

    def _peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _fail(self, problem: str) -> InvalidQuery:
        return InvalidQuery(f"query {self.text!r}: {problem}")

    def alternatives(self) -> Node | None:
        branches = [self.conjunction()]
        while self._peek() == "OR":
            self.position += 1
            branches.append(self.conjunction())
        if len(branches) == 1:
            return branches[0]
        if any(branch is None for branch in branches):
            raise self._fail(
                "OR needs words on both sides (stop words and punctuation do not count)"
            )
        return Or(tuple(b for b in branches if b is not None))

    def conjunction(self) -> Node | None:
        factors: list[Node] = []
        while (token := self._peek()) is not None and token not in ("OR", ")"):
            if token == "AND":
                self.position += 1
                continue
            factor = self.factor()
            if factor is not None:
                factors.append(factor)
        if not factors:
            return None
        return factors[0] if len(factors) == 1 else And(tuple(factors))

    def factor(self) -> Node | None:
        token = self.tokens[self.position]
        self.position += 1
        if token == "NOT":
            if self._peek() in (None, "OR", ")", "AND"):
                raise self._fail("NOT needs a word or a group after it")
            self._nested()
            negated = self._negated(self.factor(), "NOT")
            self.depth -= 1
            return negated
        if token in ("(", "-("):
            self._nested()
            inner = self.alternatives()
            if self._peek() != ")":
                raise self._fail("'(' without its ')'")
            self.position += 1
            self.depth -= 1
            if token == "-(":
                return self._negated(inner, "-(…)")
            return inner
        if token.startswith(('"', '-"')):
            return self._phrase(token)
        if token.startswith("NEAR/"):
            return self._near(token)
        if is_filter(token):
            try:
                excluded, filter_term = read_filter(token, self.text)
            except InvalidInput as exc:
                raise InvalidQuery(str(exc)) from exc
            return Not(Filter(filter_term)) if excluded else Filter(filter_term)
        if token.startswith("-") and len(token) > 1:
            return self._negated(self._word(token[1:]), token)
        return self._word(token)

    def _phrase(self, token: str) -> Node:
        negated = token.startswith("-")
        quoted = token[1:] if negated else token
        if len(quoted) < 2 or not quoted.endswith('"'):
            raise self._fail("a quote without its closing quote")
        try:
            span = phrase(quoted[1:-1], self.text)
        except InvalidInput as exc:
            raise InvalidQuery(str(exc)) from exc
        node: Node = (
            span if span is not None else Word(frozenset(t for t in token_terms(quoted[1:-1]) if t))
        )
        return Not(node) if negated else node

    def _near(self, token: str) -> Span:
        words = []
        while (word := self._peek()) is not None and word != ")":
            if word in _OPERATORS or word.startswith(("(", "-", '"', "NEAR/")) or is_filter(word):
                raise self._fail(f"{token}…) takes words only, not {word!r}")
            words.append(word)
            self.position += 1
        if word is None:
            raise self._fail(f"{token} without its ')'")
        self.position += 1
        try:
            return proximity(token[len("NEAR/") : -1], words, self.text)
        except InvalidInput as exc:
            raise InvalidQuery(str(exc)) from exc

    def _negated(self, node: Node | None, written: str) -> Node:
        if node is None:
            raise self._fail(f"{written} excludes nothing: no terms left after analysis")
        return Not(node)

    def _word(self, token: str) -> Word | None:
        terms = self.analyser.terms(token)
        return Word(terms) if terms else None  # a stop word or punctuation constrains nothing


# -- disjunctive normal form (what gets stored and routed) ----------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class Clause:
    """One alternative: every term of ``words`` and none of ``without``; every span of ``spans``
    (phrases, proximity) and none of ``not_spans``; every filter term of ``filters`` (excluded
    filter terms are in ``without``: a publication's filter terms are among its terms)."""

    words: tuple[str, ...]
    without: tuple[str, ...] = ()
    spans: tuple[Span, ...] = ()
    not_spans: tuple[Span, ...] = ()
    filters: tuple[str, ...] = ()

    @property
    def positional(self) -> bool:
        return bool(self.spans or self.not_spans)

    def holds(
        self, terms: AbstractSet[str], positions: Mapping[str, Sequence[int]] | None = None
    ) -> bool:
        if not all(t in terms for t in self.words) or any(t in terms for t in self.without):
            return False
        if not all(t in terms for t in self.filters):
            return False
        return not self.positional or self.spans_hold(positions)

    def __str__(self) -> str:
        """The alternative in query syntax, written in analysed terms."""
        parts = [*self.words, *map(str, self.spans), *map(written, self.filters)]
        parts += [f"-{written(term) if ':' in term else term}" for term in self.without]
        parts += [f"-{span}" if not span.near else f"NOT {span}" for span in self.not_spans]
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
        return (
            len(self.clauses) == 1 and not only.without and not only.positional and not only.filters
        )

    def matches(
        self, terms: AbstractSet[str], positions: Mapping[str, Sequence[int]] | None = None
    ) -> bool:
        return any(clause.holds(terms, positions) for clause in self.clauses)


# (required, excluded, spans required, spans excluded, filter terms required)
_Conjunct = tuple[frozenset[str], frozenset[str], frozenset[Span], frozenset[Span], frozenset[str]]
_NOTHING: frozenset[str] = frozenset()
_NO_SPANS: frozenset[Span] = frozenset()


def _simplified(clauses: Iterable[_Conjunct]) -> list[_Conjunct]:
    """Drop contradictions and alternatives implied by a weaker one (A ∨ (A ∧ B) is A)."""
    kept: list[_Conjunct] = []
    by_size = sorted(
        set(clauses), key=lambda c: (sum(map(len, c)), sorted(c[0]), sorted(c[2]), sorted(c[4]))
    )
    for words, without, spans, not_spans, filters in by_size:
        if words & without or spans & not_spans or filters & without:
            continue
        if any(
            w <= words and x <= without and s <= spans and n <= not_spans and f <= filters
            for w, x, s, n, f in kept
        ):
            continue
        kept.append((words, without, spans, not_spans, filters))
    return kept


def _dnf(node: Node, negated: bool, text: str) -> list[_Conjunct]:
    if isinstance(node, Not):
        return _dnf(node.child, not negated, text)
    if isinstance(node, Word):
        if negated:  # ¬(a ∧ b) = ¬a ∨ ¬b
            return [
                (_NOTHING, frozenset({term}), _NO_SPANS, _NO_SPANS, _NOTHING) for term in node.terms
            ]
        return [(node.terms, _NOTHING, _NO_SPANS, _NO_SPANS, _NOTHING)]
    if isinstance(node, Filter):  # never a word: routing does not see it
        if negated:
            return [(_NOTHING, frozenset({node.term}), _NO_SPANS, _NO_SPANS, _NOTHING)]
        return [(_NOTHING, _NOTHING, _NO_SPANS, _NO_SPANS, frozenset({node.term}))]
    if isinstance(node, Span):  # an atom: its terms required, its positions checked
        if negated:
            return [(_NOTHING, _NOTHING, _NO_SPANS, frozenset({node}), _NOTHING)]
        return [(node.terms, _NOTHING, frozenset({node}), _NO_SPANS, _NOTHING)]
    conjunctive = isinstance(node, And) != negated
    parts = [_dnf(child, negated, text) for child in node.children]
    if not conjunctive:
        result = _simplified(c for part in parts for c in part)
    else:
        result = [(_NOTHING, _NOTHING, _NO_SPANS, _NO_SPANS, _NOTHING)]
        for part in parts:
            result = _simplified(
                (w1 | w2, x1 | x2, s1 | s2, n1 | n2, f1 | f2)
                for w1, x1, s1, n1, f1 in result
                for w2, x2, s2, n2, f2 in part
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
    clauses = sorted(
        Clause(
            tuple(sorted(w)), tuple(sorted(x)), tuple(sorted(s)), tuple(sorted(n)), tuple(sorted(f))
        )
        for w, x, s, n, f in conjuncts
    )
    for clause in clauses:
        if not clause.words:
            conditions = [*clause.filters, *(f"NOT {t}" for t in clause.without)]
            conditions += [f"NOT {span}" for span in clause.not_spans]
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
