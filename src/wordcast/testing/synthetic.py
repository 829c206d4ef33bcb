"""The synthetic workload generator of the web-syndication thesis (§3.3, Alg. 7).

A vocabulary of ``size`` terms gets Zipf frequencies (rank r has weight 1 / r^s). Elements
(subscriptions or items) draw a length from a length generator, then that many *distinct* terms,
sampled in one of three modes: ``empirical`` (by frequency), ``uniform`` (frequencies ignored) or
``anti-correlated`` (by inverse frequency).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

DISTRIBUTIONS = ("empirical", "uniform", "anti-correlated")


def zipf_vocabulary(size: int, exponent: float = 1.0, prefix: str = "v") -> list[tuple[str, float]]:
    """``size`` terms with Zipf frequencies, most frequent first."""
    return [(f"{prefix}{rank}", 1.0 / rank**exponent) for rank in range(1, size + 1)]


def uniform_length(low: int, high: int) -> Callable[[random.Random], int]:
    return lambda rng: rng.randint(low, high)


def generate(
    vocabulary: list[tuple[str, float]],
    count: int,
    length: Callable[[random.Random], int],
    distribution: str = "empirical",
    seed: int = 0,
) -> list[tuple[str, ...]]:
    """Alg. 7: ``count`` elements of distinct terms drawn from ``vocabulary``."""
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {distribution!r}; choose one of {DISTRIBUTIONS}")
    rng = random.Random(seed)
    terms = [term for term, _ in vocabulary]
    if distribution == "empirical":
        weights = [freq for _, freq in vocabulary]
    elif distribution == "anti-correlated":
        weights = [1.0 / freq for _, freq in vocabulary]
    else:
        weights = [1.0] * len(terms)
    cumulative = list(itertools.accumulate(weights))
    out: list[tuple[str, ...]] = []
    for _ in range(count):
        wanted = min(length(rng), len(terms))
        element: set[str] = set()
        while len(element) < wanted:
            element.update(rng.choices(terms, cum_weights=cumulative, k=wanted - len(element)))
        out.append(tuple(element))
    return out
