"""What every matching engine offers the matcher: the two kinds of index, as protocols.

A term index holds keyword subscriptions (an id and the analysed terms that must all occur) and
finds those a publication's terms satisfy; a pattern index holds wildcard patterns and finds those
with an instance in a publication's normalised text. Engines may add and remove at any time, and
every one returns exactly what the brute-force oracle returns (``wordcast.testing.bruteforce``).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Protocol

from wordcast.query.patterns import Pattern


class TermIndex(Protocol):
    """An index of keyword subscriptions (S³-TM §4.1, the web-syndication thesis ch. 2–3)."""

    def __len__(self) -> int: ...

    def add(self, sub_id: str, terms: Iterable[str]) -> None: ...

    def remove(self, sub_id: str, terms: Iterable[str]) -> bool:
        """Remove a subscription added with these terms; False if it was not there."""
        ...

    def match(self, terms: Iterable[str]) -> list[str]:
        """The subscriptions whose every term is among ``terms``."""
        ...

    def match_batch(self, batch: Sequence[Iterable[str]]) -> list[tuple[str, int]]:
        """(subscription, position) for every match of every publication of a batch."""
        ...


def add_many(index: TermIndex, sub_ids: Sequence[str], terms: Sequence[Iterable[str]]) -> None:
    """``index.add`` for each subscription, in one call where the index has a bulk ``add_many``
    (the compiled trie's: a restarting matcher indexes its snapshot that way)."""
    bulk = getattr(index, "add_many", None)
    if bulk is not None:
        bulk(sub_ids, terms)
        return
    for sub_id, sub_terms in zip(sub_ids, terms, strict=True):
        index.add(sub_id, sub_terms)


class PatternIndex(Protocol):
    """An index of wildcard patterns (REtriever §2–3)."""

    def __len__(self) -> int: ...

    def add(self, sub_id: Hashable, pattern: Pattern) -> None: ...

    def remove(self, sub_id: Hashable) -> bool: ...

    def match(self, text: str) -> set[Hashable]:
        """The patterns with an instance in ``text`` (already normalised)."""
        ...


def match_each(index: TermIndex, batch: Sequence[Iterable[str]]) -> list[tuple[str, int]]:
    """``match_batch`` for an index that matches one publication at a time."""
    return [
        (sub_id, position) for position, terms in enumerate(batch) for sub_id in index.match(terms)
    ]
