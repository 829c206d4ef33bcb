"""Brute-force matching: the oracle every index and the whole cluster are judged against.

Web-syndication thesis Alg. 1: test every subscription against the item. Each subscription's terms
are checked rarest first (by the document frequencies given, if any), so most subscriptions are
rejected on their first term; the result is the same whatever the order.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Generic, TypeVar

SubId = TypeVar("SubId", bound=Hashable)


class BruteForce(Generic[SubId]):
    def __init__(self, document_frequency: Mapping[str, int] | None = None) -> None:
        self._df = document_frequency or {}
        self._subs: dict[SubId, tuple[str, ...]] = {}

    def __len__(self) -> int:
        return len(self._subs)

    def add(self, sub_id: SubId, terms: Iterable[str]) -> None:
        unique = set(terms)
        if not unique:
            raise ValueError("a subscription needs at least one term")
        self._subs[sub_id] = tuple(sorted(unique, key=lambda t: (self._df.get(t, 0), t)))

    def remove(self, sub_id: SubId, terms: Iterable[str] = ()) -> bool:
        return self._subs.pop(sub_id, None) is not None

    def match(self, terms: Iterable[str]) -> list[SubId]:
        post = terms if isinstance(terms, (set, frozenset)) else set(terms)
        return [sid for sid, sub in self._subs.items() if all(t in post for t in sub)]


def match_pairs(
    subscriptions: Mapping[SubId, frozenset[str]],
    publications: Mapping[Hashable, frozenset[str]],
) -> set[tuple[SubId, Hashable]]:
    """Every (subscription id, publication id) pair where the subscription's terms are a subset."""
    return {
        (sid, pid)
        for pid, post in publications.items()
        for sid, sub in subscriptions.items()
        if sub <= post
    }
