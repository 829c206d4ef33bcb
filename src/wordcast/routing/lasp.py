"""LASP, load-aware subscription placement (S³-TM §4.2, Alg. 2).

A subscription S may go to any eligible matcher B(S, M) = {M(w) : w ∈ S}. For each, LASP computes
the extra matching load S brings to matcher i — the |S \\ H(i)| words it would add to i's trie,
through the linear cost model f the paper fits on trie operations against unique words (Fig. 4.1)
— and the imbalance (coefficient of variation) of the loads ``f(|H(j)|)`` with S placed on i; the
utility is ``-extra × imbalance`` and the best eligible matcher wins. Grouping similar
subscriptions keeps the tries small, and the imbalance term keeps them even.

Alg. 2 writes the extra load as ``f(|S \\ H(i)|)``, which is the increase
``f(|H(i)| + |S \\ H(i)|) - f(|H(i)|)`` for an f through the origin. The fitted f has an intercept
(a publication's probes at the trie root cost something even in an empty trie), and charging it
to every placement would make a matcher that already holds all of S look as costly as one that
must grow: LASP would stop grouping. So the extra load is the increase of f.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class LinearCost:
    """f(x) = slope · x + intercept: matching cost against a trie of x unique words."""

    slope: float = 1.0
    intercept: float = 0.0

    def __call__(self, unique_words: float) -> float:
        return self.slope * unique_words + self.intercept


UNIT_COST = LinearCost()


def place(
    terms: Iterable[str],
    mapping: Callable[[str], int],
    word_maps: Sequence[Collection[str]],
    cost: Callable[[float], float] = UNIT_COST,
) -> int:
    """The matcher LASP places a subscription on; ``word_maps[i]`` is H(i)."""
    words = set(terms)
    if not words:
        raise ValueError("a subscription needs at least one term")
    eligible = sorted({mapping(w) for w in words})
    sizes = [len(h) for h in word_maps]
    known = {i: sum(1 for w in words if w in word_maps[i]) for i in eligible}
    return place_among(len(words), eligible, sizes, known, cost)


def place_among(
    words: int,
    eligible: Iterable[int],
    sizes: Sequence[int],
    known: Mapping[int, int],
    cost: Callable[[float], float] = UNIT_COST,
) -> int:
    """Alg. 2's loop: a subscription of ``words`` unique words, ``known[i]`` of them in H(i) already,
    ``sizes[i]`` = |H(i)|; the best of the ``eligible`` matchers (the first of equals)."""
    base = [cost(size) for size in sizes]
    options = ((i, sizes[i], words - known.get(i, 0), base[i]) for i in sorted(eligible))
    return _best(options, sum(base), sum(x * x for x in base), len(base), cost)


def _best(
    options: Iterable[tuple[int, int, int, float]],
    total: float,
    squares: float,
    n: int,
    cost: Callable[[float], float],
) -> int:
    """Alg. 2's utility for each (matcher, |H(i)|, new words, f(|H(i)|)); the first best wins.

    ``total`` and ``squares`` are the sum and the sum of squares of every matcher's f(|H(j)|), so
    the imbalance with S placed on i needs no pass over the other matchers.
    """
    best, best_utility = -1, -math.inf
    for i, size, new_words, old in options:
        placed = cost(size + new_words)
        mean = (total - old + placed) / n
        variance = max((squares - old * old + placed * placed) / n - mean * mean, 0.0)
        imbalance = math.sqrt(variance) / mean if mean > 0 else 0.0
        utility = -(placed - old) * imbalance
        if utility > best_utility:
            best, best_utility = i, utility
    if best < 0:
        raise ValueError("no eligible matcher")
    return best


class LaspPlacer:
    """Alg. 2 for a stream of subscriptions: keeps H(i) and the running sums of f(|H(i)|), so each
    placement costs O(|S| · |B(S, M)|) instead of a pass over every matcher."""

    def __init__(self, matchers: int, cost: Callable[[float], float] = UNIT_COST) -> None:
        self.word_maps: list[set[str]] = [set() for _ in range(matchers)]
        self.cost = cost
        base = cost(0)
        self._loads = [base] * matchers
        self._total, self._squares = base * matchers, base * base * matchers

    def place(self, words: Collection[str], eligible: Iterable[int]) -> int:
        maps, loads = self.word_maps, self._loads
        options = (
            (i, len(maps[i]), sum(1 for w in words if w not in maps[i]), loads[i])
            for i in sorted(eligible)
        )
        return _best(options, self._total, self._squares, len(loads), self.cost)

    def add(self, matcher: int, words: Iterable[str]) -> None:
        self.word_maps[matcher].update(words)
        old, new = self._loads[matcher], self.cost(len(self.word_maps[matcher]))
        self._loads[matcher] = new
        self._total += new - old
        self._squares += new * new - old * old
