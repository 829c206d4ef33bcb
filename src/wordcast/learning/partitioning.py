"""Word-network partitioning baselines for the routing mapping (S³-TM §3.2, Fig. 3.1), with METIS.

The word network has the words as vertices and an edge between two words that occur together in
some publication, weighted by their co-occurrence frequency f(w1, w2). METIS (through pymetis)
partitions it into N parts, one per matcher; the variants differ only in the weights:

``gC``     cut minimisation: unweighted edges, no load balancing (unit vertex weights)
``gFC``    co-frequency cut minimisation: edges weighted by f(w1, w2), unit vertex weights
``gFCL``   as gFC, balancing the vertex load f(w) (overestimates a part's load: co-occurrences
           are counted once per word)
``gNFCL``  as gFC, balancing the normalised vertex load l(w) = f(w) / (1 + f_n(w) / f(w)),
           f_n(w) being the sum of w's co-occurrence frequencies

Which of METIS's routines partitions is not in the paper (it used METIS 5.1.0). By default it is
pymetis's choice: recursive bisection up to 8 parts, k-way above; ``method="kway"`` is gpmetis's
own default at every N. ``bench.salb_checks`` compares the two.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import combinations

import numpy as np

VARIANTS = ("gC", "gFC", "gFCL", "gNFCL")


def word_network(
    publications: Iterable[Iterable[str]],
) -> tuple[Counter[str], Counter[tuple[str, str]]]:
    """Word frequencies and co-occurrence counts (pairs ordered a < b) of term sets."""
    frequency: Counter[str] = Counter()
    pairs: Counter[tuple[str, str]] = Counter()
    for publication in publications:
        words = sorted(set(publication))
        frequency.update(words)
        pairs.update(combinations(words, 2))
    return frequency, pairs


@dataclass(frozen=True)
class WordNetwork:
    """The word network as arrays: the words sorted by name, their frequencies, and one edge
    (``left[k]``, ``right[k]``, ``weights[k]``) per co-occurring pair, ``left < right`` as word
    indices, edges sorted by (left, right) — the order METIS reads them in decides its answer."""

    words: list[str]
    frequencies: np.ndarray
    left: np.ndarray
    right: np.ndarray
    weights: np.ndarray

    @classmethod
    def from_counts(
        cls, frequencies: Mapping[str, int], pairs: Mapping[tuple[str, str], int]
    ) -> WordNetwork:
        words = sorted(frequencies)
        index = {w: i for i, w in enumerate(words)}
        count = len(pairs)
        left = np.fromiter((index[a] for a, _ in pairs), dtype=np.int64, count=count)
        right = np.fromiter((index[b] for _, b in pairs), dtype=np.int64, count=count)
        weights = np.fromiter(pairs.values(), dtype=np.int64, count=count)
        return cls.from_edges(
            words, np.array([frequencies[w] for w in words]), left, right, weights
        )

    @classmethod
    def from_edges(
        cls,
        words: list[str],
        frequencies: np.ndarray,
        left: np.ndarray,
        right: np.ndarray,
        weights: np.ndarray,
    ) -> WordNetwork:
        """The network of edges given in any order, each pair once with ``left < right``."""
        if len(left) and not (left < right).all():
            raise ValueError("every edge must join a word to one after it by name")
        order = np.lexsort((right, left))
        return cls(words, frequencies, left[order], right[order], weights[order])


METHODS = ("auto", "kway", "recursive")


def partition(
    variant: str,
    frequencies: Mapping[str, int],
    pairs: Mapping[tuple[str, str], int],
    matchers: int,
    seed: int = 0,
    method: str = "auto",
) -> dict[str, int]:
    """The mapping word -> matcher that METIS finds for one of :data:`VARIANTS`."""
    network = WordNetwork.from_counts(frequencies, pairs)
    return partition_network(variant, network, matchers, seed, method)


def partition_network(
    variant: str, network: WordNetwork, matchers: int, seed: int = 0, method: str = "auto"
) -> dict[str, int]:
    """:func:`partition` on a network already in arrays (what the Spark job collects)."""
    import pymetis  # a compiled extension: loaded only when a baseline is asked for

    if variant not in VARIANTS:
        raise ValueError(f"unknown partitioning {variant!r}; choose one of {', '.join(VARIANTS)}")
    if method not in METHODS:
        raise ValueError(f"unknown METIS method {method!r}; choose one of {', '.join(METHODS)}")
    words = network.words
    if matchers == 1 or not words:
        return dict.fromkeys(words, 0)
    n = len(words)
    left, right, weight = network.left, network.right, network.weights
    # CSR of the undirected graph: both directions of every edge.
    source = np.concatenate([left, right])
    target = np.concatenate([right, left])
    both = np.concatenate([weight, weight])
    order = np.argsort(source, kind="stable")
    adjncy, eweights = target[order], both[order]
    xadj = np.concatenate([[0], np.cumsum(np.bincount(source, minlength=n))])
    f = network.frequencies.astype(np.float64)
    vweights: np.ndarray | None = None
    if variant == "gFCL":
        vweights = f
    elif variant == "gNFCL":
        f_n = np.bincount(source, weights=both, minlength=n)
        vweights = f / (1.0 + f_n / f)
    options = pymetis.Options(seed=seed)
    result = pymetis.part_graph(
        matchers,
        pymetis.CSRAdjacency(xadj.tolist(), adjncy.tolist()),
        eweights=None if variant == "gC" else eweights.tolist(),
        vweights=None
        if vweights is None
        else np.maximum(np.rint(vweights), 1).astype(int).tolist(),
        recursive=None if method == "auto" else method == "recursive",
        options=options,
    )
    return dict(zip(words, (int(p) for p in result.vertex_part), strict=True))
