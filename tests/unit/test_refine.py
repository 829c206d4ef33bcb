"""The refinement after SALB, judged by brute-force loads on corpus posts (``wordcast.learning.refine``)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wordcast.corpus.workload import analysed_posts
from wordcast.learning.refine import learn_refined, refine
from wordcast.learning.salb import Graph, learn_graph, loads, salb_graph, split_hot

POSTS = [p for p in analysed_posts(400, seed=21) if p]


def phi(posts: list[frozenset[str]], words: dict[str, int], matchers: int) -> int:
    """Σ L_i^32 from publications routed by brute force: what every move must lower, exactly."""
    return sum(load**32 for load in loads(posts, words, matchers))


def as_words(graph: Graph, assignment: np.ndarray) -> dict[str, int]:
    return dict(zip(graph.vocabulary, assignment.tolist(), strict=True))


@settings(max_examples=12, deadline=None)
@given(st.integers(2, 9), st.integers(20, 250), st.randoms(use_true_random=False), st.booleans())
def test_every_pass_lowers_the_objective_on_brute_force_loads(
    matchers: int, count: int, rng: random.Random, from_salb: bool
) -> None:
    posts = rng.sample(POSTS, count)
    graph = Graph.from_publications(posts)
    start = (
        salb_graph(graph, matchers)
        if from_salb
        else np.array([rng.randrange(matchers) for _ in graph.vocabulary])
    )
    before = phi(posts, as_words(graph, start), matchers)
    previous = before
    for passes in (1, 2, 3):
        refined = refine(graph, start, matchers, passes)
        assert len(refined.assignment) == len(graph.vocabulary)
        assert refined.assignment.min() >= 0
        assert refined.assignment.max() < matchers
        now = phi(posts, as_words(graph, refined.assignment), matchers)
        if sum(refined.moves):
            assert now < before
        else:
            assert now == before
        assert now <= previous  # one more pass never undoes the one before
        previous = now


@pytest.mark.parametrize("matchers", [2, 3, 5])
def test_a_converged_mapping_has_no_single_word_move_left_that_helps(matchers: int) -> None:
    posts = POSTS[:120]
    graph = Graph.from_publications(posts)
    refined = refine(graph, salb_graph(graph, matchers), matchers, passes=100)
    assert refined.moves[-1] == 0, "did not converge"
    words = as_words(graph, refined.assignment)
    current = phi(posts, words, matchers)
    for word, here in words.items():
        for there in range(matchers):
            if there == here:
                continue
            moved = phi(posts, words | {word: there}, matchers)
            # Φ is compared in floating point; an exact gain below 1e-9 of Φ is rounding there.
            assert moved >= current * (1 - 1e-9), (word, here, there)


def test_refinement_moves_a_word_to_the_matcher_its_posts_already_reach() -> None:
    # "b" always comes with "a"; putting them on two matchers routes every post twice.
    posts = [frozenset({"a", "b"})] * 6 + [frozenset({"c"})] * 6
    graph = Graph.from_publications(posts)
    index = {w: i for i, w in enumerate(graph.vocabulary)}
    start = np.zeros(len(graph.vocabulary), dtype=np.int64)
    start[index["b"]] = 1
    start[index["c"]] = 1
    refined = refine(graph, start, 2)
    words = as_words(graph, refined.assignment)
    assert words["a"] == words["b"] != words["c"]
    assert sorted(loads(posts, words, 2)) == [6, 6]


def test_refining_a_salb_mapping_keeps_hot_word_versions_and_maps_every_copy() -> None:
    posts = [p | {"hot"} for p in POSTS[:300]]
    graph = Graph.from_publications(posts)
    plain = learn_graph(graph, 8)
    refined = learn_refined(graph, 8)
    assert refined.versions == plain.versions
    assert refined.versions["hot"] >= 2
    assert refined.frequencies == plain.frequencies == {"hot": 300}
    assert set(refined.words) == set(plain.words)
    split, _ = split_hot(graph, 8)
    split_posts: list[set[str]] = [set() for _ in range(split.n_posts)]
    for post, word in zip(split.posts.tolist(), split.words.tolist(), strict=True):
        split_posts[post].add(split.vocabulary[word])
    frozen = [frozenset(p) for p in split_posts]
    assert phi(frozen, refined.words, 8) <= phi(frozen, plain.words, 8)


def test_refining_a_given_salb_mapping_is_refining_the_one_it_would_learn() -> None:
    graph = Graph.from_publications([p | {"hot"} for p in POSTS[:300]])
    plain = learn_graph(graph, 8)
    assert learn_refined(graph, 8, salb=plain) == learn_refined(graph, 8)
    with pytest.raises(ValueError, match="another split or cluster"):
        learn_refined(graph, 4, salb=plain)


@pytest.mark.parametrize(
    ("assignment", "matchers", "passes", "message"),
    [
        ([0, 0], 2, 1, "every word"),
        ([0, 0, 2], 2, 1, "outside 0..1"),
        ([0, 0, -1], 2, 1, "outside 0..1"),
        ([0, 0, 0], 0, 1, "at least one matcher"),
        ([0, 0, 0], 2, -1, "passes"),
    ],
)
def test_bad_arguments_are_refused(
    assignment: list[int], matchers: int, passes: int, message: str
) -> None:
    graph = Graph.from_publications([{"a", "b"}, {"c"}])
    with pytest.raises(ValueError, match=message):
        refine(graph, np.array(assignment), matchers, passes)
