from __future__ import annotations

import random
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from wordcast.routing import (
    HashMapping,
    LearnedMapping,
    WordHolders,
    eligible_matchers,
    hot_multicast,
    route,
    route_held,
    stable_hash,
)

WORDS = ["white", "hous", "obama", "health", "python", "librari", "数据", "café"]


def test_stable_hash_is_the_same_in_every_process() -> None:
    script = f"from wordcast.routing import stable_hash; print([stable_hash(w) for w in {WORDS!r}])"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={"PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "random")
    }
    assert outputs == {f"{[stable_hash(w) for w in WORDS]}\n"}


def test_hash_mapping_spreads_words_over_all_matchers() -> None:
    mapping = HashMapping(4)
    assert {mapping(f"word{i}") for i in range(200)} == {0, 1, 2, 3}


@given(
    st.frozensets(st.sampled_from(WORDS), min_size=1, max_size=4),
    st.frozensets(st.sampled_from(WORDS), max_size=8),
    st.frozensets(st.sampled_from(WORDS), max_size=8),
    st.integers(1, 6),
)
def test_any_eligible_placement_sees_every_matching_post(
    sub: frozenset[str], post: frozenset[str], other_subscribed: frozenset[str], matchers: int
) -> None:
    mapping = HashMapping(matchers)
    subscribed = sub | other_subscribed
    targets, drawn = route(post, subscribed, mapping)
    assert drawn == {}  # hashing splits no word
    if sub <= post:
        assert eligible_matchers(sub, mapping) <= targets
    assert targets <= {mapping(w) for w in post}


@given(
    st.lists(
        st.tuples(st.integers(0, 9), st.booleans(), st.frozensets(st.sampled_from(WORDS))),
        max_size=40,
    )
)
def test_word_holders_follow_holds_and_drops(steps: list[tuple[int, bool, frozenset[str]]]) -> None:
    holders, reference = WordHolders(), {m: set[str]() for m in range(10)}
    for matcher, holding, words in steps:
        if holding:
            holders.hold(matcher, words)
            reference[matcher] |= words
        else:
            holders.drop(matcher, words)
            reference[matcher] -= words
    for word in WORDS:
        assert holders.holders(word) == sorted(m for m, held in reference.items() if word in held)
        assert (word in holders) == any(word in held for held in reference.values())


@given(
    st.lists(
        st.frozensets(st.sampled_from(WORDS), min_size=1, max_size=4), min_size=1, max_size=12
    ),
    st.lists(st.frozensets(st.sampled_from(WORDS), max_size=6), min_size=1, max_size=12),
    st.integers(1, 5),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_routing_to_holders_only_still_reaches_every_subscription(
    subs: list[frozenset[str]],
    posts: list[frozenset[str]],
    matchers: int,
    split_hot_words: bool,
    rng: random.Random,
) -> None:
    """Placed anywhere eligible (multicast for hot words only), with H(i) the words of what i
    holds: every post containing a subscription reaches a matcher holding it, and K_H ⊆ K."""
    hot = {"python": 3, "hous": 2} if split_hot_words else {}
    words = {w: rng.randrange(matchers) for w in WORDS}
    words |= {f"{w}#{c}": rng.randrange(matchers) for w, k in hot.items() for c in range(k)}
    mapping = LearnedMapping(1, matchers, words, hot, {"python": 50, "hous": 20})
    holders = WordHolders()
    placed: list[dict[int, frozenset[int] | None]] = []  # matcher -> copies served (None: all)
    for sub in subs:
        eligible = eligible_matchers(sub, mapping)
        if eligible:
            matcher = rng.choice(sorted(eligible))
            placed.append({matcher: None})
            holders.hold(matcher, sub)
        else:
            _word, copies = hot_multicast(sub, mapping)
            placed.append(dict(copies))
            for matcher in copies:
                holders.hold(matcher, sub)
    subscribed = set().union(*subs)
    for post in posts:
        seed = rng.random()
        targets, drawn = route_held(post, holders, mapping, random.Random(seed).randrange)
        everywhere, drawn_too = route(post, subscribed, mapping, random.Random(seed).randrange)
        assert drawn == drawn_too and targets <= everywhere
        for sub, where in zip(subs, placed, strict=True):
            if not sub <= post:
                continue
            if len(where) == 1 and None in where.values():
                assert set(where) <= targets
            else:
                word = min(sub, key=lambda t: (mapping.frequency(t), t))
                serving = {m for m, copies in where.items() if copies and drawn[word] in copies}
                assert len(serving) == 1 and serving <= targets


def test_routing_to_holders_skips_a_word_only_others_hold() -> None:
    mapping = LearnedMapping(1, 2, {"rust": 0, "web": 1})
    holders = WordHolders()
    holders.hold(0, ["rust", "web"])  # "rust web" placed on rust's matcher
    assert route({"web", "framework"}, holders, mapping)[0] == {1}
    assert route_held({"web", "framework"}, holders, mapping)[0] == set()
    assert route_held({"rust", "web"}, holders, mapping)[0] == {0}
