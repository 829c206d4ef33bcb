"""The compiled LASP view (``_core.PlanningView``) places a batch exactly as the Python reference
(``routing.placement.PlanningView`` with ``routing.lasp.place_among``) on the same inputs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wordcast import _core
from wordcast.routing.lasp import LinearCost, place_among
from wordcast.routing.placement import PlanningView

WORDS = st.sampled_from([f"w{k}" for k in range(12)])


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[int], dict[int, list[str]], LinearCost, list]:
    matchers = draw(st.integers(1, 6))
    sizes = draw(st.lists(st.integers(0, 40), min_size=matchers, max_size=matchers))
    held = {
        m: sorted(set(draw(st.lists(WORDS, max_size=min(sizes[m], 8)))))
        for m in range(matchers)
        if draw(st.booleans())
    }
    sizes = [max(size, len(held.get(m, []))) for m, size in enumerate(sizes)]
    cost = LinearCost(draw(st.floats(0.1, 5)), draw(st.sampled_from([0.0, 0.5, 30.0])))
    subs = draw(
        st.lists(
            st.tuples(
                st.lists(WORDS, min_size=1, max_size=4),
                st.lists(st.integers(0, matchers - 1), min_size=1, max_size=matchers),
            ),
            max_size=40,
        )
    )
    return sizes, held, cost, subs


@settings(max_examples=300, deadline=None)
@given(batches())
def test_the_compiled_view_places_a_batch_as_the_reference(
    batch: tuple[list[int], dict[int, list[str]], LinearCost, list],
) -> None:
    sizes, held, cost, subs = batch
    reference = PlanningView(sizes, held)
    compiled = _core.PlanningView(sizes, held, cost.slope, cost.intercept)
    for terms, eligible in subs:
        known = reference.known(terms, eligible)
        assert compiled.known(terms, eligible) == known
        expected = place_among(len(set(terms)), eligible, reference.sizes, known, cost)
        assert compiled.place(terms, eligible) == expected
        reference.hold(terms, [expected])
        compiled.hold(terms, [expected])
        assert compiled.sizes == reference.sizes


def test_a_matcher_it_does_not_know_is_an_error_not_a_crash() -> None:
    view = _core.PlanningView([3, 4], {}, 1.0, 0.0)
    with pytest.raises(ValueError, match="no matcher 2"):
        view.place(["a"], [2])
    with pytest.raises(ValueError, match="no matcher 5"):
        view.hold(["a"], [5])
