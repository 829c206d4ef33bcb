from __future__ import annotations

import random
import uuid
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from wordcast.routing.mapping import (
    HashMapping,
    LearnedMapping,
    WordHolders,
    eligible_matchers,
    hot_multicast,
    keyed_draw,
    random_draw,
    route,
    route_held,
)

WORDS = ["white", "hous", "obama", "health", "python", "librari", "数据", "café"]


def test_keyed_draws_repeat_per_publication_and_spread_evenly_and_independently() -> None:
    ids = [f"post-{i}" for i in range(24_000)] + [uuid.UUID(int=i).hex for i in range(24_000)]
    assert [keyed_draw(i)("python", 5) for i in ids[:50]] == [
        keyed_draw(i)("python", 5) for i in ids[:50]
    ]
    # Two words of one length are where a bare CRC would draw in lockstep.
    pairs = Counter((keyed_draw(i)("pyth", 4), keyed_draw(i)("data", 4)) for i in ids)
    assert len(pairs) == 16
    expected = len(ids) / 16
    assert all(abs(count - expected) < 0.06 * expected for count in pairs.values()), pairs
    three = Counter(keyed_draw(i)("web", 3) for i in ids)
    assert all(abs(count - len(ids) / 3) < 0.03 * len(ids) / 3 for count in three.values())


def test_random_draws_ignore_the_word_and_follow_their_generator() -> None:
    draw = random_draw(random.Random(4))
    draws = [draw(word, 7) for word in ["web", "web", "api", "data"] * 25]
    rng = random.Random(4)
    assert draws == [rng.randrange(7) for _ in range(100)]


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
        targets, drawn = route_held(post, holders, mapping, random_draw(random.Random(seed)))
        everywhere, drawn_too = route(post, subscribed, mapping, random_draw(random.Random(seed)))
        assert drawn == drawn_too
        assert targets <= everywhere
        for sub, where in zip(subs, placed, strict=True):
            if not sub <= post:
                continue
            if len(where) == 1 and None in where.values():
                assert set(where) <= targets
            else:
                word = min(sub, key=lambda t: (mapping.frequency(t), t))
                serving = {m for m, copies in where.items() if copies and drawn[word] in copies}
                assert len(serving) == 1
                assert serving <= targets


def test_routing_to_holders_skips_a_word_only_others_hold() -> None:
    mapping = LearnedMapping(1, 2, {"rust": 0, "web": 1})
    holders = WordHolders()
    holders.hold(0, ["rust", "web"])  # "rust web" placed on rust's matcher
    assert route({"web", "framework"}, holders, mapping)[0] == {1}
    assert route_held({"web", "framework"}, holders, mapping)[0] == set()
    assert route_held({"rust", "web"}, holders, mapping)[0] == {0}
