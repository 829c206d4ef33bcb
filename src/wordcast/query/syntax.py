"""The syntax of boolean queries: their tokens, the parser, and the tree it reads
(:mod:`.boolean` has the whole language, and writes the tree as alternatives).

Pure: imports only the query package and the errors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from wordcast.errors import EmptyQuery, InvalidInput
from wordcast.query.analysis import (
    TermAnalyser,
    default_analyser,
    entity_terms,
    token_terms,
    word_terms,
)
from wordcast.query.conditions import Condition, is_condition, read_condition
from wordcast.query.filters import LANG, read_filter
from wordcast.query.languages import SNOWBALL, analyser_for
from wordcast.query.spans import Span, phrase, proximity
from wordcast.query.wildcards import read_wildcard

MAX_NESTING = 32  # parentheses and NOTs inside one another

_TOKEN = re.compile(
    r'[-!+]?"[^"]*"?(?:~\d*)?(?:\^[\d.]*)?'  # a phrase, its slop, its boost
    r"|NEAR/\w*\(|[-!+]?\(|\)|&&|\|\|"
    r'|[-!+]?[A-Za-z][A-Za-z0-9_]*:(?!//)(?:"[^"]*"?|\(|[\[{][^\]}]*[\]}]?)'  # field:"…", (, [
    r'|(?:\\.|[^\s()"\\])+|\\'  # a word, escapes and all
)
_OR, _AND = frozenset({"OR", "||"}), frozenset({"AND", "&&"})
_OPERATORS = frozenset({"NOT", *_OR, *_AND})
_ESCAPED = re.compile(r"\\(.)")
_MAYBE_OPERATOR = re.compile(r'[-!+:&|*?#@$"\\]|OR|AND|NOT|NEAR/')
_EXISTS = "_exists_:"
_SIGNS = "-!+"  # before a word, phrase or group: excluded, excluded, required
# A word with wildcards: a star anywhere, or a ? before a letter (``why?`` ends a question).
_WILDCARD = re.compile(r"\*|\?\w")
# name:value, name:"a value", name:[a TO b] (what FILTER_TOKEN reads, and ranges), signed.
_FIELD = re.compile(
    r'([-!+]?)([A-Za-z][A-Za-z0-9_]*):(?!//)("[^"]*"?|[\[{][^\]}]*[\]}]?|(?:\\.|[^\s()"\\])+)'
)


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


Node = Word | And | Or | Not | Span | Filter | Condition


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
    if isinstance(node, Condition):
        return node.holds(terms)
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
    # Matchers ask this of every subscription they load: most have none of these, found in
    # one search.
    if _MAYBE_OPERATOR.search(text) is None:
        return False
    if '"' in text or "NEAR/" in text or "\\" in text:
        return True
    return any(_is_operator(t) for t in _TOKEN.findall(text))


def _is_operator(token: str) -> bool:
    """Whether a token reads otherwise in a query than as the words of its text."""
    if token in _OPERATORS or _FIELD.fullmatch(token) or token.endswith("("):
        return True
    if token.lstrip(_SIGNS).startswith(_EXISTS):
        return True
    if _signed(token):
        return True
    if token[0] in "#@$" and any(e[0] == token[0] for e in entity_terms(token)):
        return True
    return bool(_WILDCARD.search(token))


def _signed(token: str) -> bool:
    """Whether a token starts with a sign that applies to what follows it: ``-`` always (as
    before Lucene's spellings were read), ``!`` and ``+`` before a word, a phrase or a group
    (``+1`` and ``!!!`` are what they look like)."""
    if len(token) < 2 or token[0] not in _SIGNS:
        return False
    rest = token[1]
    return token[0] == "-" or rest.isalnum() or rest in '("#@$\\'


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
        terms = word_terms(analyser, text)
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
    """Recursive descent: alternatives := conjunction ((OR | ||) conjunction)*;
    conjunction := factor+ (AND, && between them changing nothing); factor := NOT factor |
    sign factor | ( … ) | field:( … ) | phrase | NEAR/n( … ) | filter | condition | word,
    a sign being ``-`` or ``!`` (excluded) or ``+`` (required)."""

    def __init__(self, tokens: list[str], analyser: TermAnalyser, text: str) -> None:
        self.tokens, self.analyser, self.text = tokens, analyser, text
        self.position = 0
        self.depth = 0
        self.field = ""  # inside name:( … ): each word a value of the attribute name

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
        while self._peek() in _OR:
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
        while (token := self._peek()) is not None and token not in _OR and token != ")":
            if token in _AND:
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
            if self._peek() in (None, ")", *_OR, *_AND):
                raise self._fail("NOT needs a word or a group after it")
            self._nested()
            negated = self._negated(self.factor(), "NOT")
            self.depth -= 1
            return negated
        if _signed(token) and not _FIELD.fullmatch(token):
            return self._sign(token)
        if token == "(":
            return self._group("")
        if token.startswith('"'):
            return self._phrase(token)
        if token.startswith("NEAR/"):
            return self._near(token)
        if token.endswith(":("):
            return self._group(token[:-2])
        if _FIELD.fullmatch(token):
            return self._filter(token)
        if token.startswith(_EXISTS):  # Lucene's _exists_:name is has:name
            return self._filter(f"has:{token[len(_EXISTS) :]}")
        return self._word(token)

    def _sign(self, token: str) -> Node | None:
        """A signed factor: what follows the sign read as a factor of its own."""
        sign, rest = token[0], token[1:]
        self.tokens[self.position - 1] = rest
        self.position -= 1
        self._nested()
        node = self.factor()
        self.depth -= 1
        return node if sign == "+" else self._negated(node, token)

    def _group(self, field: str) -> Node | None:
        if field and self.field:
            raise self._fail(f"{field}:( … ) inside {self.field}:( … )")
        self._nested()
        outer, self.field = self.field, field or self.field
        inner = self.alternatives()
        self.field = outer
        if self._peek() != ")":
            raise self._fail("'(' without its ')'")
        self.position += 1
        self.depth -= 1
        if field and inner is None:
            raise self._fail(f"{field}:( … ) holds no value")
        return inner

    def _phrase(self, token: str) -> Node | None:
        quoted, _, rest = token.partition('"')[2].rpartition('"')
        if not _ or token.count('"') < 2:
            raise self._fail("a quote without its closing quote")
        slop = rest[1:].partition("^")[0] if rest.startswith("~") else ""
        if self.field:
            return self._valued(f'{self.field}:"{quoted}"')
        if slop not in ("", "0"):
            words = token_terms(quoted)
            if len({t for t in words if t}) >= 2:
                try:
                    return proximity(slop, quoted.split(), self.text)
                except InvalidInput as exc:
                    raise InvalidQuery(str(exc)) from exc
        try:
            span = phrase(quoted, self.text)
        except InvalidInput as exc:
            raise InvalidQuery(str(exc)) from exc
        if span is not None:
            return span
        return Word(frozenset(t for t in token_terms(quoted) if t))

    def _near(self, token: str) -> Span:
        words = []
        while (word := self._peek()) is not None and word != ")":
            if (
                word in _OPERATORS
                or word.startswith(("(", "-", '"', "NEAR/"))
                or _FIELD.fullmatch(word)
            ):
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

    def _filter(self, token: str) -> Node:
        if self.field:
            raise self._fail(f"{self.field}:( … ) takes values, not the filter {token!r}")
        excluded = token[0] in "-!"
        node = self._valued(token[1:] if token[0] in _SIGNS else token)
        return Not(node) if excluded else node

    def _valued(self, written: str) -> Node:
        """The filter or condition ``name:value`` writes."""
        found = _FIELD.fullmatch(written)
        try:
            if found is not None and is_condition(found[2], found[3]):
                return read_condition(found[2], _unescaped(found[3]), self.text)
            return Filter(read_filter(_unescaped(written), self.text)[1])
        except InvalidInput as exc:
            raise InvalidQuery(str(exc)) from exc

    def _negated(self, node: Node | None, written: str) -> Node:
        if node is None:
            raise self._fail(f"{written} excludes nothing: no terms left after analysis")
        return Not(node)

    def _word(self, token: str) -> Node | None:
        if self.field:
            return self._valued(f"{self.field}:{token}")
        if "\\" not in token and _WILDCARD.search(token):
            try:
                return Word(frozenset({read_wildcard(token.rstrip(".,;:!"), self.text)}))
            except InvalidInput as exc:
                raise InvalidQuery(str(exc)) from exc
        word = _unescaped(token)
        if word[:1] in "#@$":
            entities = frozenset(e for e in entity_terms(word) if e[0] == word[0])
            if entities:
                return Word(entities)
        terms = word_terms(self.analyser, word.partition("^")[0])
        return Word(terms) if terms else None  # a stop word or punctuation constrains nothing


def _unescaped(written: str) -> str:
    return _ESCAPED.sub(r"\1", written)
