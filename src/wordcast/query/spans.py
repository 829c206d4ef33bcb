"""Phrases and proximity in boolean queries: conditions on where terms occur, not only whether.

``"white house"`` holds where the phrase's terms occur at their offsets from one another, after
analysis: a stop word inside the phrase (``"house of cards"``) leaves a gap of one position that
any token may fill, as Lucene's phrase queries with position increments do, and the text's own
stop words keep their positions too (:func:`wordcast.query.analysis.term_positions`).
``NEAR/n(a b …)`` holds where every term of the words given occurs within a window of ``n``
positions (the last minus the first at most ``n``), in any order: ``NEAR/1(a b)`` is ``a b`` or
``b a`` adjacent. A span requires its terms, so it is routed and placed as their conjunction
(S³-TM's routing is unchanged) and checked on positions at the matcher, for candidates only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from wordcast.errors import InvalidInput
from wordcast.query.analysis import token_terms

MAX_NEAR = 100  # the widest proximity window, in positions


@dataclass(frozen=True, slots=True, order=True)
class Span:
    """A phrase (``near`` 0: each term at its offset) or a proximity window (``near`` ≥ 1)."""

    offsets: tuple[tuple[str, int], ...]  # (term, offset from the phrase's first position)
    near: int = 0

    @property
    def terms(self) -> frozenset[str]:
        return frozenset(term for term, _ in self.offsets)

    def holds(self, positions: Mapping[str, Sequence[int]]) -> bool:
        """Whether a text whose terms occur at ``positions`` satisfies the span (stops at the
        first place it holds)."""
        return next(self._places(positions), None) is not None

    def occurrences(self, positions: Mapping[str, Sequence[int]]) -> list[tuple[int, int]]:
        """(first, last) position of each place the span holds: each phrase occurrence, or each
        smallest window holding every term (for highlighting)."""
        return list(self._places(positions))

    def _places(self, positions: Mapping[str, Sequence[int]]) -> Iterator[tuple[int, int]]:
        if not self.near:
            (first, start), *rest = self.offsets
            others = [(set(positions.get(term, ())), offset - start) for term, offset in rest]
            length = max(offset for _, offset in self.offsets) - start
            for at in positions.get(first, ()):
                if all(at + shift in where for where, shift in others):
                    yield at, at + length
            return
        # The smallest windows holding every term, found by sliding over their occurrences.
        terms = self.terms
        occurrences = sorted((at, term) for term in terms for at in positions.get(term, ()))
        held: dict[str, int] = {}
        left = 0
        for at, term in occurrences:
            held[term] = held.get(term, 0) + 1
            while len(held) == len(terms):
                if at - occurrences[left][0] <= self.near:
                    yield occurrences[left][0], at
                dropped = occurrences[left][1]
                held[dropped] -= 1
                if not held[dropped]:
                    del held[dropped]
                left += 1

    def __str__(self) -> str:
        if self.near:
            return f"NEAR/{self.near}({' '.join(term for term, _ in self.offsets)})"
        # A gap a stop word left is a "?", as Lucene writes a phrase with position increments.
        written: list[str] = []
        for term, offset in self.offsets:
            written += ["?"] * (offset - len(written))
            written.append(term)
        return f'"{" ".join(written)}"'


def phrase(text: str, query: str) -> Span | None:
    """The span of a quoted phrase; None for a phrase of one term (just that word). Raises
    InvalidInput for a phrase of stop words only."""
    offsets = tuple((term, at) for at, term in enumerate(token_terms(text)) if term)
    if not offsets:
        raise InvalidInput(
            f'query {query!r}: the phrase "{text}" has no terms left after analysis (only stop '
            "words, punctuation or one-character tokens)"
        )
    if len({term for term, _ in offsets}) == 1 and len(offsets) == 1:
        return None
    start = offsets[0][1]
    return Span(tuple((term, at - start) for term, at in offsets))


def proximity(width: str, words: Sequence[str], query: str) -> Span:
    """The span of ``NEAR/width(words…)``; raises InvalidInput naming what is wrong."""
    if not width.isdigit() or not 1 <= int(width) <= MAX_NEAR:
        raise InvalidInput(
            f"query {query!r}: NEAR/{width} needs a window of 1 to {MAX_NEAR} positions "
            "(NEAR/1 is adjacent)"
        )
    terms = sorted({term for word in words for term in token_terms(word) if term})
    if len(terms) < 2:
        raise InvalidInput(
            f"query {query!r}: NEAR/{width}(…) needs at least two words that are not stop words"
        )
    return Span(tuple((term, 0) for term in terms), int(width))
