"""Publication routing and subscription eligibility (S³-TM §3.1, Eq. 3.1; ch. 2 scoped any-cast).

A mapping M assigns each word to one matcher. A publication P is multicast to
K(P, M) = {M(w) : w ∈ P ∩ s(W)}, the matchers of its *subscribed* words. A subscription S may be
placed on any eligible matcher B(S, M) = {M(w) : w ∈ S}: whichever it is, every publication that
contains all of S contains the word that made the matcher eligible, so it reaches that matcher.

The default mapping hashes words with a stable hash (CRC-32 of the UTF-8 bytes), never Python's
randomised ``hash()``, so every process computes the same M.
"""

from __future__ import annotations

import zlib
from collections.abc import Collection, Iterable


def stable_hash(word: str) -> int:
    return zlib.crc32(word.encode("utf-8"))


class HashMapping:
    """M(w) = stable_hash(w) mod N, memoised because the router asks for the same words constantly."""

    __slots__ = ("_cache", "matchers")

    def __init__(self, matchers: int) -> None:
        if matchers < 1:
            raise ValueError("at least one matcher is needed")
        self.matchers = matchers
        self._cache: dict[str, int] = {}

    def __call__(self, word: str) -> int:
        matcher = self._cache.get(word)
        if matcher is None:
            matcher = self._cache[word] = stable_hash(word) % self.matchers
        return matcher


def eligible_matchers(terms: Iterable[str], mapping: HashMapping) -> set[int]:
    """B(S, M): the matchers a subscription may be placed on."""
    return {mapping(term) for term in terms}


def route(terms: Iterable[str], subscribed: Collection[str], mapping: HashMapping) -> set[int]:
    """K(P, M): the matchers a publication must reach (Eq. 3.1)."""
    return {mapping(term) for term in terms if term in subscribed}
