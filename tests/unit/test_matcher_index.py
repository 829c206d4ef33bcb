"""A matcher's index loaded from a snapshot (``load``, with its bulk path for the common record)
holds and matches exactly what the same subscriptions applied as events do."""

from __future__ import annotations

import random

import pytest

from tests.unit.support import placed_subscriptions, routed_batch
from wordcast.engines.registry import pattern_index, term_index
from wordcast.services.matcher.index import MatcherIndex
from wordcast.storage.records import Subscription, SubscriptionEvent

WORDS = [f"w{i}" for i in range(12)]


def _index(engine: str) -> MatcherIndex:
    return MatcherIndex(
        0, lambda: term_index(engine, None), lambda: pattern_index("retriever", "none", 2, 2)
    )


@pytest.mark.parametrize("engine", ["compiled-compact-trie", "compact-trie"])
def test_a_loaded_snapshot_matches_as_the_same_subscriptions_applied(engine: str) -> None:
    rng = random.Random(3)
    subs = placed_subscriptions(rng)
    loaded, applied = _index(engine), _index(engine)
    for start in range(0, len(subs), 64):  # pages, one record twice as a scan may list it
        loaded.load([*subs[start : start + 64], subs[start]])
    applied.apply(SubscriptionEvent(f"{i}-0", "add", s, s.terms) for i, s in enumerate(subs))

    assert loaded.subscriptions == applied.subscriptions
    assert loaded.restricted == applied.restricted
    assert loaded.audiences == applied.audiences
    assert loaded.hot_indexes
    assert loaded.restricted
    assert len(loaded.patterns)
    assert loaded.alternatives
    matched = 0
    for _ in range(60):
        rows = []
        for k in range(8):
            words = rng.sample(WORDS, rng.randint(1, 6))
            rows.append((f"p{k}", " ".join(words), tuple(words), True))
        version = rng.randint(0, 3)
        drawn = {k: {w: rng.randint(0, 3) for w in WORDS} for k in range(len(rows))}
        publisher = rng.choice(["a", "b"])
        batch = routed_batch(rows, publisher, mapping_version=version, drawn=drawn)
        expected = sorted(applied.pairs(batch))
        assert sorted(loaded.pairs(batch)) == expected
        matched += len(expected)
    assert matched > 500


def test_a_query_stored_by_an_earlier_reading_matches_as_stored() -> None:
    """``!spam ham`` was the words ham and spam before issue 53: its record keeps matching them
    (until subscribed again) rather than holding a check its words contradict; the same query
    stored now excludes spam."""
    earlier = Subscription("old", "!spam ham", ("ham", "spam"), "http://x/hook", 0, tenant="a")
    now = Subscription("new", "!spam ham", ("ham",), "http://x/hook", 0, tenant="a")
    index = _index("compiled-compact-trie")
    index.load([earlier, now])
    assert "old" not in index.alternatives
    assert "new" in index.alternatives
    batch = routed_batch(
        [("both", "ham spam", ("ham", "spam"), False), ("ham", "ham", ("ham",), False)], "a"
    )
    assert sorted(index.pairs(batch)) == [("new", 1), ("old", 0)]
