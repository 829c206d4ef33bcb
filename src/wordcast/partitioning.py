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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
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


def partition(
    variant: str,
    frequencies: Mapping[str, int],
    pairs: Mapping[tuple[str, str], int],
    matchers: int,
    seed: int = 0,
) -> dict[str, int]:
    """The mapping word -> matcher that METIS finds for one of :data:`VARIANTS`."""
    import pymetis  # a compiled extension: loaded only when a baseline is asked for

    if variant not in VARIANTS:
        raise ValueError(f"unknown partitioning {variant!r}; choose one of {', '.join(VARIANTS)}")
    words = sorted(frequencies)
    if matchers == 1 or not words:
        return dict.fromkeys(words, 0)
    index = {w: i for i, w in enumerate(words)}
    n = len(words)
    edges = sorted(pairs.items())  # METIS's answer depends on the order it reads the edges in
    left = np.fromiter((index[a] for (a, _), _ in edges), dtype=np.int64, count=len(edges))
    right = np.fromiter((index[b] for (_, b), _ in edges), dtype=np.int64, count=len(edges))
    weight = np.fromiter((w for _, w in edges), dtype=np.int64, count=len(edges))
    # CSR of the undirected graph: both directions of every edge.
    source = np.concatenate([left, right])
    target = np.concatenate([right, left])
    both = np.concatenate([weight, weight])
    order = np.argsort(source, kind="stable")
    adjncy, eweights = target[order], both[order]
    xadj = np.concatenate([[0], np.cumsum(np.bincount(source, minlength=n))])
    f = np.array([frequencies[w] for w in words], dtype=np.float64)
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
        options=options,
    )
    return dict(zip(words, (int(p) for p in result.vertex_part), strict=True))
