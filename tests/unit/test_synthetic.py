from __future__ import annotations

from collections import Counter

import pytest

from wordcast.testing.synthetic import DISTRIBUTIONS, generate, uniform_length, zipf_vocabulary


def test_elements_have_distinct_terms_and_requested_lengths() -> None:
    vocabulary = zipf_vocabulary(1_000)
    for dist in DISTRIBUTIONS:
        elements = generate(vocabulary, 500, uniform_length(1, 6), dist, seed=1)
        assert len(elements) == 500
        assert all(1 <= len(e) <= 6 and len(set(e)) == len(e) for e in elements)
        assert generate(vocabulary, 500, uniform_length(1, 6), dist, seed=1) == elements


def test_sampling_modes_skew_as_named() -> None:
    vocabulary = zipf_vocabulary(1_000)
    counts = {
        dist: Counter(
            t for e in generate(vocabulary, 3_000, uniform_length(3, 3), dist, seed=2) for t in e
        )
        for dist in DISTRIBUTIONS
    }
    head, tail = "v1", "v1000"
    assert counts["empirical"][head] > 10 * max(counts["empirical"][tail], 1)
    assert counts["anti-correlated"][tail] > 10 * max(counts["anti-correlated"][head], 1)
    uniform = counts["uniform"]
    assert max(uniform.values()) < 5 * (sum(uniform.values()) / len(vocabulary))


def test_unknown_distribution_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown distribution"):
        generate(zipf_vocabulary(10), 1, uniform_length(1, 1), "bimodal")
