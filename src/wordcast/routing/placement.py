"""Where a keyword subscription lives, for which mapping versions (S³-TM Alg. 2 and §5.1, versioned).

A subscription is evaluated on the matcher LASP placed it on; a learned mapping can change which
matchers are eligible, and routers switch to a new mapping version at slightly different moments.
So a subscription carries a list of *placements*, each valid for a range of mapping versions
``[first, until)`` (``until`` None: until further notice). Every routed batch is tagged with the
version that routed it, and a matcher evaluates a subscription on a publication only when one of
its placements on that matcher serves the batch's version. Exactly one placement serves each
version (and, for a multicast subscription of hot words, each drawn copy), so every publication is
evaluated against every subscription exactly once whichever version routed it.

A placement of a subscription made only of hot words (§5.1) names its least frequent hot word and
the copies of it the matcher holds: it serves a publication only when the router drew one of them.

Pattern subscriptions are routed by their anchors, not by the mapping, so a mapping change leaves
them where they are, except when it removes their matcher (a mapping for fewer matchers: the
cluster is scaled down) or when their matchers' pattern loads have drifted far apart (a mapping for
more matchers: the new ones hold none). Either way they are re-placed with the same versioned
placements.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import orjson

from wordcast.routing.lasp import UNIT_COST, place_among
from wordcast.routing.mapping import HashMapping, eligible_matchers, hot_multicast


@dataclass(frozen=True, slots=True)
class Placement:
    matcher: int
    first: int
    until: int | None = None
    hot: str = ""
    copies: frozenset[int] = frozenset()

    def serves(self, version: int, drawn: Mapping[str, int]) -> bool:
        if version < self.first or (self.until is not None and version >= self.until):
            return False
        return not self.hot or drawn.get(self.hot, -1) in self.copies

    @property
    def is_open(self) -> bool:
        return self.until is None


def encode(placements: Sequence[Placement]) -> str:
    return orjson.dumps(
        [[p.matcher, p.first, p.until, p.hot, sorted(p.copies)] for p in placements]
    ).decode()


@functools.lru_cache(maxsize=4096)
def decode(text: str) -> tuple[Placement, ...]:
    """The placements ``encode`` wrote. Cached: most subscriptions of a matcher share the same
    few (one placement, from version 0 on), and a restart reads a million of them; the values
    are immutable, so sharing them is safe (and saves their memory too)."""
    return tuple(
        Placement(int(m), int(first), None if until is None else int(until), hot, frozenset(c))
        for m, first, until, hot, c in orjson.loads(text)
    )


def matchers_of(placements: Iterable[Placement]) -> list[int]:
    return sorted({p.matcher for p in placements})


def candidates(terms: Sequence[str], mappings: Iterable[HashMapping]) -> set[int]:
    """Every matcher a plan over ``mappings`` may choose: the ones whose H(i) LASP looks at."""
    found: set[int] = set()
    for mapping in mappings:
        eligible = eligible_matchers(terms, mapping)
        found |= eligible or set(hot_multicast(terms, mapping)[1])
    return found


def _plan_one(
    terms: Sequence[str],
    mapping: HashMapping,
    until: int | None,
    sizes: Sequence[int],
    known: Mapping[int, int],
    cost: Callable[[float], float],
) -> list[Placement]:
    eligible = eligible_matchers(terms, mapping)
    if eligible:
        matcher = place_among(len(set(terms)), eligible, sizes, known, cost)
        return [Placement(matcher, mapping.version, until)]
    word, copies = hot_multicast(terms, mapping)
    return [Placement(m, mapping.version, until, word, c) for m, c in sorted(copies.items())]


def plan(
    terms: Sequence[str],
    mappings: Sequence[HashMapping],
    sizes: Sequence[int],
    known: Mapping[int, int],
    cost: Callable[[float], float] = UNIT_COST,
) -> tuple[Placement, ...]:
    """Placements of a new subscription serving every version in use (``mappings``, oldest first).

    ``sizes[i]`` is |H(i)| and ``known[i]`` how many of the terms H(i) holds already (LASP's input).
    """
    if not terms:
        raise ValueError("a subscription needs at least one term")
    ordered = sorted(mappings, key=lambda m: m.version)
    placements: list[Placement] = []
    previous: list[Placement] = []
    for index, mapping in enumerate(ordered):
        until = ordered[index + 1].version if index + 1 < len(ordered) else None
        step = _plan_one(terms, mapping, until, sizes, known, cost)
        if _single(previous) and _single(step) and previous[0].matcher == step[0].matcher:
            # The same matcher serves both versions: one placement, nothing to move later.
            step = [Placement(step[0].matcher, previous[0].first, until)]
            placements[-1] = step[0]
        else:
            placements.extend(step)
        previous = step
    return tuple(placements)


class PlanningView:
    """LASP's view of the word maps while a batch of subscriptions is placed in memory.

    ``sizes[i]`` is |H(i)| and ``held[i]`` the words of H(i) among those the batch uses, as read
    once for the batch; :meth:`hold` then adds each placed subscription's words, so each
    placement sees the ones before it exactly as it would have read them from Redis had they
    been stored one by one (concurrent writers aside, as for a single placement).
    """

    def __init__(self, sizes: Sequence[int], held: Mapping[int, Collection[str]]) -> None:
        self.sizes = list(sizes)
        self.held = {matcher: set(words) for matcher, words in held.items()}

    def known(self, terms: Sequence[str], matchers: Iterable[int]) -> dict[int, int]:
        """How many of ``terms`` each of ``matchers``' H(i) holds."""
        return {m: sum(1 for t in terms if t in self.held.get(m, ())) for m in matchers}

    def hold(self, terms: Sequence[str], matchers: Iterable[int]) -> None:
        """Record a subscription of ``terms`` stored on ``matchers``."""
        for matcher in matchers:
            held = self.held.setdefault(matcher, set())
            for term in terms:
                if term not in held:
                    held.add(term)
                    self.sizes[matcher] += 1


def _single(step: Sequence[Placement]) -> bool:
    return len(step) == 1 and not step[0].hot


def still_valid(
    placements: Sequence[Placement], terms: Sequence[str], mapping: HashMapping
) -> bool:
    """Whether the open placements serve ``mapping``'s version exactly once for every publication."""
    current = [p for p in placements if p.is_open]
    eligible = eligible_matchers(terms, mapping)
    if eligible:
        return len(current) == 1 and not current[0].hot and current[0].matcher in eligible
    word, copies = hot_multicast(terms, mapping)
    return sorted((p.matcher, p.hot, p.copies) for p in current) == sorted(
        (m, word, c) for m, c in copies.items()
    )


def reopen(
    placements: Sequence[Placement],
    terms: Sequence[str],
    mapping: HashMapping,
    sizes: Sequence[int],
    known: Mapping[int, int],
    cost: Callable[[float], float] = UNIT_COST,
) -> tuple[Placement, ...]:
    """Close the open placements at ``mapping``'s version and place the subscription anew for it."""
    version = mapping.version
    kept = [
        p if not p.is_open else Placement(p.matcher, p.first, version, p.hot, p.copies)
        for p in placements
        if not (p.is_open and p.first >= version)
    ]
    return (*kept, *_plan_one(terms, mapping, None, sizes, known, cost))


def prune(placements: Sequence[Placement], oldest_in_use: int) -> tuple[Placement, ...]:
    """Drop the placements that only serve versions no router uses any more."""
    return tuple(p for p in placements if p.until is None or p.until > oldest_in_use)


def place_pattern(
    owners: Collection[int],
    loads: Mapping[int, int],
    matchers: int,
    choice: Callable[[list[int]], int],
) -> int:
    """The matcher (below ``matchers``) for a pattern whose anchor ``owners`` hold already.

    Joining an owner adds no routing traffic (the anchor's publications reach it already), unless
    that would unbalance the pattern load; otherwise the least-loaded matcher takes it.
    """
    load = [loads.get(m, 0) for m in range(matchers)]
    least = min(load)
    slack = max(8.0, 0.1 * sum(load) / len(load))
    near_least = [m for m in owners if m < matchers and load[m] <= least + slack]
    if near_least:
        return min(near_least, key=load.__getitem__)
    return choice([m for m, value in enumerate(load) if value == least])


def pattern_still_valid(sub_placements: Sequence[Placement], matcher: int, matchers: int) -> bool:
    """Whether a pattern's open placement (``matcher`` if it has none) survives a mapping for
    ``matchers`` matchers."""
    current = [p.matcher for p in sub_placements if p.is_open] or [matcher]
    return all(m < matchers for m in current)


def move_pattern(
    sub_placements: Sequence[Placement], matcher: int, version: int, target: int
) -> tuple[Placement, ...]:
    """Close a pattern's open placement at ``version`` and open one on ``target`` from it."""
    current = tuple(sub_placements) or (Placement(matcher, 0),)
    kept = [
        p if not p.is_open else Placement(p.matcher, p.first, version)
        for p in current
        if not (p.is_open and p.first >= version)
    ]
    return (*kept, Placement(target, version))


PATTERN_TOLERANCE = (
    1.25  # most patterns a matcher may hold, over the even share, before rebalancing
)


def rebalance_patterns(
    anchor_counts: Sequence[Mapping[str, int]], tolerance: float = PATTERN_TOLERANCE
) -> dict[tuple[int, str], int]:
    """Anchor groups to move so that no matcher holds more than ``tolerance`` times the even
    share of patterns: {(matcher, anchor): new matcher}, for ``anchor_counts[i]``, matcher i's
    patterns per anchor.

    A group (every pattern of one anchor on one matcher) moves whole: splitting it would send the
    anchor's publications to one more matcher. Greedily, the largest group of the most loaded
    overloaded matcher that fits in half the gap to the least loaded one moves there, so that
    every move lowers the spread of loads; it stops when every matcher is within bounds or no
    overloaded one has a group that fits.
    """
    loads = [sum(counts.values()) for counts in anchor_counts]
    if not loads or not sum(loads):
        return {}
    limit = tolerance * sum(loads) / len(loads)
    moves: dict[tuple[int, str], int] = {}
    while True:
        target = min(range(len(loads)), key=loads.__getitem__)
        over = sorted((m for m in range(len(loads)) if loads[m] > limit), key=lambda m: -loads[m])
        for source in over:
            room = (loads[source] - loads[target]) / 2
            fitting = [
                (count, anchor)
                for anchor, count in anchor_counts[source].items()
                if count <= room and (source, anchor) not in moves
            ]
            if fitting:
                count, anchor = max(fitting)
                moves[(source, anchor)] = target
                loads[source] -= count
                loads[target] += count
                break
        else:  # every matcher within bounds, or no group of an overloaded one fits
            return moves
