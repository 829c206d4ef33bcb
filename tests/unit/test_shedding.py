"""Load shedding (S³-TM §5.2): which matchers a publication keeps, and how the level adapts.

Pure logic, so plain unit and property tests; the cluster test is tests/test_shedding_e2e.py.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wordcast.corpus.workload import analysed_posts
from wordcast.routing.mapping import (
    HashMapping,
    LearnedMapping,
    WordHolders,
    copy_name,
    held_word_votes,
    random_draw,
    route,
    route_held,
    word_votes,
)
from wordcast.routing.shedding import (
    IDEAL,
    MIN_RATIO,
    OVERLOAD,
    STABLE,
    Controller,
    Levels,
    SpreadHistogram,
    consensus_scores,
    keep,
    segment_ratio,
    subscription_scores,
)

scores_st = st.dictionaries(st.integers(0, 63), st.integers(0, 20), min_size=1, max_size=16)


def test_levels_follow_k_minus_l_steps_and_stop_at_one_matcher() -> None:
    levels = Levels(k=7, step=1, matchers=16)
    assert [levels.threshold(level) for level in range(levels.max_level + 1)] == [
        math.inf, 7, 6, 5, 4, 3, 2, 1,
    ]  # fmt: skip
    half = Levels(k=3, step=0.5, matchers=16)
    assert [half.threshold(level) for level in range(1, half.max_level + 1)] == [
        3, 2.5, 2, 1.5, 1,
    ]  # fmt: skip
    # k is capped at N − 1: a limit of N or more would cut nothing.
    assert Levels(k=7, step=1, matchers=2).max_level == 1
    assert Levels(k=7, step=1, matchers=2).threshold(1) == 1
    assert Levels(k=7, step=1, matchers=1).max_level == 0
    with pytest.raises(ValueError, match="outside"):
        levels.threshold(8)
    with pytest.raises(ValueError, match="k must be"):
        Levels(k=0.5)
    with pytest.raises(ValueError, match="step"):
        Levels(step=0)


@given(scores_st, st.integers(1, 20), st.integers(0, 2**32))
def test_keep_takes_the_best_m_and_only_targets(scores: dict[int, int], m: int, seed: int) -> None:
    kept = keep(scores, m, random.Random(seed).random)
    assert kept <= set(scores)
    assert len(kept) == min(m, len(scores))
    dropped = set(scores) - kept
    if kept and dropped:
        assert min(scores[k] for k in kept) >= max(scores[d] for d in dropped)


@given(scores_st, st.integers(0, 2**32))
def test_no_limit_keeps_everything(scores: dict[int, int], seed: int) -> None:
    assert keep(scores, math.inf, random.Random(seed).random) == set(scores)


def test_a_fractional_limit_keeps_the_last_matcher_with_that_probability() -> None:
    rng = random.Random(5)
    scores = {0: 5.0, 1: 4.0, 2: 3.0, 3: 2.0}
    sizes = [len(keep(scores, 2.25, rng.random)) for _ in range(20_000)]
    assert set(sizes) == {2, 3}
    assert sizes.count(3) / len(sizes) == pytest.approx(0.25, abs=0.015)


def test_ties_are_broken_at_random_not_by_matcher_number() -> None:
    rng = random.Random(6)
    kept = [next(iter(keep({0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0}, 1, rng.random))) for _ in range(8_000)]
    for matcher in range(4):
        assert kept.count(matcher) / len(kept) == pytest.approx(0.25, abs=0.03)


def test_consensus_votes_count_the_words_behind_each_target_on_real_posts() -> None:
    posts = analysed_posts(2_000, seed=3)
    subscribed = set().union(*posts[:500])
    splits = {"python": 3, "librari": 2}
    words = {w: i % 8 for i, w in enumerate(sorted(subscribed))}
    words |= {copy_name(w, c): (c + 5) % 8 for w, k in splits.items() for c in range(k)}
    mapping = LearnedMapping(1, 8, words, splits)
    draw = random_draw(random.Random(1))
    for terms in posts:
        targets, drawn = route(terms, subscribed, mapping, draw)
        votes = word_votes(terms, subscribed, mapping, drawn)
        assert set(votes) == targets
        assert sum(votes.values()) == len(terms & subscribed)
        for matcher, count in votes.items():
            behind = [
                t for t in terms & subscribed
                if (copy_name(t, drawn[t]) if t in drawn else t) in words
                and words[copy_name(t, drawn[t]) if t in drawn else t] == matcher
            ]  # fmt: skip
            assert count == len(behind)
        assert consensus_scores(votes, targets) == {m: float(votes[m]) for m in targets}


def test_held_votes_count_only_the_words_that_send_the_post_on_real_posts() -> None:
    posts = analysed_posts(2_000, seed=4)
    subscribed = sorted(set().union(*posts[:400]))
    splits = {"python": 3, "librari": 2}
    words = {w: i % 8 for i, w in enumerate(subscribed)}
    words |= {copy_name(w, c): (c + 5) % 8 for w, k in splits.items() for c in range(k)}
    mapping = LearnedMapping(1, 8, words, splits)
    holders = WordHolders()
    rng = random.Random(2)
    for word in subscribed:  # each word held by its own matcher, or only by others
        holders.hold(rng.randrange(8) if rng.random() < 0.4 else mapping(word), [word])
    for word in splits:
        for copy in range(splits[word]):
            holders.hold(mapping(copy_name(word, copy)), [word])
    held = holders
    draw = random_draw(random.Random(1))
    thinner = 0
    for terms in posts:
        targets, drawn = route_held(terms, held, mapping, draw)
        votes = held_word_votes(terms, held, mapping, drawn)
        assert set(votes) == targets
        sending = [t for t in terms if t in held and held[t] >> mapping(
            copy_name(t, drawn[t]) if t in drawn else t
        ) & 1]  # fmt: skip
        assert sum(votes.values()) == len(sending)
        everything = word_votes(terms, held, mapping, drawn)
        assert all(votes[m] <= everything[m] for m in votes)
        thinner += any(votes[m] < everything[m] for m in votes)
    assert thinner > 50, "some targets should also have words mapped there that they do not hold"


def test_subscription_shedding_ranks_by_subscriptions_on_the_post_words() -> None:
    word_maps = {0: {"cat": 1, "dog": 1}, 1: {"cat": 9}, 2: {"fish": 50}}
    scores = subscription_scores(["cat", "dog"], [0, 1, 2], word_maps)
    assert scores == {0: 2.0, 1: 9.0, 2: 0.0}
    # Consensus would keep matcher 0 (two words map there); subscriptions keep matcher 1.
    assert keep(scores, 1, random.Random(0).random) == {1}
    assert keep(consensus_scores({0: 2, 1: 1, 2: 1}, [0, 1, 2]), 1, random.random) == {0}


@given(
    st.lists(st.integers(1, 16), min_size=1, max_size=200),
    st.floats(1, 16),
)
def test_histogram_load_is_the_copies_sent_under_a_limit(sizes: list[int], m: float) -> None:
    histogram = SpreadHistogram()
    for size in sizes:
        histogram.record(size)
    assert histogram.load(math.inf) == pytest.approx(sum(sizes))
    assert histogram.load(m) == pytest.approx(sum(min(size, m) for size in sizes))
    histogram.decay(0.5)
    assert histogram.load(math.inf) == pytest.approx(sum(sizes) / 2)


@given(
    st.lists(st.floats(0.01, 1.0), min_size=1, max_size=8),
    st.floats(1.0, 1e6),
)
def test_segments_satisfy_eq_5_1_for_every_level(factors: list[float], start: float) -> None:
    loads = [start]
    for factor in factors:  # each level keeps a fraction of the previous level's load
        loads.append(loads[-1] * factor)
    ratio = segment_ratio(loads)
    assert ratio >= MIN_RATIO
    for before, after in itertools.pairwise(loads):
        # (b^s + b^i) / b^s = 1 + r must exceed L(l − Δ) / L(l).
        assert 1 + ratio > before / after


def test_the_paper_eq_5_2_would_break_eq_5_1() -> None:
    """Why segment_ratio does not use Eq. 5.2 as printed (see the module docstring)."""
    loads = [100.0, 60.0, 45.0]
    printed = 1 - max(after / before for before, after in itertools.pairwise(loads))
    assert not all(1 + printed > b / a for b, a in itertools.pairwise(loads))
    assert all(1 + segment_ratio(loads) > b / a for b, a in itertools.pairwise(loads))


def test_controller_rises_in_overload_falls_when_ideal_and_holds_when_stable() -> None:
    controller = Controller(Levels(k=7, step=1, matchers=16), buffer=100, ratio=1.0)
    assert controller.ideal_size == 50
    assert [controller.segment(f) for f in (0, 49, 50, 99, 100, 500)] == [
        IDEAL, IDEAL, STABLE, STABLE, OVERLOAD, OVERLOAD,
    ]  # fmt: skip
    assert controller.adapt(120) == 1
    assert controller.threshold == 7
    assert controller.adapt(130) == 2  # still overloaded and not improving: shed more
    assert controller.adapt(110) == 2  # still overloaded but draining: wait
    assert controller.adapt(110) == 3  # no longer draining
    assert controller.adapt(70) == 3  # stable
    assert controller.adapt(10) == 2
    assert controller.adapt(5) == 1  # ideal and not filling: shed less
    assert controller.adapt(30) == 1  # ideal but filling up again: wait
    assert controller.adapt(30) == 0
    assert controller.adapt(0) == 0
    assert controller.threshold == math.inf


def test_controller_stops_at_the_last_level() -> None:
    controller = Controller(Levels(k=7, step=1, matchers=4), buffer=10)
    for fullness in range(20, 40):
        controller.adapt(fullness)
    assert controller.level == controller.levels.max_level == 3
    assert controller.threshold == 1


def test_controller_sizes_its_segments_from_the_loads() -> None:
    controller = Controller(Levels(k=2, step=1, matchers=4), buffer=300)
    controller.adapt(0, loads=[300.0, 200.0, 100.0])  # the last level halves the load
    assert controller.ratio == pytest.approx(1 + 0.05)
    assert controller.ideal_size == pytest.approx(300 * 1.05 / 2.05)


def test_a_spike_is_shed_and_the_level_returns_to_zero_afterwards() -> None:
    """A fluid model of a router in front of matchers that process 1,000 copies a second."""
    levels = Levels(k=7, step=1, matchers=16)
    controller = Controller(levels, buffer=2_000)
    histogram = SpreadHistogram()
    sizes = [1, 2, 2, 3, 3, 4, 5, 6, 8, 10]  # |K(P, M)| of the traffic, 4.4 copies on average
    buffer, seen = 0.0, []
    for second in range(120):
        rate = 400 if 20 <= second < 60 else 100  # publications a second; 400 overloads
        for size in sizes:
            histogram.record(size, rate / len(sizes))
        per_post = sum(min(s, controller.threshold) for s in sizes) / len(sizes)
        buffer = max(0.0, buffer + rate - 1_000 / per_post)
        loads = [histogram.load(levels.threshold(lv)) for lv in range(levels.max_level + 1)]
        seen.append(controller.adapt(buffer, loads))
        histogram.decay(0.5)
    assert max(seen[:20]) == 0  # 100/s is within capacity: nothing is shed
    assert max(seen[20:60]) > 0
    assert seen[-1] == 0
    assert buffer < 2_000


def test_hash_mapping_votes_match_route_targets() -> None:
    mapping = HashMapping(5)
    terms = frozenset({"alpha", "beta", "gamma", "delta"})
    targets, drawn = route(terms, terms, mapping)
    assert set(word_votes(terms, terms, mapping, drawn)) == targets
