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

A query without ``OR``, ``AND``, ``NOT`` or a word starting with ``-`` is a plain conjunction of
its terms, whatever punctuation it holds (a stray ``:)`` is not a parse error). Limits: at most
``MAX_ALTERNATIVES`` alternatives after rewriting, each with at least one required word (one made
only of exclusions would match almost everything) and at most
:data:`wordcast.limits.MAX_TERMS_PER_SUBSCRIPTION` required and as many excluded terms;
parentheses and NOTs nested at most ``MAX_NESTING`` deep.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from wordcast.errors import EmptyQuery, InvalidInput
from wordcast.limits import MAX_TERMS_PER_SUBSCRIPTION
from wordcast.query.analysis import TermAnalyzer, default_analyzer

MAX_ALTERNATIVES = 16
MAX_NESTING = 32  # parentheses and NOTs inside one another
PART_SEPARATOR = "~"  # never in a subscription id the router makes (hex)

_TOKEN = re.compile(r"-?\(|\)|[^\s()]+")
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


Node = Word | And | Or | Not


def evaluate(node: Node, terms: AbstractSet[str]) -> bool:
    """Whether a publication with analysed ``terms`` satisfies the tree (the definition)."""
    if isinstance(node, Word):
        return node.terms <= terms
    if isinstance(node, And):
        return all(evaluate(child, terms) for child in node.children)
    if isinstance(node, Or):
        return any(evaluate(child, terms) for child in node.children)
    return not evaluate(node.child, terms)


def has_operators(text: str) -> bool:
    # Matchers ask this of every subscription they load: most have none of these substrings.
    if "-" not in text and "OR" not in text and "AND" not in text and "NOT" not in text:
        return False
    return any(t in _OPERATORS or t.startswith("-") for t in _TOKEN.findall(text))


def parse_tree(text: str, analyzer: TermAnalyzer | None = None) -> Node:
    """The query's tree; raises InvalidQuery (or EmptyQuery) naming the problem."""
    analyzer = analyzer or default_analyzer()
    if not has_operators(text):
        terms = analyzer.terms(text)
        if not terms:
            raise EmptyQuery(text)
        return Word(terms)
    parser = _Parser(_TOKEN.findall(text), analyzer, text)
    tree = parser.alternatives()
    if parser.position < len(parser.tokens):
        raise InvalidQuery(f"query {text!r}: unmatched ')'")
    if tree is None:
        raise EmptyQuery(text)
    return tree


class _Parser:
    """Recursive descent: alternatives := conjunction (OR conjunction)*;
    conjunction := factor+; factor := NOT factor | -word | -( … ) | ( … ) | word."""

    def __init__(self, tokens: list[str], analyzer: TermAnalyzer, text: str) -> None:
        self.tokens, self.analyzer, self.text = tokens, analyzer, text
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
        if token.startswith("-") and len(token) > 1:
            return self._negated(self._word(token[1:]), token)
        return self._word(token)

    def _negated(self, node: Node | None, written: str) -> Node:
        if node is None:
            raise self._fail(f"{written} excludes nothing: no terms left after analysis")
        return Not(node)

    def _word(self, token: str) -> Word | None:
        terms = self.analyzer.terms(token)
        return Word(terms) if terms else None  # a stop word or punctuation constrains nothing


# -- disjunctive normal form (what gets stored and routed) ----------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class Clause:
    """One alternative: every term of ``words`` and none of ``without``."""

    words: tuple[str, ...]
    without: tuple[str, ...] = ()

    def holds(self, terms: AbstractSet[str]) -> bool:
        return all(t in terms for t in self.words) and not any(t in terms for t in self.without)


@dataclass(frozen=True, slots=True)
class BooleanQuery:
    clauses: tuple[Clause, ...]

    @property
    def is_plain(self) -> bool:
        """A single conjunction without exclusions: an ordinary keyword subscription."""
        return len(self.clauses) == 1 and not self.clauses[0].without

    def matches(self, terms: AbstractSet[str]) -> bool:
        return any(clause.holds(terms) for clause in self.clauses)


_Conjunct = tuple[frozenset[str], frozenset[str]]  # (required, excluded)


def _simplified(clauses: Iterable[_Conjunct]) -> list[_Conjunct]:
    """Drop contradictions and alternatives implied by a weaker one (A ∨ (A ∧ B) is A)."""
    kept: list[_Conjunct] = []
    for words, without in sorted(set(clauses), key=lambda c: (len(c[0]) + len(c[1]), sorted(c[0]))):
        if words & without:
            continue
        if any(w <= words and x <= without for w, x in kept):
            continue
        kept.append((words, without))
    return kept


def _dnf(node: Node, negated: bool, text: str) -> list[_Conjunct]:
    if isinstance(node, Not):
        return _dnf(node.child, not negated, text)
    if isinstance(node, Word):
        if negated:  # ¬(a ∧ b) = ¬a ∨ ¬b
            return [(frozenset(), frozenset({term})) for term in node.terms]
        return [(node.terms, frozenset())]
    conjunctive = isinstance(node, And) != negated
    parts = [_dnf(child, negated, text) for child in node.children]
    if not conjunctive:
        result = _simplified(c for part in parts for c in part)
    else:
        result = [(frozenset(), frozenset())]
        for part in parts:
            result = _simplified((w1 | w2, x1 | x2) for w1, x1 in result for w2, x2 in part)
            if len(result) > 4 * MAX_ALTERNATIVES:
                break  # refused below; stop before the product explodes
    if len(result) > MAX_ALTERNATIVES:
        raise InvalidQuery(
            f"query {text!r} has more than {MAX_ALTERNATIVES} alternatives once written as "
            "ORs of ANDs; split it into several subscriptions"
        )
    return result


def parse_query(text: str, analyzer: TermAnalyzer | None = None) -> BooleanQuery:
    """The query as alternatives, in the order every matcher uses; raises InvalidQuery."""
    conjuncts = _dnf(parse_tree(text, analyzer), False, text)
    if not conjuncts:
        raise InvalidQuery(f"query {text!r} can never match: every alternative contradicts itself")
    clauses = sorted(Clause(tuple(sorted(w)), tuple(sorted(x))) for w, x in conjuncts)
    for clause in clauses:
        if not clause.words:
            raise InvalidQuery(
                f"query {text!r}: the alternative 'NOT {' NOT '.join(clause.without)}' requires no "
                "word, so it would match almost every publication; add a word it must contain"
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


class HeldAlternatives:
    """The alternatives of boolean queries one index holds, and the check their matches pass.

    The index matches an alternative on its required words like any conjunction; ``delivering``
    then keeps a (stored id, publication) match only where that alternative is the one that
    delivers, and ``subscription_id`` names the query it belongs to. What the check needs is
    prepared when an alternative is added: its excluded terms and the earlier alternatives, as
    sets, so that a match costs a few set operations in C.
    """

    def __init__(self) -> None:
        self._subscription: dict[str, str] = {}  # stored id -> the query's id
        # Only alternatives that can be overruled: stored id -> (excluded terms, the earlier
        # alternatives as (required, excluded)).
        self._checks: dict[str, tuple[frozenset[str], tuple[_Conjunct, ...]]] = {}

    def __len__(self) -> int:
        return len(self._subscription)

    def __contains__(self, stored_id: object) -> bool:
        return stored_id in self._subscription

    def add(self, stored_id: str, query: BooleanQuery) -> None:
        part = split_part_id(stored_id)[1]
        if query.is_plain or part >= len(query.clauses):
            raise ValueError(f"{stored_id!r} is not an alternative of {query}")
        earlier = tuple((frozenset(c.words), frozenset(c.without)) for c in query.clauses[:part])
        without = frozenset(query.clauses[part].without)
        self._subscription[stored_id] = split_part_id(stored_id)[0]
        if without or earlier:
            self._checks[stored_id] = (without, earlier)

    def discard(self, stored_id: str) -> None:
        self._subscription.pop(stored_id, None)
        self._checks.pop(stored_id, None)

    def subscription_id(self, stored_id: str) -> str:
        return self._subscription.get(stored_id, stored_id)

    def delivering(
        self, pairs: Iterable[tuple[str, int]], terms_of: Callable[[int], AbstractSet[str]]
    ) -> list[tuple[str, int]]:
        """The (stored id, position) matches that stand, from an index that matched each
        alternative's required words; ``terms_of(position)`` gives the publication's terms (asked
        once per publication that needs them)."""
        checks = self._checks
        term_sets: dict[int, AbstractSet[str]] = {}
        kept = []
        for stored_id, position in pairs:
            check = checks.get(stored_id)
            if check is not None:
                terms = term_sets.get(position)
                if terms is None:
                    terms = term_sets[position] = terms_of(position)
                without, earlier = check
                if not terms.isdisjoint(without) or any(
                    required <= terms and terms.isdisjoint(excluded)
                    for required, excluded in earlier
                ):
                    continue
            kept.append((stored_id, position))
        return kept
