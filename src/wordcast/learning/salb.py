"""SALB, spread-aware load balancing (S³-TM §3.3, Alg. 1), and hot-word splitting (§5.1).

SALB assigns words to matchers one by one, most frequent first. For each candidate matcher i it
computes the extra load ``l`` the word would bring — the publications containing the word that do
not already reach i through another word mapped to i — and the utility ``-spread × imbalance`` as
if the word were mapped there, with imbalance the coefficient of variation of the matcher loads;
the best matcher wins, the first of equals.

The utility is computed exactly, in integers. The spread is the loads' sum over |P| (every
publication routed to a matcher adds one to its load), so with candidate i's loads L' (sum s,
sum of squares q) the spread is s/|P|, the imbalance sqrt(N·q - s²)/s, and the utility
-sqrt(N·q - s²)/|P|: Alg. 1 picks the matcher whose placement leaves the loads with the smallest
standard deviation, i.e. the smallest ``N·q - s²``. Comparing that integer keeps Alg. 1's "first of
equals" exact — in floating point, candidates whose utilities are equal (common at small N) came
out unequal by rounding, and the tie went to whichever rounded up.

All N candidates are evaluated at once with numpy: a boolean matrix records which publications
already reach which matcher, so ``l`` for every i is one column sum over the word's publications
(for a frequent word, summed eight matchers to a machine word: bytes of 0/1 add without carries
for up to 255 rows). A word seen in a single publication needs no gather at all: its row of the
matrix is the answer, and only two candidates can win — the first matcher it already reaches, and
the least loaded of the others.

The input is the word-to-publication bipartite graph as two parallel arrays of edges (publication,
word), words numbered by decreasing frequency — what the Spark job (``wordcast.spark_jobs.learn_mapping``)
collects; :func:`learn` accepts plain term sets too.

Hot words (§5.1): a word more frequent than half of a matcher's even share of the total word
frequency is split into k versions (copies ``word#j``), each carrying at most that much; a
publication carrying the word goes to one random copy of it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from wordcast.routing.mapping import COPY_SEPARATOR, LearnedMapping, copy_name

VERSION_SEPARATOR = COPY_SEPARATOR


@dataclass(frozen=True)
class SalbResult:
    """A learned word -> matcher mapping M, with the versions (copies) of split hot words."""

    matchers: int
    words: dict[str, int]
    versions: dict[str, int]
    frequencies: dict[str, int]  # of the hot words: LASP multicasts through the least frequent

    def version_name(self, word: str, version: int) -> str:
        return copy_name(word, version)

    def as_routing(self, version: int = 1) -> LearnedMapping:
        """What a router routes with, as mapping ``version``."""
        return LearnedMapping(version, self.matchers, self.words, self.versions, self.frequencies)

    @classmethod
    def from_assignment(
        cls,
        graph: Graph,
        split: Graph,
        versions: dict[str, int],
        assignment: np.ndarray,
        matchers: int,
    ) -> SalbResult:
        """The mapping of ``split`` (``graph`` after :func:`split_hot`) given each word's matcher."""
        frequency = graph.frequencies()
        index = {w: i for i, w in enumerate(graph.vocabulary) if w in versions}
        return cls(
            matchers,
            dict(zip(split.vocabulary, assignment.tolist(), strict=True)),
            versions,
            {w: int(frequency[index[w]]) for w in versions},
        )


@dataclass
class Graph:
    """The bipartite graph: edge k joins publication ``posts[k]`` and word ``words[k]``."""

    posts: np.ndarray  # int64
    words: np.ndarray  # int64, numbered by decreasing frequency
    vocabulary: list[str]
    n_posts: int

    @classmethod
    def from_publications(cls, publications: Iterable[Iterable[str]]) -> Graph:
        post_ids: list[int] = []
        names: list[str] = []
        n_posts = 0
        for index, publication in enumerate(publications):
            for word in set(publication):
                post_ids.append(index)
                names.append(word)
            n_posts = index + 1
        vocabulary, codes, counts = np.unique(
            np.array(names, dtype=object), return_inverse=True, return_counts=True
        )
        order = np.lexsort((vocabulary.astype(str), -counts))  # decreasing frequency, then name
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        return cls(
            np.array(post_ids, dtype=np.int64),
            rank[codes].astype(np.int64),
            [str(w) for w in vocabulary[order]],
            n_posts,
        )

    def frequencies(self) -> np.ndarray:
        return np.bincount(self.words, minlength=len(self.vocabulary))

    @cached_property
    def by_word(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, bounds): word w's publications are ``rows[bounds[w]:bounds[w + 1]]``. Kept, as
        SALB and the refinement after it (:mod:`wordcast.learning.refine`) both walk the graph this way."""
        order = np.argsort(self.words, kind="stable")
        bounds = np.searchsorted(self.words[order], np.arange(len(self.vocabulary) + 1))
        return self.posts[order], bounds


def split_hot(graph: Graph, matchers: int, seed: int = 0) -> tuple[Graph, dict[str, int]]:
    """§5.1: each hot word's edges go to a random one of its k copies; returns the new graph."""
    frequency = graph.frequencies()
    limit = 0.5 * frequency.sum() / matchers
    hot = np.flatnonzero(frequency > limit) if limit else np.array([], dtype=np.int64)
    if not len(hot):
        return graph, {}
    copies = {int(w): math.ceil(frequency[w] / limit) for w in hot}
    rng = np.random.default_rng(seed)
    words = graph.words.copy()
    vocabulary = list(graph.vocabulary)
    names: dict[str, int] = {}
    for word, k in copies.items():
        edges = np.flatnonzero(graph.words == word)
        first = len(vocabulary)
        vocabulary += [copy_name(graph.vocabulary[word], j) for j in range(k)]
        words[edges] = first + rng.integers(0, k, size=len(edges))
        names[graph.vocabulary[word]] = k
    # Renumber by decreasing frequency again: the copies take their places among the words.
    counts = np.bincount(words, minlength=len(vocabulary))
    order = np.lexsort((np.arange(len(vocabulary)), -counts))
    order = order[counts[order] > 0]
    rank = np.full(len(vocabulary), -1, dtype=np.int64)
    rank[order] = np.arange(len(order))
    return Graph(graph.posts, rank[words], [vocabulary[i] for i in order], graph.n_posts), names


_PACKED_FROM = 64  # below this many publications the plain column sum is quicker


def _reached_counts(reaches: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """How many of the publications ``rows`` already reach each matcher (column sums)."""
    if len(rows) < _PACKED_FROM or reaches.shape[1] % 8:
        column_sums: np.ndarray = reaches[rows].sum(axis=0, dtype=np.int64)
        return column_sums
    packed = reaches.view(np.uint64)[rows]  # eight matchers' 0/1 bytes per machine word
    counts = np.zeros(reaches.shape[1], dtype=np.int64)
    for start in range(0, len(rows), 255):  # a byte holds at most 255 ones
        counts += packed[start : start + 255].sum(axis=0, dtype=np.uint64).view(np.uint8)
    return counts


def _single_post_choice(
    reached: np.ndarray,
    loads: np.ndarray,
    unreachable: float,
    load_sum: int,
    load_squares: int,
    matchers: int,
) -> tuple[int, int]:
    """Alg. 1's choice (matcher, extra load) for a word of one publication, which ``reached``
    says where it is routed already: the same first-of-equals answer as the full key vector."""
    first_reached = int(reached.argmax())
    has_reached = bool(reached[first_reached])
    least_loaded = int(np.where(reached, unreachable, loads).argmin())
    if reached[least_loaded]:  # the publication reaches every matcher
        return first_reached, 0
    if not has_reached:
        return least_loaded, 1
    stay = matchers * load_squares - load_sum * load_sum
    load = int(loads[least_loaded])
    grow = matchers * (load_squares + 2 * load + 1) - (load_sum + 1) ** 2
    if stay < grow or (stay == grow and first_reached < least_loaded):
        return first_reached, 0
    return least_loaded, 1


def salb_graph(graph: Graph, matchers: int) -> np.ndarray:
    """Alg. 1: the matcher of every word of ``graph`` (indexed like its vocabulary)."""
    if matchers < 1:
        raise ValueError("at least one matcher is needed")
    n_words = len(graph.vocabulary)
    rows_of, bounds = graph.by_word
    # A load is at most |P| and their sum at most the edges, so N·q <= N·|P|·edges and s² <=
    # edges². Past 64 bits (tens of millions of publications) the key is computed in floating
    # point instead, where rounding may again decide between equal utilities.
    edges = float(len(rows_of))
    exact = max(matchers * float(graph.n_posts) * edges, edges * edges) < 2.0**62
    dtype = np.int64 if exact else np.float64

    reaches = np.zeros((graph.n_posts, matchers), dtype=bool)  # publication already routed there
    loads = np.zeros(matchers, dtype=dtype)
    twice_loads = np.zeros(matchers, dtype=dtype)
    load_sum = load_squares = 0  # of the loads: the key needs no pass over them
    assignment = np.zeros(n_words, dtype=np.int64)
    unreachable = np.iinfo(np.int64).max if exact else np.inf
    for word in range(n_words):
        start, stop = bounds[word], bounds[word + 1]
        if stop - start == 1:
            # One publication: a matcher it reaches gains nothing (all share one key), one it
            # does not gains 1, the least loaded of those the least; only two candidates remain.
            row = rows_of[start]
            reached = reaches[row]
            best, added = _single_post_choice(
                reached, loads, unreachable, load_sum, load_squares, matchers
            )
        else:
            rows = rows_of[start:stop]
            row = -1
            extra = (stop - start) - _reached_counts(reaches, rows).astype(dtype, copy=False)
            total = load_sum + extra
            # N·q - s² for each candidate: -N²·|P|²·utility² of Alg. 1, so the smallest wins.
            key = matchers * (load_squares + extra * (twice_loads + extra)) - total * total
            best = int(np.argmin(key))  # first of equals: deterministic
            added = int(extra[best])
        assignment[word] = best
        load_squares += added * (2 * int(loads[best]) + added)  # Python ints: no overflow
        load_sum += added
        loads[best] += added
        twice_loads[best] += 2 * added
        if row >= 0:
            reaches[row, best] = True
        else:
            reaches[rows, best] = True
    return assignment


def salb(publications: Sequence[Iterable[str]], matchers: int) -> dict[str, int]:
    """Alg. 1 over the word-to-publication bipartite graph of ``publications``."""
    graph = Graph.from_publications(publications)
    assignment = salb_graph(graph, matchers)
    return dict(zip(graph.vocabulary, assignment.tolist(), strict=True))


def learn_graph(graph: Graph, matchers: int, seed: int = 0) -> SalbResult:
    """Hot-word splitting, then SALB: the mapping the nightly job publishes."""
    split, versions = split_hot(graph, matchers, seed)
    return SalbResult.from_assignment(graph, split, versions, salb_graph(split, matchers), matchers)


def learn(publications: Sequence[Iterable[str]], matchers: int, seed: int = 0) -> SalbResult:
    return learn_graph(Graph.from_publications(publications), matchers, seed)


def split_hot_words(
    publications: Sequence[Iterable[str]], matchers: int, seed: int = 0
) -> tuple[list[list[str]], dict[str, int]]:
    """§5.1 on term sets: each publication's hot words replaced by a random copy."""
    graph = Graph.from_publications(publications)
    split, versions = split_hot(graph, matchers, seed)
    posts: list[list[str]] = [[] for _ in range(graph.n_posts)]
    for post, word in zip(split.posts.tolist(), split.words.tolist(), strict=True):
        posts[post].append(split.vocabulary[word])
    return [sorted(p) for p in posts], versions


def loads(publications: Sequence[Iterable[str]], words: dict[str, int], matchers: int) -> list[int]:
    """Publications routed to each matcher under a mapping (Eq. 3.1, every word subscribed)."""
    counts = [0] * matchers
    for post in publications:
        for matcher in {words[w] for w in post if w in words}:
            counts[matcher] += 1
    return counts
