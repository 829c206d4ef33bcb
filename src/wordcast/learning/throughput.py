"""The unit-cost throughput model of a routing mapping (S³-TM §3.1, Eqs. 3.1-3.6).

Routing the publications P with a mapping M loads matcher i with L(i, M) publications (those with
a subscribed word mapped to i, Eq. 3.1); with a unit cost per publication and capacity C the
cluster sustains ``C · |P| / max_i L(i, M)`` publications (Eq. 3.6). :func:`model` computes that
with C = 1, beside the spread R (Eq. 3.2) and the imbalance B (Eq. 3.4), on publications the
mapping did not learn from. :func:`best` picks the mapping the model favours, which is how the
learner's ``--algorithm best`` chooses among SALB, SALB refined (:mod:`wordcast.learning.refine`) and the
graph baselines: the paper's ranking holds on its tweets, not on every corpus and every N (on short
pypi summaries, gFCL routes better than SALB at N = 8; see BENCHMARKS.md).
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from wordcast.routing.mapping import HashMapping, random_draw, route


@dataclass(frozen=True)
class Modelled:
    """Eq. 3.6 with unit cost (publications per unit of matcher capacity), R and B."""

    throughput: float
    spread: float
    imbalance: float
    loads: tuple[int, ...]


def model(
    mapping: HashMapping,
    publications: Sequence[Iterable[str]],
    subscribed: Collection[str] | None = None,
    seed: int = 0,
) -> Modelled:
    """Route ``publications`` with ``mapping`` and model the throughput.

    ``subscribed`` is s(W), the words the routers route on; None means every word is subscribed.
    Hot words go to a random copy, drawn from ``seed`` (the router hashes each publication's id
    instead, which draws as evenly).
    """
    posts = [frozenset(p) for p in publications]
    if not posts:
        raise ValueError("the model needs at least one publication")
    words: Collection[str] = set().union(*posts) if subscribed is None else subscribed
    draw = random_draw(random.Random(seed))
    loads = [0] * mapping.matchers
    for terms in posts:
        targets, _drawn = route(terms, words, mapping, draw)
        for matcher in targets:
            loads[matcher] += 1
    busiest = max(loads)
    mean = sum(loads) / len(loads)
    return Modelled(
        throughput=len(posts) / busiest if busiest else float("inf"),
        spread=sum(loads) / len(posts),
        imbalance=busiest / mean if mean else 1.0,
        loads=tuple(loads),
    )


def best(scores: Mapping[str, Modelled]) -> str:
    """The name of the highest modelled throughput; the first of equals (in ``scores``' order)."""
    if not scores:
        raise ValueError("nothing to choose from")
    return max(scores, key=lambda name: scores[name].throughput)
