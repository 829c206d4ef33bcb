"""Local refinement of a learned mapping on SALB's exact load model (wordcast's extension).

Not in the seeds. S³-TM's Alg. 1 (:mod:`wordcast.learning.salb`) scores a candidate with
``-spread × imbalance`` using the coefficient of variation; as the ``salb`` docstring shows, that
utility is ``-N·σ(L')/|P|``, so the greedy evens out the loads and leaves the spread (the size of a
publication's multicast) to chance: on posts where co-occurring words matter (pypi summaries: 5.5
words a post against the paper's 4 a tweet) METIS-based gFCL ends up with the lower maximum load at
small N.

What the paper wants is Eq. 3.6: the smallest maximum load ``max_i L(i, M)`` (Eq. 3.7 with Eq. 3.4's
max/avg imbalance is the same thing: R·B = N·max L / |P|). This module takes a mapping (SALB's) and
moves single words between matchers while that lowers ``Φ = Σ_i (L_i / L̄)^p``, a smooth stand-in for
the maximum: Φ^(1/p) is the p-norm of the loads, which lies between max L and N^(1/p)·max L. So p
is large enough that the busiest matchers dominate, and small enough that lowering any matcher's
load, which is lowering the spread, still counts. p = 32 keeps the gap within 7% at N = 8 and 19%
at N = 256. With p = 8 (30% at N = 8) a move could lower Φ by shrinking many loads while the
busiest grew; on Debian's long descriptions that gathered words onto a few matchers and left the
mapping behind SALB's (BENCHMARKS.md, "Refining SALB's mapping"). The loads are the bipartite graph's
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

from wordcast.learning.salb import Graph, SalbResult, salb_graph, split_hot

PASSES = 3  # the benchmark's gains flatten after two or three passes (BENCHMARKS.md)
_TOLERANCE = 1e-12  # Φ terms are near 1: below this a "gain" is rounding


@dataclass(frozen=True)
class Refinement:
    """What :func:`refine` returns."""

    assignment: np.ndarray  # the matcher of every word, indexed like the graph's vocabulary
    moves: tuple[int, ...]  # words moved in each pass


def refine(graph: Graph, assignment: np.ndarray, matchers: int, passes: int = PASSES) -> Refinement:
    """Move words of ``graph`` between matchers while each move lowers Σ (L_i / L̄)^32."""
    if matchers < 1:
        raise ValueError("at least one matcher is needed")
    if passes < 0:
        raise ValueError("passes must be at least 0")
    if len(assignment) != len(graph.vocabulary):
        raise ValueError("the assignment must give a matcher for every word of the graph")
    assignment = np.array(assignment, dtype=np.int64)
    if len(assignment) and (assignment.min() < 0 or assignment.max() >= matchers):
        raise ValueError(f"the assignment names matchers outside 0..{matchers - 1}")
    state = _Loads(graph, assignment, matchers)
    rows_of, bounds = graph.by_word
    moves: list[int] = []
    for _ in range(passes):
        if not state.loads.sum():
            break
        state.rescale()
        moved = 0
        for word in range(len(graph.vocabulary)):
            start, stop = bounds[word], bounds[word + 1]
            rows: np.ndarray | int = rows_of[start] if stop - start == 1 else rows_of[start:stop]
            here = int(assignment[word])
            move = state.best_move(rows, here)
            if move is not None:
                state.apply(rows, here, *move)
                assignment[word] = move[0]
                moved += 1
        moves.append(moved)
        if not moved:
            break
    return Refinement(assignment, tuple(moves))


class _Loads:
    """The loads of a mapping, and per publication and matcher its words mapped there."""

    def __init__(self, graph: Graph, assignment: np.ndarray, matchers: int) -> None:
        longest = int(np.bincount(graph.posts).max()) if len(graph.posts) else 0
        dtype = np.int16 if longest < np.iinfo(np.int16).max else np.int32
        self.counts = np.zeros((graph.n_posts, matchers), dtype=dtype)
        np.add.at(self.counts, (graph.posts, assignment[graph.words]), 1)
        self.loads = (self.counts > 0).sum(axis=0).astype(np.float64)
        self.scale = 1.0
        self.terms = _phi(self.loads)

    def rescale(self) -> None:
        """Φ's normalisation, once a pass: any positive constant gives the same moves."""
        self.scale = 1.0 / self.loads.mean()
        self.terms = _phi(self.loads * self.scale)  # each matcher's term, kept up to date

    def best_move(self, rows: np.ndarray | int, here: int) -> tuple[int, int, int] | None:
        """(matcher, gain, cost) of the move of a word of ``rows`` off ``here`` that lowers Φ the
        most, or None if none lowers it."""
        loads, scale, terms = self.loads, self.scale, self.terms
        if isinstance(rows, np.ndarray):
            gain = int(np.count_nonzero(self.counts[rows, here] == 1))
            if not gain:
                return None  # the word's publications stay on ``here``: moving only adds load
            added = len(rows) - np.count_nonzero(self.counts[rows], axis=0)
            deltas = _phi((loads + added) * scale) - terms
            deltas += _phi((loads[here] - gain) * scale) - terms[here]
            deltas[here] = 0.0
            there = int(np.argmin(deltas))
            delta, cost = float(deltas[there]), int(added[there])
        else:
            if self.counts[rows, here] != 1:
                return None  # the publication stays on ``here`` through another word
            there, cost = _single_post_move(self.counts[rows], here, loads)
            gain = 1
            delta = _phi((loads[here] - 1) * scale) - terms[here]
            delta += _phi((loads[there] + cost) * scale) - terms[there]
        return (there, gain, cost) if delta < -_TOLERANCE else None

    def apply(self, rows: np.ndarray | int, here: int, there: int, gain: int, cost: int) -> None:
        self.counts[rows, here] -= 1
        self.counts[rows, there] += 1
        self.loads[here] -= gain
        self.loads[there] += cost
        self.terms[here] = _phi(self.loads[here] * self.scale)
        self.terms[there] = _phi(self.loads[there] * self.scale)


def _phi(x: Any) -> Any:
    """x^32 by squaring, on a number or an array: much quicker than a general power."""
    for _ in range(5):
        x = x * x
    return x


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


def learn_refined(
    graph: Graph,
    matchers: int,
    seed: int = 0,
    passes: int = PASSES,
    salb: SalbResult | None = None,
) -> SalbResult:
    """Hot-word splitting, SALB, then refinement: ``--algorithm salb-refined``.

    ``salb``, if given, is SALB's mapping of the same graph, matchers and seed (``learn_graph``'s
    answer), refined instead of learning it again.
    """
    split, versions = split_hot(graph, matchers, seed)
    if salb is None:
        start = salb_graph(split, matchers)
    elif salb.matchers != matchers or salb.versions != versions:
        raise ValueError("the SALB mapping to refine was learned for another split or cluster")
    else:
        start = np.array([salb.words[w] for w in split.vocabulary], dtype=np.int64)
    refined = refine(split, start, matchers, passes)
    return SalbResult.from_assignment(graph, split, versions, refined.assignment, matchers)
