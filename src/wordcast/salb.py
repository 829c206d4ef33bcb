"""SALB, spread-aware load balancing (S³-TM §3.3, Alg. 1), and hot-word splitting (§5.1).

SALB assigns words to matchers one by one, most frequent first. For each candidate matcher i it
computes the extra load ``l`` the word would bring — the publications containing the word that do
not already reach i through another word mapped to i — and the utility ``-spread × imbalance`` as
if the word were mapped there, with imbalance the coefficient of variation of the matcher loads;
the best matcher wins. All N candidates are evaluated at once with numpy: a boolean matrix records
which publications already reach which matcher, so ``l`` for every i is one column sum over the
word's publications, and the loads' variance for every candidate comes from running sums. A word
seen in a single publication needs no gather at all: its row of the matrix is the answer.

The input is the word-to-publication bipartite graph as two parallel arrays of edges (publication,
word), words numbered by decreasing frequency — what the Spark job (``spark_jobs.learn_mapping``)
collects; :func:`learn` accepts plain term sets too.

Hot words (§5.1): a word more frequent than half of a matcher's even share of the total word
frequency is split into k versions (copies ``word#j``), each carrying at most that much; a
publication carrying the word goes to one random copy of it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .routing import COPY_SEPARATOR, copy_name

VERSION_SEPARATOR = COPY_SEPARATOR


@dataclass(frozen=True)
class Mapping:
    """A learned word -> matcher mapping M, with the versions (copies) of split hot words."""

    matchers: int
    words: dict[str, int]
    versions: dict[str, int]
    frequencies: dict[str, int]  # of the hot words: LASP multicasts through the least frequent

    def version_name(self, word: str, version: int) -> str:
        return copy_name(word, version)


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


def salb_graph(graph: Graph, matchers: int) -> np.ndarray:
    """Alg. 1: the matcher of every word of ``graph`` (indexed like its vocabulary)."""
    if matchers < 1:
        raise ValueError("at least one matcher is needed")
    n_words = len(graph.vocabulary)
    order = np.argsort(graph.words, kind="stable")
    rows_of = graph.posts[order]
    bounds = np.searchsorted(graph.words[order], np.arange(n_words + 1))

    reaches = np.zeros((graph.n_posts, matchers), dtype=bool)  # publication already routed there
    loads = np.zeros(matchers, dtype=np.float64)
    load_sum = load_squares = spread = 0.0  # running sums: the variance needs no pass over loads
    assignment = np.zeros(n_words, dtype=np.int64)
    n = float(matchers)
    per_post = 1.0 / max(graph.n_posts, 1)
    for word in range(n_words):
        start, stop = bounds[word], bounds[word + 1]
        if stop - start == 1:
            row = rows_of[start]
            extra = 1.0 - reaches[row]
        else:
            rows = rows_of[start:stop]
            row = -1
            extra = (stop - start) - reaches[rows].sum(axis=0)
        mean = (load_sum + extra) / n
        squares = load_squares + extra * (2.0 * loads + extra)
        imbalance = np.sqrt(np.maximum(squares / n - mean * mean, 0.0)) / mean
        utility = -(spread + extra * per_post) * imbalance
        best = int(np.argmax(utility))  # first of equals: deterministic
        added = float(extra[best])
        assignment[word] = best
        load_squares += added * (2.0 * loads[best] + added)
        load_sum += added
        loads[best] += added
        spread += added * per_post
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


def learn_graph(graph: Graph, matchers: int, seed: int = 0) -> Mapping:
    """Hot-word splitting, then SALB: the mapping the nightly job publishes."""
    frequency = graph.frequencies()
    split, versions = split_hot(graph, matchers, seed)
    assignment = salb_graph(split, matchers)
    index = {w: i for i, w in enumerate(graph.vocabulary) if w in versions}
    return Mapping(
        matchers,
        dict(zip(split.vocabulary, assignment.tolist(), strict=True)),
        versions,
        {w: int(frequency[index[w]]) for w in versions},
    )


def learn(publications: Sequence[Iterable[str]], matchers: int, seed: int = 0) -> Mapping:
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
