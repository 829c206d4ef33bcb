"""Count-based inverted index of subscriptions (web-syndication thesis §2.2, Alg. 3-4).

Each term has a postings list of the subscriptions containing it, and a counter holds each
subscription's size. To match an item, the postings of each of its terms are walked and a copy of
the counter is decremented; a subscription whose count reaches zero has all its terms in the item.
The copy is made lazily (only the counters touched), which changes nothing in the result.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

SubId = TypeVar("SubId", bound=Hashable)


class CountingIndex(Generic[SubId]):
    def __init__(self) -> None:
        # A dict per term keeps insertion order for the walk and makes deletes O(1).
        self._postings: dict[str, dict[SubId, None]] = {}
        self._size: dict[SubId, int] = {}

    def __len__(self) -> int:
        return len(self._size)

    def add(self, sub_id: SubId, terms: Iterable[str]) -> None:
        unique = set(terms)
        if not unique:
            raise ValueError("a subscription needs at least one term")
        if sub_id in self._size:
            raise ValueError(f"subscription {sub_id!r} is already indexed")
        for term in unique:
            self._postings.setdefault(term, {})[sub_id] = None
        self._size[sub_id] = len(unique)

    def remove(self, sub_id: SubId, terms: Iterable[str]) -> bool:
        if self._size.pop(sub_id, None) is None:
            return False
        for term in set(terms):
            postings = self._postings.get(term)
            if postings is not None:
                postings.pop(sub_id, None)
                if not postings:
                    del self._postings[term]
        return True

    def match(self, terms: Iterable[str]) -> list[SubId]:
        remaining: dict[SubId, int] = {}
        found: list[SubId] = []
        size = self._size
        for term in set(terms):
            for sub_id in self._postings.get(term, ()):
                left = remaining.get(sub_id)
                left = (size[sub_id] if left is None else left) - 1
                remaining[sub_id] = left
                if left == 0:
                    found.append(sub_id)
        return found

    def operations(self, terms: Iterable[str]) -> int:
        """Postings visited to match ``terms``: the count-based side of thesis Table 4.6."""
        return sum(len(self._postings.get(term, ())) for term in set(terms))
