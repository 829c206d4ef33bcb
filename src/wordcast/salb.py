"""SALB, spread-aware load balancing (S³-TM §3.3, Alg. 1), and hot-word splitting (§5.1).

SALB assigns words to matchers one by one, most frequent first. For each candidate matcher i it
computes the extra load ``l`` the word would bring — the publications containing the word that do
not already reach i through another word mapped to i — and the utility ``-spread × imbalance`` as
if the word were mapped there, with imbalance the coefficient of variation of the matcher loads;
the best matcher wins. All N candidates are evaluated at once with numpy: a boolean matrix records
which publications already reach which matcher, so ``l`` for every i is one column sum over the
word's publications, and the loads' variance for every candidate comes from running sums.

Hot words (§5.1): a word more frequent than half of a matcher's even share of the total word
frequency is split into k versions, each carrying at most that much; a publication carrying the word
goes to one random version of it. :func:`split_hot_words` rewrites the learning publications that way
and returns how many versions each hot word has.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

VERSION_SEPARATOR = "#"


@dataclass(frozen=True)
class Mapping:
    """A learned word -> matcher mapping M, with the versions of split hot words."""

    matchers: int
    words: dict[str, int]
    versions: dict[str, int]

    def version_name(self, word: str, version: int) -> str:
        return f"{word}{VERSION_SEPARATOR}{version}"


def split_hot_words(
    publications: Sequence[Iterable[str]], matchers: int, seed: int = 0
) -> tuple[list[list[str]], dict[str, int]]:
    """§5.1: replace each hot word by a random one of its versions, per publication."""
    posts = [sorted(set(p)) for p in publications]
    frequency = Counter(w for post in posts for w in post)
    total = sum(frequency.values())
    limit = 0.5 * total / matchers
    versions = {
        word: math.ceil(count / limit)
        for word, count in frequency.items()
        if limit and count > limit
    }
    if not versions:
        return posts, {}
    rng = random.Random(seed)
    rewritten = [
        [
            f"{w}{VERSION_SEPARATOR}{rng.randrange(versions[w])}" if w in versions else w
            for w in post
        ]
        for post in posts
    ]
    return rewritten, versions


def salb(publications: Sequence[Iterable[str]], matchers: int) -> dict[str, int]:
    """Alg. 1 over the word-to-publication bipartite graph of ``publications``."""
    if matchers < 1:
        raise ValueError("at least one matcher is needed")
    posts = [set(p) for p in publications]
    n_posts = len(posts)
    neighbours: dict[str, list[int]] = {}
    for index, post in enumerate(posts):
        for word in post:
            neighbours.setdefault(word, []).append(index)
    order = sorted(neighbours, key=lambda w: (-len(neighbours[w]), w))

    reaches = np.zeros((n_posts, matchers), dtype=bool)  # publication already routed to matcher
    loads = np.zeros(matchers, dtype=np.float64)
    load_sum = load_squares = spread = 0.0  # running sums: the variance needs no pass over loads
    mapping: dict[str, int] = {}
    n = float(matchers)
    per_post = 1.0 / max(n_posts, 1)
    for word in order:
        rows = np.fromiter(neighbours[word], dtype=np.int64)
        extra = len(rows) - reaches[rows].sum(axis=0)  # l for every candidate matcher
        mean = (load_sum + extra) / n
        squares = load_squares + extra * (2.0 * loads + extra)
        imbalance = np.sqrt(np.maximum(squares / n - mean * mean, 0.0)) / mean
        utility = -(spread + extra * per_post) * imbalance
        best = int(np.argmax(utility))  # first of equals: deterministic
        added = float(extra[best])
        mapping[word] = best
        load_squares += added * (2.0 * loads[best] + added)
        load_sum += added
        loads[best] += added
        spread += added * per_post
        reaches[rows, best] = True
    return mapping


def learn(publications: Sequence[Iterable[str]], matchers: int, seed: int = 0) -> Mapping:
    """Hot-word splitting, then SALB: the mapping the nightly job publishes."""
    posts, versions = split_hot_words(publications, matchers, seed)
    return Mapping(matchers, salb(posts, matchers), versions)


def loads(publications: Sequence[Iterable[str]], words: dict[str, int], matchers: int) -> list[int]:
    """Publications routed to each matcher under a mapping (Eq. 3.1, every word subscribed)."""
    counts = [0] * matchers
    for post in publications:
        for matcher in {words[w] for w in post if w in words}:
            counts[matcher] += 1
    return counts
