"""Conditions on a publication's attributes that are not equality: Lucene's ranges and
comparisons (``score:[1 TO 5]``, ``score:{1 TO *}``, ``score:>3``, ``date:<=2026-01-31``) and X's
``url:"…"`` (a part of a link in the text, issue 53).

A publication's attributes reach a matcher as filter terms, ``name:value`` (:mod:`.filters`),
and the links in its text as ``url:<link>`` terms (:mod:`.entities`). A condition holds when
some term of its name satisfies it:

- a range or comparison whose bounds are both numbers (or one a number, the other ``*``)
  compares the values that are numbers, as numbers (an attribute ``3.5`` is above ``3``);
- one whose bounds are ISO dates (``2026-01-31``, ``2026-01-31T10:00:00Z``) compares the values
  that are ISO dates, as text (which orders ISO dates by time when written alike);
- any other compares every value as text, case-folded, as Lucene's term ranges do;
- ``url:value`` holds where a link (or a ``url`` attribute) contains ``value``, case-folded.

Pure: imports only the errors and :mod:`.filters`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from wordcast.errors import InvalidInput
from wordcast.query.filters import NAME, term

CONTAINS = "url"  # url:value, a part of a link
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:t[\d:.]+(?:z|[-+]\d{2}:?\d{2})?)?")
_COMPARISON = re.compile(r"(>=|<=|>|<)(.+)")
_RANGE = re.compile(r"([\[{])\s*(\S+)\s+TO\s+(\S+)\s*([\]}])")
OPEN = "*"  # an unbounded end of a range


@dataclass(frozen=True, slots=True, order=True)
class Condition:
    """``name`` within [low, high] (an end "" is open; ``*_inclusive`` whether it is included),
    or, for ``url:``, ``contains`` found in a value."""

    name: str
    low: str = ""
    high: str = ""
    low_inclusive: bool = True
    high_inclusive: bool = True
    contains: str = ""

    @property
    def kind(self) -> str:
        """How values compare: "number", "date" or "text"."""
        ends = [end for end in (self.low, self.high) if end]
        if ends and all(_NUMBER.fullmatch(end) for end in ends):
            return "number"
        if ends and all(_DATE.fullmatch(end) for end in ends):
            return "date"
        return "text"

    def holds(self, terms: Iterable[str]) -> bool:
        prefix = self.name + ":"
        return any(self.admits(t[len(prefix) :]) for t in terms if t.startswith(prefix))

    def admits(self, value: str) -> bool:
        if self.contains:
            return self.contains in value
        kind = self.kind
        if kind == "number":
            if not _NUMBER.fullmatch(value):
                return False
            low = float(self.low) if self.low else None
            high = float(self.high) if self.high else None
            return _within(float(value), low, high, self.low_inclusive, self.high_inclusive)
        if kind == "date" and not _DATE.fullmatch(value):
            return False
        return _within(
            value, self.low or None, self.high or None, self.low_inclusive, self.high_inclusive
        )

    def __str__(self) -> str:
        """The condition in query syntax."""
        if self.contains:
            return f'{self.name}:"{self.contains}"'
        if not self.high:
            return f"{self.name}:{'>=' if self.low_inclusive else '>'}{self.low}"
        if not self.low:
            return f"{self.name}:{'<=' if self.high_inclusive else '<'}{self.high}"
        opening = "[" if self.low_inclusive else "{"
        closing = "]" if self.high_inclusive else "}"
        return f"{self.name}:{opening}{self.low} TO {self.high}{closing}"


_Bound = TypeVar("_Bound", float, str)


def _within(
    value: _Bound,
    low: _Bound | None,
    high: _Bound | None,
    low_inclusive: bool,
    high_inclusive: bool,
) -> bool:
    """Whether ``value`` lies between the ends given (None: open)."""
    if low is not None and (value < low or (value == low and not low_inclusive)):
        return False
    return high is None or not (value > high or (value == high and not high_inclusive))


def is_condition(name: str, value: str) -> bool:
    """Whether ``name:value`` as written is a condition (not an equality filter)."""
    return name.lower() == CONTAINS or bool(_COMPARISON.fullmatch(value) or value[:1] in "[{")


def read_condition(name: str, value: str, query: str) -> Condition:
    """The condition ``name:value`` of ``query`` writes; raises InvalidInput naming the
    problem."""
    name = name.lower()
    if not NAME.fullmatch(name):
        raise InvalidInput(f"query {query!r}: {name!r} is not an attribute name")
    if name == CONTAINS:
        part = term(name, value.strip('"'))[len(name) + 1 :]
        if not part:
            raise InvalidInput(f"query {query!r}: url: needs a part of a link to look for")
        return Condition(name, contains=part)
    compared = _COMPARISON.fullmatch(value)
    if compared is not None:
        operator, bound = compared[1], _bound(compared[2], name, query)
        if bound == "":
            raise InvalidInput(f"query {query!r}: {name}:{value} compares with nothing")
        if operator.startswith(">"):
            return Condition(name, low=bound, low_inclusive=operator == ">=")
        return Condition(name, high=bound, high_inclusive=operator == "<=")
    ranged = _RANGE.fullmatch(value)
    if ranged is None:
        raise InvalidInput(
            f"query {query!r}: {name}:{value} is not a range: write {name}:[low TO high] "
            f"(or {{low TO high}} to leave the ends out, * for an open end)"
        )
    low, high = _bound(ranged[2], name, query), _bound(ranged[3], name, query)
    if not low and not high:
        raise InvalidInput(f"query {query!r}: {name}:{value} is open at both ends")
    found = Condition(name, low, high, ranged[1] == "[", ranged[4] == "]")
    if low and high and found.kind == "number" and float(low) > float(high):
        raise InvalidInput(f"query {query!r}: {name}:{value} runs from high to low")
    if low and high and found.kind != "number" and low > high:
        raise InvalidInput(f"query {query!r}: {name}:{value} runs from high to low")
    return found


def _bound(written: str, name: str, query: str) -> str:
    """A range's end as values are compared with it ("" for ``*``)."""
    if written == OPEN:
        return ""
    bound = term(name, written.strip('"'))[len(name) + 1 :]
    if not bound:
        raise InvalidInput(f"query {query!r}: a range of {name} has an empty end")
    return bound
