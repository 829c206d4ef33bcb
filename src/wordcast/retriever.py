"""REtriever: DFA keyword matching with recombination for wildcard patterns (Wang & Jacobsen, 2004).

The structure of §2.2: every pattern is cut into phrases on its operators, each phrase is cut into
words (§3.1: noSplit, singleSplit or multipleSplit, steered by how many states the existing DFA
already shares), and every word is inserted into one shared DFA whose states carry a share degree,
accept records and half-accept records (Tables 1–3). The last word of a pattern ends in its accept
state; every other word in a half-accept state. Records are chained to the record of the previous
word and say what must separate the two: exactly ``numQuestion`` characters, or at least that many
when a ``*`` lies between them (``hasStar``).

Matching (Alg. MATCH, §3.3.2) slides a window over the publication: from every start position the
DFA is executed for as long as transitions exist; every half-accept record reached notes the
position pair (matchStart, matchEnd) of its word, and every accept record reached recombines: the
pattern matches if a chain of noted positions satisfies every gap back to the first word.

We recombine incrementally instead of walking back at the accept state: a position pair is noted on
a record only if it recombines with a pair already noted on the previous record. Windows are
processed in increasing start order and a previous word always ends before the next one starts, so
the noted pairs are exactly those the paper's backward walk would accept, and the accept state's
check becomes one lookup instead of a search over every combination. Noted pairs live in a
per-call table rather than in the records, so concurrent or successive matches share nothing and
nothing has to be reset.

Deletion (Alg. DELETE, §3.3.3) walks bottom-up from each word's accept state, removing the
pattern's records and decrementing share degrees, dropping states that reach zero; deleting what
was inserted leaves exactly the states that were there before.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Literal

from .patterns import NO_GAP, Gap, Pattern

Split = Literal["none", "single", "multiple"]
SPLITS: tuple[Split, ...] = ("none", "single", "multiple")
Score = Callable[[int, int], int]


class State:
    """A DFA state (Table 1)."""

    __slots__ = ("accepts", "half_accepts", "id", "key", "parent", "share_degree", "transitions")

    def __init__(self, state_id: int, key: str, parent: State | None) -> None:
        self.id = state_id
        self.key = key
        self.parent = parent
        self.share_degree = 0
        self.transitions: dict[str, State] = {}
        self.accepts: list[Record] = []
        self.half_accepts: list[Record] = []


class Record:
    """An acceptRecord or halfAcceptRecord (Table 3), without the per-publication positions.

    ``questions``/``star`` describe the gap before this record's word; for the first word they say
    how many characters must precede it. ``trailing`` (accept records only) is how many characters
    must follow the last word.
    """

    __slots__ = ("length", "previous", "questions", "star", "state", "sub", "trailing")

    def __init__(
        self, sub: Hashable, state: State | None, length: int, previous: Record | None, gap: Gap
    ) -> None:
        self.sub = sub
        self.state = state
        self.length = length
        self.previous = previous
        self.questions = gap.questions
        self.star = gap.star
        self.trailing = 0


@dataclass(frozen=True, slots=True)
class _Placed:
    words: tuple[str, ...]
    records: tuple[Record, ...]


class REtriever:
    """Pattern index: ``add``, ``remove`` and ``match`` (on normalised text) at any time."""

    def __init__(
        self, split: Split = "none", min_word_len: int = 2, min_split_score: int = 2
    ) -> None:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
        self.split = split
        self.min_word_len = min_word_len
        self.min_split_score = min_split_score
        self._ids = itertools.count(1)
        self.root = State(0, "", None)
        self._subs: dict[Hashable, _Placed] = {}

    def __len__(self) -> int:
        return len(self._subs)

    def __contains__(self, sub_id: Hashable) -> bool:
        return sub_id in self._subs

    # -- splitting (§3.1) -------------------------------------------------------------------------
    def _shared_prefixes(self, phrase: str) -> list[int]:
        """For each start j, how many states the DFA already shares along phrase[j:].

        GETSCORE(phrase, j, i) is then min(shared[j], i - j): the paper's score, computed once per
        start instead of once per (start, end).
        """
        shared = []
        for start in range(len(phrase)):
            state, count = self.root, 0
            for ch in phrase[start:]:
                nxt = state.transitions.get(ch)
                if nxt is None:
                    break
                state, count = nxt, count + 1
            shared.append(count)
        return shared

    def words(self, phrase: str) -> list[str]:
        """The words ``phrase`` is inserted as, under this index's split variant."""
        if self.split == "none" or len(phrase) < 2 * self.min_word_len:
            return [phrase]
        shared = self._shared_prefixes(phrase)

        def score(start: int, end: int) -> int:
            return min(shared[start], end - start)

        if self.split == "single":
            return self._single_split(phrase, score)
        return self._multiple_split(phrase, score)

    def _single_split(self, phrase: str, score: Score) -> list[str]:
        """Alg. SINGLESPLIT: the best single cut if it shares more than MIN_SPLIT_SCORE more."""
        length, low = len(phrase), self.min_word_len
        best, cut = score(0, length), 0
        for i in range(low, length - low + 1):
            candidate = score(0, i) + score(i, length)
            if candidate > best + self.min_split_score:
                best, cut = candidate, i
        return [phrase] if cut == 0 else [phrase[:cut], phrase[cut:]]

    def _multiple_split(self, phrase: str, score: Score) -> list[str]:
        """Alg. MULTIPLESPLIT: dynamic programme over prefixes for the best set of cuts."""
        length, low = len(phrase), self.min_word_len
        best = [0] * (length + 1)  # best[i]: max score of phrase[:i] with any cuts
        cuts = [0] * (length + 1)  # cuts[i]: the last cut in that best split (0: none)
        for i in range(1, length + 1):
            top, cut = score(0, i), 0
            if i > 2 * low:
                for j in range(low, i - low + 1):
                    candidate = best[j] + score(j, i)
                    if candidate > top + self.min_split_score or (candidate > top and cut != 0):
                        top, cut = candidate, j
            best[i], cuts[i] = top, cut
        positions = []
        end = length
        while cuts[end]:
            positions.append(cuts[end])
            end = cuts[end]
        bounds = [0, *reversed(positions), length]
        return [phrase[a:b] for a, b in itertools.pairwise(bounds)]

    # -- insert (§3.3.1) --------------------------------------------------------------------------
    def _insert_word(self, word: str) -> State:
        state = self.root
        for ch in word:
            nxt = state.transitions.get(ch)
            if nxt is None:
                nxt = State(next(self._ids), ch, state)
                state.transitions[ch] = nxt
            nxt.share_degree += 1
            state = nxt
        return state

    def add(self, sub_id: Hashable, pattern: Pattern) -> None:
        if sub_id in self._subs:
            raise ValueError(f"pattern subscription {sub_id!r} is already indexed")
        words: list[str] = []
        records: list[Record] = []
        previous: Record | None = None
        for gap, phrase in zip(pattern.gaps, pattern.phrases, strict=False):
            for position, word in enumerate(self.words(phrase)):
                state = self._insert_word(word)
                record = Record(
                    sub_id, state, len(word), previous, gap if position == 0 else NO_GAP
                )
                state.half_accepts.append(record)
                words.append(word)
                records.append(record)
                previous = record
        # The last word's record moves from the half-accept set to the accept set of its state.
        last, accept_state = records[-1], state
        accept_state.half_accepts.pop()
        accept_state.accepts.append(last)
        last.trailing = pattern.trailing.questions
        self._subs[sub_id] = _Placed(tuple(words), tuple(records))

    # -- delete (§3.3.3) --------------------------------------------------------------------------
    def remove(self, sub_id: Hashable) -> bool:
        placed = self._subs.pop(sub_id, None)
        if placed is None:
            return False
        last = placed.records[-1]
        for record in reversed(placed.records):  # bottom-up: the accept state first
            state: State | None = record.state
            assert state is not None
            (state.accepts if record is last else state.half_accepts).remove(record)
            while state is not None and state is not self.root:
                state.share_degree -= 1
                parent = state.parent
                if state.share_degree == 0 and parent is not None:
                    del parent.transitions[state.key]
                state = parent
        return True

    # -- match (§3.3.2) ---------------------------------------------------------------------------
    def match(self, text: str) -> set[Hashable]:
        """The ids of the patterns ``text`` (already normalised) matches."""
        found: set[Hashable] = set()
        noted: dict[Record, Noted] = {}
        root_transitions = self.root.transitions
        n = len(text)
        for start in range(n):
            state = root_transitions.get(text[start])
            end = start
            while state is not None:
                if state.half_accepts:
                    for record in state.half_accepts:
                        if recombines(record, start, noted):
                            entry = noted.get(record)
                            if entry is None:
                                noted[record] = Noted(end)
                            else:
                                entry.ends.add(end)
                if state.accepts:
                    for record in state.accepts:
                        if (
                            record.sub not in found
                            and end + record.trailing < n
                            and recombines(record, start, noted)
                        ):
                            found.add(record.sub)
                end += 1
                if end == n:
                    break
                state = state.transitions.get(text[end])
        return found

    # -- inspection -------------------------------------------------------------------------------
    def states(self) -> Iterator[State]:
        stack = [self.root]
        while stack:
            state = stack.pop()
            yield state
            stack.extend(state.transitions.values())

    def state_count(self) -> int:
        """States besides the initial one: the DFA size §4 compares across split variants."""
        return sum(1 for _ in self.states()) - 1

    def structure(self) -> dict[str, tuple[int, tuple[str, ...], tuple[str, ...]]]:
        """Path -> (share degree, accepted subs, half-accepted subs), for comparing DFAs."""
        out = {}
        stack: list[tuple[str, State]] = [("", self.root)]
        while stack:
            path, state = stack.pop()
            out[path] = (
                state.share_degree,
                tuple(sorted(repr(r.sub) for r in state.accepts)),
                tuple(sorted(repr(r.sub) for r in state.half_accepts)),
            )
            stack.extend((path + key, child) for key, child in state.transitions.items())
        return out

    def words_of(self, sub_id: Hashable) -> tuple[str, ...]:
        return self._subs[sub_id].words


class Noted:
    """The position pairs noted on one record during one match, by their ends (numMatch = len).

    A word has one length, so its end fixes its start; ends arrive in increasing order, so the
    first is the smallest, which is all a ``*`` gap needs.
    """

    __slots__ = ("ends", "first")

    def __init__(self, end: int) -> None:
        self.first = end
        self.ends = {end}


def recombines(record: Record, start: int, noted: dict[Record, Noted]) -> bool:
    """Whether the word of ``record``, matched at ``start``, extends a chain of noted positions."""
    previous = record.previous
    if previous is None:
        return start >= record.questions
    entry = noted.get(previous)
    if entry is None:
        return False
    if record.star:
        return entry.first + record.questions < start
    return start - 1 - record.questions in entry.ends
