"""A matcher's index loaded from a snapshot (``load``, with its bulk path for the common record)
holds and matches exactly what the same subscriptions applied as events do."""

from __future__ import annotations

import random

import pytest

from wordcast.engines.registry import pattern_index, term_index
from wordcast.routing.placement import Placement, decode, encode
from wordcast.services.matcher.index import MatcherIndex
from wordcast.storage.records import Subscription, SubscriptionEvent

WORDS = [f"w{i}" for i in range(12)]


def _subscriptions(rng: random.Random) -> list[Subscription]:
    subs = []
    for i in range(400):
        terms = tuple(sorted(rng.sample(WORDS, rng.randint(1, 3))))
        kind = rng.choice(["everywhere", "everywhere", "versions", "hot", "elsewhere", "pattern"])
        placements: tuple[Placement, ...]
        if kind == "everywhere":  # as records hold it: decoded, cached and shared
            placements = decode(encode((Placement(0, 0),)))
        elif kind == "versions":
            placements = (Placement(1, 0, 2), Placement(0, 2))
        elif kind == "hot":
            placements = (Placement(0, 0, None, terms[0], frozenset({1, 3})),)
        elif kind == "elsewhere":
            placements = (Placement(0, 0, 1), Placement(1, 1))
        else:
            placements = ()
        query = " ".join(terms) if rng.random() < 0.8 else f"{terms[0]} -{rng.choice(WORDS)}"
        subs.append(
            Subscription(
                f"s{i}",
                "" if kind == "pattern" else query,
                () if kind == "pattern" else terms,
                "http://x/hook",
                0,
                pattern=f"{terms[0]}*{terms[-1]}" if kind == "pattern" else "",
                anchor=terms[0] if kind == "pattern" else "",
                tenant=rng.choice(["a", "b"]),
                placements=placements,
            )
        )
    return subs


def _index(engine: str) -> MatcherIndex:
    return MatcherIndex(
        0, lambda: term_index(engine, None), lambda: pattern_index("retriever", "none", 2, 2)
    )


@pytest.mark.parametrize("engine", ["compiled-compact-trie", "compact-trie"])
def test_a_loaded_snapshot_matches_as_the_same_subscriptions_applied(engine: str) -> None:
    rng = random.Random(3)
    subs = _subscriptions(rng)
    loaded, applied = _index(engine), _index(engine)
    for start in range(0, len(subs), 64):  # pages, one record twice as a scan may list it
        loaded.load([*subs[start : start + 64], subs[start]])
    applied.apply(SubscriptionEvent(f"{i}-0", "add", s, s.terms) for i, s in enumerate(subs))

    assert loaded.subscriptions == applied.subscriptions
    assert loaded.restricted == applied.restricted
    assert loaded.audiences == applied.audiences
    assert loaded.hot
    assert loaded.restricted
    assert len(loaded.patterns)
    assert loaded.alternatives
    matched = 0
    for _ in range(60):
        batch = []
        for k in range(8):
            words = rng.sample(WORDS, rng.randint(1, 6))
            batch.append((f"p{k}", " ".join(words), frozenset(words), True))
        version = rng.randint(0, 3)
        drawn = [{w: rng.randint(0, 3) for w in WORDS} for _ in batch]
        publisher = rng.choice(["a", "b"])
        expected = sorted(applied.pairs(batch, version, drawn, publisher, ""))
        assert sorted(loaded.pairs(batch, version, drawn, publisher, "")) == expected
        matched += len(expected)
    assert matched > 500
