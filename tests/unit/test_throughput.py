"""The unit-cost throughput model (Eq. 3.6) against loads counted by brute force on corpus posts."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wordcast.corpus.workload import analysed_posts
from wordcast.learning.salb import salb
from wordcast.learning.throughput import Modelled, best, model
from wordcast.routing.mapping import LearnedMapping, copy_name

POSTS = analysed_posts(400, seed=5)
VOCABULARY = sorted(set().union(*POSTS))


def brute_force_loads(
    posts: list[frozenset[str]], words: dict[str, int], subscribed: set[str], matchers: int
) -> list[int]:
    """Per matcher, the posts with at least one subscribed word mapped there (Eq. 3.1, hashing
    left out: every subscribed word of these posts is in ``words``)."""
    return [
        sum(1 for post in posts if any(w in subscribed and words[w] == i for w in post))
        for i in range(matchers)
    ]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 9), st.randoms(use_true_random=False), st.floats(0.05, 1.0))
def test_model_counts_what_each_matcher_receives(
    matchers: int, rng: random.Random, share: float
) -> None:
    words = {w: rng.randrange(matchers) for w in VOCABULARY}
    subscribed = {w for w in VOCABULARY if rng.random() < share}
    loads = brute_force_loads(POSTS, words, subscribed, matchers)

    modelled = model(LearnedMapping(1, matchers, words), POSTS, subscribed)

    assert list(modelled.loads) == loads
    if max(loads):
        assert modelled.throughput == pytest.approx(len(POSTS) / max(loads))
        assert modelled.spread == pytest.approx(sum(loads) / len(POSTS))
        assert modelled.imbalance == pytest.approx(max(loads) / (sum(loads) / matchers))


def test_every_word_is_subscribed_unless_told_otherwise() -> None:
    words = salb(POSTS, 4)
    everything = model(LearnedMapping(1, 4, words), POSTS)
    assert list(everything.loads) == brute_force_loads(POSTS, words, set(VOCABULARY), 4)


def test_a_hot_word_loads_one_drawn_copy_per_post() -> None:
    hot = Counter(w for post in POSTS for w in post).most_common(1)[0][0]
    carrying = sum(1 for post in POSTS if hot in post)
    # Only the hot word is subscribed and each of its 3 copies has a matcher of its own, so the
    # copies' matchers share exactly the posts that carry it, one copy per post.
    words = {copy_name(hot, j): j for j in range(3)}
    mapping = LearnedMapping(1, 3, words, splits={hot: 3}, frequencies={hot: carrying})

    modelled = model(mapping, POSTS, {hot}, seed=2)

    assert sum(modelled.loads) == carrying
    assert all(load > 0 for load in modelled.loads)
    assert modelled.loads == model(mapping, POSTS, {hot}, seed=2).loads  # the seed fixes the draws


def test_best_takes_the_highest_throughput_and_the_first_of_equals() -> None:
    def scored(throughput: float) -> Modelled:
        return Modelled(throughput, 1.0, 1.0, (1,))

    assert best({"salb": scored(2.0), "gFCL": scored(2.5), "hash": scored(1.0)}) == "gFCL"
    assert best({"salb": scored(2.0), "gFCL": scored(2.0)}) == "salb"
    with pytest.raises(ValueError, match="nothing to choose"):
        best({})
    with pytest.raises(ValueError, match="at least one publication"):
        model(LearnedMapping(1, 2, {}), [])
