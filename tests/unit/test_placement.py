"""Placements serve every publication exactly once, whichever mapping version routed it."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from wordcast.routing.mapping import (
    HashMapping,
    LearnedMapping,
    copy_name,
    hot_multicast,
    random_draw,
    route,
)
from wordcast.routing.placement import (
    PATTERN_TOLERANCE,
    Placement,
    PlanningView,
    candidates,
    decode,
    encode,
    matchers_of,
    move_pattern,
    pattern_still_valid,
    place_pattern,
    plan,
    prune,
    rebalance_patterns,
    reopen,
    still_valid,
)

WORDS = [f"w{i}" for i in range(12)]


@st.composite
def mappings(draw: st.DrawFn, version: int, matchers: int) -> LearnedMapping:
    hot = draw(st.sets(st.sampled_from(WORDS), max_size=4))
    splits = {w: draw(st.integers(1, 4)) for w in hot}
    words = {w: draw(st.integers(0, matchers - 1)) for w in WORDS if w not in hot}
    for w, k in splits.items():
        for c in range(k):
            words[copy_name(w, c)] = draw(st.integers(0, matchers - 1))
    frequencies = {w: draw(st.integers(1, 100)) for w in hot}
    return LearnedMapping(version, matchers, words, splits, frequencies)


def serving(
    placements: tuple[Placement, ...], version: int, drawn: dict[str, int]
) -> list[Placement]:
    return [p for p in placements if p.serves(version, drawn)]


@settings(max_examples=300, deadline=None)
@given(
    st.data(),
    st.integers(1, 5),
    st.frozensets(st.sampled_from(WORDS), min_size=1, max_size=4),
    st.frozensets(st.sampled_from(WORDS), max_size=6),
    st.integers(0, 2**32),
)
def test_each_version_in_the_window_is_served_once_and_reached(
    data: st.DataObject,
    matchers: int,
    sub: frozenset[str],
    extra: frozenset[str],
    seed: int,
) -> None:
    old = data.draw(st.one_of(st.just(HashMapping(matchers)), mappings(1, matchers)))
    new = data.draw(mappings(old.version + 1, matchers))
    terms = sorted(sub)
    sizes = [random.Random(seed + i).randrange(50) for i in range(matchers)]
    rng = random.Random(seed)
    post = sub | extra  # a publication that matches the subscription
    # A new subscription while both versions may be in use; and an old one re-placed.
    placed_new = plan(terms, [old, new], sizes, {})
    placed_old = plan(terms, [old], sizes, {})
    moved = (
        placed_old
        if still_valid(placed_old, terms, new)
        else reopen(placed_old, terms, new, sizes, {})
    )
    for placements in (placed_new, moved):
        assert decode(encode(placements)) == placements
        for mapping in (old, new):
            targets, drawn = route(post, sub, mapping, random_draw(rng))
            serve = serving(placements, mapping.version, drawn)
            assert len(serve) == 1, (placements, mapping.version, drawn)
            assert serve[0].matcher in targets
        # After the old version retires, the new one is still served exactly once.
        kept = prune(placements, new.version)
        targets, drawn = route(post, sub, new, random_draw(rng))
        assert len(serving(kept, new.version, drawn)) == 1
        assert all(p.until is None or p.until > new.version for p in kept)


def test_a_subscription_of_hot_words_is_multicast_to_its_rarest_hot_words_copies() -> None:
    words = {copy_name("python", c): c for c in range(4)} | {
        copy_name("data", c): 0 for c in range(2)
    }
    mapping = LearnedMapping(3, 4, words, {"python": 4, "data": 2}, {"python": 900, "data": 300})
    word, copies = hot_multicast(["data", "python"], mapping)
    assert word == "data"
    assert copies == {0: frozenset({0, 1})}
    placements = plan(["data", "python"], [mapping], [0, 0, 0, 0], {})
    assert placements == (Placement(0, 3, None, "data", frozenset({0, 1})),)
    # With a regular word, the subscription is any-cast through it and the hot words are ignored.
    with_regular = plan(["data", "python", "flask"], [mapping], [0, 0, 0, 0], {})
    assert [p.hot for p in with_regular] == [""]
    assert with_regular[0].matcher == mapping("flask")


def test_a_placement_valid_under_the_new_mapping_is_not_moved() -> None:
    old = HashMapping(3)
    terms = ["alpha", "beta"]
    placements = plan(terms, [old], [0, 0, 0], {})
    new = LearnedMapping(1, 3, {"alpha": placements[0].matcher, "beta": 2})
    assert still_valid(placements, terms, new)
    elsewhere = LearnedMapping(2, 3, {t: (placements[0].matcher + 1) % 3 for t in terms})
    assert not still_valid(placements, terms, elsewhere)
    moved = reopen(placements, terms, elsewhere, [0, 0, 0], {})
    assert moved[0] == Placement(placements[0].matcher, 0, 2)
    assert moved[1] == Placement((placements[0].matcher + 1) % 3, 2, None)


@settings(max_examples=200, deadline=None)
@given(
    matcher=st.integers(0, 5),
    matchers=st.integers(1, 6),
    version=st.integers(1, 9),
    owners=st.sets(st.integers(0, 7), max_size=4),
    loads=st.dictionaries(st.integers(0, 7), st.integers(0, 40), max_size=8),
)
def test_a_pattern_leaving_a_removed_matcher_is_served_once_by_each_version(
    matcher: int, matchers: int, version: int, owners: set[int], loads: dict[int, int]
) -> None:
    target = place_pattern(owners, loads, matchers, random.Random(0).choice)
    assert 0 <= target < matchers
    if owners & set(range(matchers)) and min(loads.get(m, 0) for m in range(matchers)) == max(
        loads.get(m, 0) for m in range(matchers)
    ):
        assert target in owners  # joining an owner is free when the load is even
    assert pattern_still_valid((), matcher, matchers) == (matcher < matchers)
    moved = move_pattern((), matcher, version, target)
    assert pattern_still_valid(moved, matcher, matchers)
    for routed_with in range(version + 3):
        serving = [p.matcher for p in moved if p.serves(routed_with, {})]
        assert serving == [matcher if routed_with < version else target]
    assert prune(moved, version) == (Placement(target, version),)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.sampled_from([f"a{k}" for k in range(12)]), st.integers(1, 30)),
        min_size=1,
        max_size=6,
    )
)
def test_rebalancing_patterns_moves_whole_anchor_groups_and_evens_the_loads(
    counts: list[dict[str, int]],
) -> None:
    moves = rebalance_patterns(counts)
    loads = [sum(c.values()) for c in counts]
    after = list(loads)
    for (source, anchor), target in moves.items():
        assert anchor in counts[source]
        assert target != source
        after[source] -= counts[source][anchor]
        after[target] += counts[source][anchor]
    assert sum(after) == sum(loads)
    assert sum(x * x for x in after) <= sum(x * x for x in loads)  # never more uneven
    # It stops only when every matcher is within bounds or no overloaded one has a group left
    # that fits in half its gap to the least loaded.
    limit = PATTERN_TOLERANCE * sum(loads) / len(loads)
    for matcher, load in enumerate(after):
        if load > limit:
            room = (load - min(after)) / 2
            left = [c for a, c in counts[matcher].items() if (matcher, a) not in moves]
            assert all(c > room for c in left), (counts, moves, after)


def test_new_matchers_get_an_even_share_of_the_patterns() -> None:
    """Growing 2 -> 4: 40 anchors of 3 patterns on each old matcher, none on the new ones."""
    counts: list[dict[str, int]] = [
        {f"a{k}": 3 for k in range(40)},
        {f"b{k}": 3 for k in range(40)},
    ]
    moves = rebalance_patterns([*counts, {}, {}])
    after = [120, 120, 0, 0]
    for (source, _anchor), target in moves.items():
        after[source] -= 3
        after[target] += 3
    assert max(after) <= PATTERN_TOLERANCE * 60, after
    assert min(after) > 0, after


@settings(max_examples=200, deadline=None)
@given(
    st.data(),
    st.integers(1, 6),
    st.lists(
        st.frozensets(st.sampled_from(WORDS), min_size=1, max_size=4), min_size=1, max_size=30
    ),
    st.dictionaries(st.integers(0, 5), st.frozensets(st.sampled_from(WORDS), max_size=8)),
)
def test_a_batch_placed_in_memory_lands_where_one_by_one_placement_would(
    data: st.DataObject,
    matchers: int,
    subs: list[frozenset[str]],
    initial: dict[int, frozenset[str]],
) -> None:
    """PlanningView: each subscription of a batch sees the ones before it as if each had been
    stored (H(i) grown) and read back before the next was placed."""
    versions = data.draw(
        st.one_of(
            st.just([HashMapping(matchers)]),
            mappings(1, matchers).map(lambda new: [HashMapping(matchers), new]),
        )
    )
    word_maps = {m: set(initial.get(m, ())) for m in range(matchers)}  # H(i) as Redis holds it
    one_by_one = []
    for sub in subs:
        terms = sorted(sub)
        sizes = [len(word_maps[m]) for m in range(matchers)]
        wanted = candidates(terms, versions)
        known = {m: sum(1 for t in terms if t in word_maps[m]) for m in wanted}
        placements = plan(terms, versions, sizes, known)
        one_by_one.append(placements)
        for matcher in matchers_of(placements):  # what the add script does to H(i)
            word_maps[matcher].update(terms)
    start = {m: set(initial.get(m, ())) for m in range(matchers)}
    view = PlanningView(
        [len(start[m]) for m in range(matchers)],
        {m: start[m] & {w for s in subs for w in s} for m in range(matchers)},
    )
    batched = []
    for sub in subs:
        terms = sorted(sub)
        placements = plan(
            terms, versions, view.sizes, view.known(terms, candidates(terms, versions))
        )
        view.hold(terms, matchers_of(placements))
        batched.append(placements)
    assert batched == one_by_one
