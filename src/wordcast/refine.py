"""Local refinement of a learned mapping on SALB's exact load model (wordcast's extension).

Not in the seeds. S³-TM's Alg. 1 (:mod:`wordcast.salb`) scores a candidate with
``-spread × imbalance`` using the coefficient of variation; as the ``salb`` docstring shows, that
utility is ``-N·σ(L')/|P|``, so the greedy minimises the spread of the loads and not the spread of
the publications: on posts where co-occurring words matter (pypi summaries: 5.5 words a post against
the paper's 4 a tweet) METIS-based gFCL ends up with the lower maximum load at small N.

What the paper wants is Eq. 3.6: the smallest maximum load ``max_i L(i, M)`` (Eq. 3.7 with Eq. 3.4's
max/avg imbalance is the same thing: R·B = N·max L / |P|). This module takes a mapping (SALB's) and
moves single words between matchers while that lowers ``Φ = Σ_i (L_i / L̄)^p``, a smooth stand-in for
the maximum (p = 8: large enough that the busiest matchers dominate, small enough that lowering any
matcher's load, which is lowering the spread, still counts). The loads are the bipartite graph's
exact ones (Eq. 3.3: publications routed, not word frequencies), kept as a count per publication and
matcher of the publication's words mapped there:

- moving word w off matcher i frees ``gain`` = the publications of w with no other word on i;
- moving it to j adds ``cost_j`` = the publications of w with no word on j yet.

A pass visits every word once, most frequent first, and makes the move that lowers Φ the most (the
first of equals); passes repeat until none moves a word or ``passes`` is reached. Every move lowers
Φ, so a pass cannot make the mapping worse by Φ, and a converged mapping is a local optimum for
single-word moves (the tests check both against brute-force loads). This is the vertex-move
refinement that graph partitioners run after their coarse phase (Fiduccia–Mattheyses), applied to the
load SALB models exactly instead of an edge cut.

Hot-word copies (§5.1) are ordinary words here: refinement runs on the graph after splitting.
Memory: one small integer per publication and matcher (1M publications × 256 matchers: 512 MB).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .salb import Graph, Mapping, salb_graph, split_hot

PASSES = 3  # the benchmark's gains flatten after two or three passes (BENCHMARKS.md)
_TOLERANCE = 1e-12  # Φ terms are near 1: below this a "gain" is rounding


@dataclass(frozen=True)
class Refinement:
    assignment: np.ndarray  # the matcher of every word, indexed like the graph's vocabulary
    moves: tuple[int, ...]  # words moved in each pass


def _word_rows(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(graph.words, kind="stable")
    bounds = np.searchsorted(graph.words[order], np.arange(len(graph.vocabulary) + 1))
    return graph.posts[order], bounds


def refine(graph: Graph, assignment: np.ndarray, matchers: int, passes: int = PASSES) -> Refinement:
    """Move words of ``graph`` between matchers while each move lowers Σ (L_i / L̄)^8."""
    if matchers < 1:
        raise ValueError("at least one matcher is needed")
    if passes < 0:
        raise ValueError("passes must be at least 0")
    if len(assignment) != len(graph.vocabulary):
        raise ValueError("the assignment must give a matcher for every word of the graph")
    assignment = np.array(assignment, dtype=np.int64)
    if len(assignment) and (assignment.min() < 0 or assignment.max() >= matchers):
        raise ValueError(f"the assignment names matchers outside 0..{matchers - 1}")
    longest = int(np.bincount(graph.posts).max()) if len(graph.posts) else 0
    dtype = np.int16 if longest < np.iinfo(np.int16).max else np.int32
    counts = np.zeros((graph.n_posts, matchers), dtype=dtype)  # the post's words on each matcher
    np.add.at(counts, (graph.posts, assignment[graph.words]), 1)
    loads = (counts > 0).sum(axis=0).astype(np.float64)
    rows_of, bounds = _word_rows(graph)
    moves: list[int] = []
    for _ in range(passes):
        if not loads.sum():
            break
        scale = 1.0 / loads.mean()  # Φ's normalisation: any positive constant gives the same moves
        terms = _phi(loads * scale)  # each matcher's term of Φ, kept up to date move by move
        moved = 0
        for word in range(len(graph.vocabulary)):
            start, stop = bounds[word], bounds[word + 1]
            here = int(assignment[word])
            if stop - start == 1:
                row = rows_of[start]
                if counts[row, here] != 1:
                    continue  # the publication stays on ``here`` through another word
                there, cost = _single_post_move(counts[row], here, loads)
                gain = 1
                relieved = _phi((loads[here] - 1) * scale) - terms[here]
                delta = relieved + _phi((loads[there] + cost) * scale) - terms[there]
                if delta >= -_TOLERANCE:
                    continue
                rows: np.ndarray | int = row
            else:
                rows = rows_of[start:stop]
                gain = int(np.count_nonzero(counts[rows, here] == 1))
                if not gain:
                    continue  # the word's publications stay on ``here``: moving only adds load
                added = (stop - start) - np.count_nonzero(counts[rows], axis=0)
                deltas = _phi((loads + added) * scale) - terms
                deltas += _phi((loads[here] - gain) * scale) - terms[here]
                deltas[here] = 0.0
                there = int(np.argmin(deltas))
                if deltas[there] >= -_TOLERANCE:
                    continue
                cost = int(added[there])
            counts[rows, here] -= 1
            counts[rows, there] += 1
            loads[here] -= gain
            loads[there] += cost
            terms[here] = _phi(loads[here] * scale)
            terms[there] = _phi(loads[there] * scale)
            assignment[word] = there
            moved += 1
        moves.append(moved)
        if not moved:
            break
    return Refinement(assignment, tuple(moves))


def _phi(x: Any) -> Any:
    """x^8 by squaring, on a number or an array: much quicker than a general power."""
    x = x * x
    x = x * x
    return x * x


def _single_post_move(reached: np.ndarray, here: int, loads: np.ndarray) -> tuple[int, int]:
    """The only move worth weighing for a word whose one publication reaches ``here`` through it
    alone: (matcher, cost). A matcher the publication already reaches takes the word for nothing
    (the first of those: all are equal); failing that, the least loaded other matcher takes one
    publication more."""
    elsewhere = np.flatnonzero(reached)
    elsewhere = elsewhere[elsewhere != here]
    if len(elsewhere):
        return int(elsewhere[0]), 0
    candidates = loads.copy()
    candidates[here] = np.inf
    return int(np.argmin(candidates)), 1


def learn_refined(graph: Graph, matchers: int, seed: int = 0, passes: int = PASSES) -> Mapping:
    """Hot-word splitting, SALB, then refinement: ``--algorithm salb-refined``."""
    split, versions = split_hot(graph, matchers, seed)
    refined = refine(split, salb_graph(split, matchers), matchers, passes)
    return Mapping.from_assignment(graph, split, versions, refined.assignment, matchers)
