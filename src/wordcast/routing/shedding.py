"""Adaptive load shedding for publication routing (S³-TM §5.2).

**What to shed (§5.2.1).** Under an input spike the router limits the number of matchers a
publication is multicast to, instead of dropping publications at random: a publication whose
K(P, M) holds more than m matchers goes only to the m of them with the highest utility,

- *consensus* shedding: the matchers that most of the publication's words map to;
- *subscription* shedding: the matchers holding the most subscriptions on the publication's
  words, Σ_{w ∈ P} H_i(w) (the paper finds it the more accurate of the two, §6.5).

m may be fractional: the matcher ranked after the first ⌊m⌋ is kept with probability m − ⌊m⌋
("Δ could be less than 1, which corresponds to probabilistic forwarding"). Ties are broken at
random, so that shedding does not favour low-numbered matchers. Shedding can only lose matches,
never invent them.

**How much to shed (§5.2.2).** Level 0 sheds nothing (m = ∞); level l ≥ 1 has m = k − (l − 1)Δ
(the paper: k = 7, Δ = 1). k is capped at N − 1, since m ≥ N cuts nothing, and the last level
keeps m ≥ 1: a publication always reaches one matcher. The level follows the fullness of the
router's buffer of size b, split into an *ideal* segment b^i and a *stable* one b^s
(b = b^i + b^s); fullness past b is the *overload* segment. Every adaptation period the level goes
up in overload and down in the ideal segment, and stays in the stable one. When the previous
adaptation saw the same segment, the level moves again only if fullness has not moved the right
way since (in overload: not gone down; in the ideal segment: not gone up).

The ratio r = b^i / b^s comes from the load L(l) at each level: one level down must never take the
buffer from the ideal segment into overload, Eq. 5.1, (b^s + b^i) / b^s > L(l − Δ) / L(l) for every
l, i.e. r > max_l L(l − Δ) / L(l) − 1. Eq. 5.2 as printed, r = 1 − max_l L(l) / L(l − Δ), is smaller
than that bound whenever a level changes the load at all (for x = L(l) / L(l − Δ) < 1,
1/x − 1 > 1 − x), so it would break the condition it is derived from; we use the bound of 5.1
itself, with a small margin. L(l) is the copies routed per publication at level l (the matchers'
load, Eq. 3.6), estimated from the sizes of the K(P, M) routed recently (:class:`SpreadHistogram`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

IDEAL, STABLE, OVERLOAD = "ideal", "stable", "overload"

# Eq. 5.1 is a strict inequality; the margin keeps it strict under a noisy estimate of L.
RATIO_MARGIN = 0.05
# With no level changing the load (or no traffic yet), the ideal segment still needs room: a
# level can only come down from inside it.
MIN_RATIO = 0.1


@dataclass(frozen=True)
class Levels:
    """The shedding levels of a cluster of ``matchers`` matchers: m = k − (l − 1)·step for l ≥ 1."""

    k: float = 7.0
    step: float = 1.0
    matchers: int = 8

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be at least 1 (got {self.k:g})")
        if self.step <= 0:
            raise ValueError(f"the step Δ must be positive (got {self.step:g})")
        if self.matchers < 1:
            raise ValueError("at least one matcher is needed")

    @property
    def top(self) -> float:
        """m at level 1."""
        return min(self.k, self.matchers - 1)

    @property
    def max_level(self) -> int:
        if self.top < 1:
            return 0  # one matcher: every publication goes to it or nowhere
        return 1 + math.floor((self.top - 1) / self.step + 1e-9)

    def threshold(self, level: int) -> float:
        """m at ``level``: the most matchers a publication is sent to (∞ at level 0)."""
        if not 0 <= level <= self.max_level:
            raise ValueError(f"level {level} outside 0..{self.max_level}")
        return math.inf if level == 0 else self.top - (level - 1) * self.step


def keep(scores: Mapping[int, float], m: float, random: Callable[[], float]) -> set[int]:
    """The targets a publication still goes to: the ⌊m⌋ best-scored, and the next one with
    probability m − ⌊m⌋; ``random()`` in [0, 1) breaks ties and draws that probability."""
    if m >= len(scores):
        return set(scores)
    ranked = sorted(scores, key=lambda matcher: (-scores[matcher], random()))
    whole = math.floor(m)
    kept = set(ranked[:whole])
    if m > whole and random() < m - whole:
        kept.add(ranked[whole])
    return kept


def consensus_scores(words_of: Mapping[int, int], targets: Collection[int]) -> dict[int, float]:
    """Consensus utility: how many of the publication's words map to each target."""
    return {matcher: float(words_of.get(matcher, 0)) for matcher in targets}


def subscription_scores(
    terms: Iterable[str], targets: Collection[int], word_maps: Mapping[int, Mapping[str, int]]
) -> dict[int, float]:
    """Subscription utility: Σ_{w ∈ P} H_i(w), the subscriptions on target i that hold a word of
    the publication (``word_maps[i]`` is H(i) with its counts)."""
    terms = list(terms)
    scores: dict[int, float] = {}
    for matcher in targets:
        counts = word_maps.get(matcher, {})
        scores[matcher] = float(sum(counts.get(term, 0) for term in terms))
    return scores


@dataclass
class SpreadHistogram:
    """How many recent publications had each |K(P, M)|, to estimate L(l) for every level.

    ``decay`` ages the counts once per adaptation period, so the estimate follows the traffic.
    """

    counts: dict[int, float] = field(default_factory=dict)

    def record(self, size: int, publications: float = 1.0) -> None:
        self.counts[size] = self.counts.get(size, 0.0) + publications

    def decay(self, factor: float) -> None:
        self.counts = {size: n * factor for size, n in self.counts.items() if n * factor >= 1e-3}

    def load(self, m: float) -> float:
        """Expected copies routed at threshold m: Σ_P min(|K(P, M)|, m) (fractional m is the
        expectation of the probabilistic last copy)."""
        return sum(n * min(size, m) for size, n in self.counts.items())


def segment_ratio(loads: Iterable[float]) -> float:
    """r = b^i / b^s from the loads L(0), L(1), … of successive levels (Eq. 5.1)."""
    loads = list(loads)
    steps = [before / after for before, after in itertools.pairwise(loads) if after > 0]
    worst = max(steps, default=1.0)
    return max(MIN_RATIO, worst - 1 + RATIO_MARGIN)


@dataclass
class Controller:
    """The adaptive shedding level of one router (§5.2.2); :meth:`adapt` once per period."""

    levels: Levels
    buffer: float
    level: int = 0
    ratio: float = 1.0
    _previous: tuple[str, float] | None = None

    def __post_init__(self) -> None:
        if self.buffer <= 0:
            raise ValueError("the buffer size b must be positive")

    @property
    def threshold(self) -> float:
        return self.levels.threshold(self.level)

    @property
    def ideal_size(self) -> float:
        """b^i = b·r / (1 + r)."""
        return self.buffer * self.ratio / (1 + self.ratio)

    def segment(self, fullness: float) -> str:
        if fullness >= self.buffer:
            return OVERLOAD
        return IDEAL if fullness < self.ideal_size else STABLE

    def adapt(self, fullness: float, loads: Iterable[float] | None = None) -> int:
        """Move the level for the current ``fullness`` (publications in the buffer); ``loads`` is
        L(l) for l = 0 … max level, when known, to size the segments first."""
        if loads is not None:
            self.ratio = segment_ratio(loads)
        segment = self.segment(fullness)
        previous = self._previous
        again = previous is not None and previous[0] == segment
        if segment == OVERLOAD and not (again and previous and fullness < previous[1]):
            self.level = min(self.level + 1, self.levels.max_level)
        elif segment == IDEAL and not (again and previous and fullness > previous[1]):
            self.level = max(self.level - 1, 0)
        self._previous = (segment, fullness)
        return self.level
