"""What the console shows of routing, measured on recent traffic (the sampled publication log).

For hash routing and for the latest learned mapping, the load each matcher would get from the same
publications, routed by the mapping over the subscribed words (K(P, M), Eq. 3.1 of S³-TM §3.1),
with the spread (Eq. 3.2: matchers per publication) and the imbalance (Eq. 3.4: the busiest
matcher's load over the mean) they come to; and the hottest subscribed words, with the matchers a
mapping routes each to and the matchers whose subscriptions hold it (H(i), §4.2).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from wordcast.learning.throughput import model
from wordcast.routing.mapping import HashMapping, WordHolders, copy_name

Terms = tuple[str, ...]


def load_figures(
    name: str, mapping: HashMapping, samples: Sequence[Terms], subscribed: WordHolders
) -> dict[str, Any]:
    """The learner's own model of a mapping (:func:`wordcast.learning.throughput.model`, hot
    words' copies drawn alike for every mapping compared), as the console shows it."""
    if not samples:
        loads = [0] * mapping.matchers
        return _figures(name, mapping, loads, spread=0.0, imbalance=0.0)
    modelled = model(mapping, samples, subscribed)
    return _figures(name, mapping, list(modelled.loads), modelled.spread, modelled.imbalance)


def _figures(
    name: str, mapping: HashMapping, loads: list[int], spread: float, imbalance: float
) -> dict[str, Any]:
    return {
        "name": name,
        "version": mapping.version,
        "matchers": mapping.matchers,
        "loads": loads,
        "spread": spread,
        "imbalance": imbalance,
    }


def routed_to(word: str, mapping: HashMapping) -> list[int]:
    """Every matcher ``mapping`` may route ``word`` to (one per copy of a hot word)."""
    copies = mapping.splits.get(word, 0)
    if not copies:
        return [mapping(word)]
    return sorted({mapping(copy_name(word, copy)) for copy in range(copies)})


def hot_words(
    samples: Sequence[Terms], subscribed: WordHolders, mapping: HashMapping, most: int
) -> list[dict[str, Any]]:
    counts = Counter(term for terms in samples for term in set(terms) if term in subscribed)
    return [
        {
            "word": word,
            "publications": count,
            "routed_to": routed_to(word, mapping),
            "held_by": subscribed.holders(word),
        }
        for word, count in counts.most_common(most)
    ]
