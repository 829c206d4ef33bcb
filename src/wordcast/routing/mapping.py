"""Publication routing and subscription eligibility (S³-TM §3.1, Eq. 3.1; ch. 2 scoped any-cast).

A mapping M assigns each word to one matcher. A publication P is multicast to
K(P, M) = {M(w) : w ∈ P ∩ s(W)}, the matchers of its *subscribed* words. A subscription S may be
placed on any eligible matcher B(S, M) = {M(w) : w ∈ S}: whichever it is, every publication that
contains all of S contains the word that made the matcher eligible, so it reaches that matcher.

Mappings are versioned. Version 0 is the default: words hashed with a stable hash (CRC-32 of the
UTF-8 bytes), never Python's randomised ``hash()``, so every process computes the same M. A learned
mapping (:class:`LearnedMapping`, from SALB or a baseline) maps the words it saw and falls back to
the same stable hash for any word it did not (§3.1: "we fallback to the default policy").

Hot words (§5.1) are split into k copies ``word#0 … word#k-1``, each mapped on its own; a
publication carrying a hot word goes to the matcher of one random copy, and the router tells the
matchers which copy it drew (:func:`route` returns the draws). A hot word therefore makes no
matcher eligible: a subscription is placed through its other words, and a subscription made only
of hot words is multicast to the matchers of every copy of its least frequent hot word
(:func:`hot_multicast`).

The router's draw (:func:`keyed_draw`) is a hash of the publication's id and the word rather than
a random number: over many publications it spreads as evenly, and a batch sent again (a client
retrying a refusal) reaches the same copies and matchers, so its matches come in the same messages
with the same ``webhook-id``s.

Routers go one step further than Eq. 3.1 (wordcast's extension, not in the seeds): they send P to
M(w) only if that matcher's subscription word map H(M(w)) (§4.2) holds w, K_H(P, M) =
{M(w) : w ∈ P, w ∈ H(M(w))} ⊆ K(P, M) (:func:`route_held`). Nothing is missed: a subscription S on
matcher i was placed there because some w ∈ S has M(w) = i (or, multicast, a copy of its least
frequent hot word maps there), and w ∈ H(i) because S is on i; every publication containing S
contains w, so it still reaches i. What is saved are the copies sent to a matcher for a word that
only subscriptions placed elsewhere contain: with few subscriptions, most of them.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Collection, Iterable, Mapping
from random import Random

COPY_SEPARATOR = "#"

Draw = Callable[[str, int], int]
"""``draw(word, k)`` picks which of hot word ``word``'s k copies a publication goes to."""


def stable_hash(word: str) -> int:
    return zlib.crc32(word.encode("utf-8"))


def copy_name(word: str, copy: int) -> str:
    return f"{word}{COPY_SEPARATOR}{copy}"


class HashMapping:
    """M(w) = stable_hash(w) mod N, memoised because the router asks for the same words constantly."""

    __slots__ = ("_cache", "matchers", "splits", "version")

    def __init__(self, matchers: int, version: int = 0) -> None:
        if matchers < 1:
            raise ValueError("at least one matcher is needed")
        self.matchers = matchers
        self.version = version
        self.splits: Mapping[str, int] = {}  # no hot words: hashing does not learn frequencies
        self._cache: dict[str, int] = {}

    def __call__(self, word: str) -> int:
        matcher = self._cache.get(word)
        if matcher is None:
            matcher = self._cache[word] = stable_hash(word) % self.matchers
        return matcher

    def frequency(self, word: str) -> int:
        return 0


class LearnedMapping(HashMapping):
    """A learned M: the words it maps, the hot words' copy counts, and the hashing fallback."""

    __slots__ = ("_frequencies", "words")

    def __init__(
        self,
        version: int,
        matchers: int,
        words: Mapping[str, int],
        splits: Mapping[str, int] | None = None,
        frequencies: Mapping[str, int] | None = None,
    ) -> None:
        super().__init__(matchers, version)
        bad = [w for w, m in words.items() if not 0 <= m < matchers]
        if bad:
            raise ValueError(f"words mapped outside 0..{matchers - 1}: {bad[:5]}")
        self.words = dict(words)
        self.splits = dict(splits or {})
        self._frequencies = dict(frequencies or {})

    def __call__(self, word: str) -> int:
        # The learned words are looked up where they are; the hash cache holds only the fallbacks,
        # so a large mapping is not kept twice.
        matcher = self.words.get(word)
        return matcher if matcher is not None else HashMapping.__call__(self, word)

    def frequency(self, word: str) -> int:
        """How many learning publications carried a hot word (for choosing the least frequent)."""
        return self._frequencies.get(word, 0)


def eligible_matchers(terms: Iterable[str], mapping: HashMapping) -> set[int]:
    """B(S, M): the matchers a subscription may be placed on (hot words make none eligible)."""
    splits = mapping.splits
    return {mapping(term) for term in terms if term not in splits}


def hot_multicast(
    terms: Iterable[str], mapping: HashMapping
) -> tuple[str, dict[int, frozenset[int]]]:
    """§5.1 for a subscription made only of hot words: its least frequent hot word, and for each
    matcher holding one of that word's copies, which copies (a publication drew exactly one)."""
    word = min(terms, key=lambda t: (mapping.frequency(t), t))
    copies: dict[int, set[int]] = {}
    for copy in range(mapping.splits[word]):
        copies.setdefault(mapping(copy_name(word, copy)), set()).add(copy)
    return word, {matcher: frozenset(c) for matcher, c in copies.items()}


class WordHolders(dict[str, int]):
    """For each subscribed word w, a bit mask of the matchers whose H(i) holds it.

    Its keys are s(W), so it stands in wherever a collection of subscribed words is wanted.
    """

    def hold(self, matcher: int, words: Iterable[str]) -> None:
        bit = 1 << matcher
        for word in words:
            self[word] = self.get(word, 0) | bit

    def drop(self, matcher: int, words: Iterable[str]) -> None:
        keep = ~(1 << matcher)
        for word in words:
            mask = self.get(word, 0) & keep
            if mask:
                self[word] = mask
            else:
                self.pop(word, None)

    def holders(self, word: str) -> list[int]:
        mask, matchers = self.get(word, 0), []
        while mask:
            low = mask & -mask
            matchers.append(low.bit_length() - 1)
            mask ^= low
        return matchers


def keyed_draw(key: str) -> Draw:
    """Copies drawn by a hash of ``key`` (a publication's id) and the word: the same publication
    always draws the same copy of a word, different publications spread over its copies evenly and
    independently for each word."""

    def draw(word: str, copies: int) -> int:
        # CRC-32 is linear: for two words of one length, crc(id + w1) ^ crc(id + w2) is the same
        # for every id, so their copies would be drawn in lockstep. MurmurHash3's finaliser
        # (fmix32) mixes every bit into every other, which breaks that tie. The id's CRC is
        # taken here, not up front: most publications draw no copy at all.
        h = zlib.crc32(word.encode("utf-8"), zlib.crc32(key.encode("utf-8")))
        h ^= h >> 16
        h = h * 0x85EBCA6B & 0xFFFFFFFF
        h ^= h >> 13
        h = h * 0xC2B2AE35 & 0xFFFFFFFF
        h ^= h >> 16
        return h % copies

    return draw


def random_draw(rng: Random) -> Draw:
    """Copies drawn at random from ``rng``, as §5.1 says: for models and benchmarks."""
    return lambda _word, copies: rng.randrange(copies)


def route_held(
    terms: Iterable[str],
    held: Mapping[str, int],
    mapping: HashMapping,
    draw: Draw | None = None,
) -> tuple[set[int], dict[str, int]]:
    """K_H(P, M): :func:`route` sending a word only to its matcher when that matcher's H holds it.

    ``held`` maps each subscribed word to the bit mask of the matchers holding it
    (:class:`WordHolders`). A hot word's copy is drawn as in :func:`route` (and returned, for the
    matchers' multicast indexes), then sent only if the drawn copy's matcher holds the word.
    """
    splits = mapping.splits
    targets: set[int] = set()
    if not splits:
        for term in terms:
            mask = held.get(term)
            if mask:
                matcher = mapping(term)
                if mask >> matcher & 1:
                    targets.add(matcher)
        return targets, {}
    if draw is None:
        raise ValueError("a mapping with hot words needs a draw")
    drawn: dict[str, int] = {}
    for term in terms:
        mask = held.get(term)
        if not mask:
            continue
        copies = splits.get(term)
        if copies:
            copy = drawn[term] = draw(term, copies)
            matcher = mapping(copy_name(term, copy))
        else:
            matcher = mapping(term)
        if mask >> matcher & 1:
            targets.add(matcher)
    return targets, drawn


def route(
    terms: Iterable[str],
    subscribed: Collection[str],
    mapping: HashMapping,
    draw: Draw | None = None,
) -> tuple[set[int], dict[str, int]]:
    """K(P, M) (Eq. 3.1), and the copy drawn for each subscribed hot word of the publication.

    ``draw(word, k)`` picks one of the word's k copies (:func:`keyed_draw` in the router,
    :func:`random_draw` in models); only a mapping with hot words calls it.
    """
    splits = mapping.splits
    targets: set[int] = set()
    if not splits:
        for term in terms:
            if term in subscribed:
                targets.add(mapping(term))
        return targets, {}
    if draw is None:
        raise ValueError("a mapping with hot words needs a draw")
    drawn: dict[str, int] = {}
    for term in terms:
        if term not in subscribed:
            continue
        copies = splits.get(term)
        if copies:
            copy = drawn[term] = draw(term, copies)
            targets.add(mapping(copy_name(term, copy)))
        else:
            targets.add(mapping(term))
    return targets, drawn


def word_votes(
    terms: Iterable[str],
    subscribed: Collection[str],
    mapping: HashMapping,
    drawn: Mapping[str, int],
) -> dict[int, int]:
    """How many of a publication's subscribed words map to each matcher of K(P, M), with the hot
    words' drawn copies (consensus shedding, S³-TM §5.2.1)."""
    votes: dict[int, int] = {}
    for term in terms:
        if term not in subscribed:
            continue
        copy = drawn.get(term)
        matcher = mapping(term if copy is None else copy_name(term, copy))
        votes[matcher] = votes.get(matcher, 0) + 1
    return votes


def held_word_votes(
    terms: Iterable[str],
    held: Mapping[str, int],
    mapping: HashMapping,
    drawn: Mapping[str, int],
) -> dict[int, int]:
    """:func:`word_votes` for the routers' K_H (:func:`route_held`): only a word whose matcher
    holds it sends the publication there, so only such words vote for their matcher."""
    votes: dict[int, int] = {}
    for term in terms:
        mask = held.get(term)
        if not mask:
            continue
        copy = drawn.get(term)
        matcher = mapping(term if copy is None else copy_name(term, copy))
        if mask >> matcher & 1:
            votes[matcher] = votes.get(matcher, 0) + 1
    return votes
