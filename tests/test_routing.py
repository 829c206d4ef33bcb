from __future__ import annotations

import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from wordcast.routing import HashMapping, eligible_matchers, route, stable_hash

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
