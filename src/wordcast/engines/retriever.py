"""REtriever: DFA keyword matching with recombination for wildcard patterns (Wang & Jacobsen, 2004).

The structure of §2.2: every pattern is cut into phrases on its operators, each phrase is cut into
words (§3.1: noSplit, singleSplit or multipleSplit, steered by how many states the existing DFA
already shares), and every word is inserted into one shared DFA whose states carry a share degree,
accept records and half-accept records (Tables 1–3). The last word of a pattern ends in its accept
state; every other word in a half-accept state. Records are chained to the record of the previous
word and say what must separate the two: exactly ``numQuestion`` characters, or at least that many
when a ``*`` lies between them (``hasStar``).

Matching (Alg. MATCH, §3.3.2) slides a window over the publication: from every start position the
DFA is executed for as long as transitions exist, noting the position pairs (matchStart, matchEnd)
of the words it reaches, and patterns whose words' positions *recombine* (a chain of noted
positions satisfies every gap) match. Two recombination strategies give identical results:

``recombination="paper"``  Alg. MATCH as written: every half-accept record reached notes the pair,
    every accept record reached recombines. We recombine incrementally instead of walking back at
    the accept state: a pair is noted on a record only if it recombines with a pair already noted on
    the previous record (windows are processed in increasing start order and a previous word always
    ends before the next one starts, so the noted pairs are exactly those the backward walk would
    accept). Its cost grows with the number of records in the states reached: on real text, where
    short phrases like ``e`` or ``pa`` end thousands of patterns, that dominates (BENCHMARKS.md).

``recombination="anchored"`` (default)  The same positions, noted once per state rather than once
    per record (all records of a state belong to the same word, so their pairs are the same), and
    recombination started only for patterns whose *trigger* word, their longest, was reached; the
    chain is then checked forwards over the noted positions of each of the pattern's words. Work per
    publication is then proportional to the words found plus the patterns whose longest word occurs.

Noted positions live in a per-call table rather than in the records, so successive matches share
nothing and nothing has to be reset.

Deletion (Alg. DELETE, §3.3.3) walks bottom-up from each word's accept state, removing the
pattern's records and decrementing share degrees, dropping states that reach zero; deleting what
was inserted leaves exactly the states that were there before.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from wordcast.query.patterns import NO_GAP, Gap, Pattern

Split = Literal["none", "single", "multiple"]
SPLITS: tuple[Split, ...] = ("none", "single", "multiple")
Recombination = Literal["paper", "anchored"]
Score = Callable[[int, int], int]


class State:
    """A DFA state (Table 1)."""

    __slots__ = (
        "accepts",
        "half_accepts",
        "id",
        "key",
        "parent",
        "share_degree",
        "transitions",
        "triggers",
        "whole",
    )

    def __init__(self, state_id: int, key: str, parent: State | None) -> None:
        self.id = state_id
        self.key = key
        self.parent = parent
        self.share_degree = 0
        self.transitions: dict[str, State] = {}
        self.accepts: list[Record] = []
        self.half_accepts: list[Record] = []
        # Records of the patterns whose longest word ends here, by where their next-longest word
        # ends: only partners that occurred are looked at (see recombine_triggered).
        self.triggers: dict[Any, list[Record]] = {}
        self.whole: list[Hashable] = []  # patterns that are exactly this word: no check needed


class Record:
    """An acceptRecord or halfAcceptRecord (Table 3), without the per-publication positions.

    ``questions``/``star`` describe the gap before this record's word; for the first word they say
    how many characters must precede it. ``trailing`` (accept records only) is how many characters
    must follow the last word. ``where`` is what the word's occurrences are noted under: its DFA
    state here, a keyword in :mod:`wordcast.engines.ac_retriever` (or None there: a short word that is
    looked up in the text only when a candidate needs it). ``chain`` is the pattern's records in
    order, shared by all of them.
    """

    __slots__ = (
        "chain",
        "length",
        "others",
        "previous",
        "questions",
        "star",
        "sub",
        "trailing",
        "where",
        "word",
    )

    def __init__(
        self, sub: Hashable, where: Any, word: str, previous: Record | None, gap: Gap
    ) -> None:
        self.sub = sub
        self.where = where
        self.word = word
        length = len(word)
        self.chain: tuple[Record, ...] = ()
        self.others: frozenset[Any] = frozenset()  # a trigger's other words' ``where``
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
        self,
        split: Split = "none",
        min_word_len: int = 2,
        min_split_score: int = 2,
        recombination: Recombination = "anchored",
    ) -> None:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
        if recombination not in ("paper", "anchored"):
            raise ValueError(f"recombination must be 'paper' or 'anchored', not {recombination!r}")
        self.split = split
        self.recombination = recombination
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
                record = Record(sub_id, state, word, previous, gap if position == 0 else NO_GAP)
                state.half_accepts.append(record)
                words.append(word)
                records.append(record)
                previous = record
        # The last word's record moves from the half-accept set to the accept set of its state.
        last, accept_state = records[-1], state
        accept_state.half_accepts.pop()
        accept_state.accepts.append(last)
        last.trailing = pattern.trailing.questions
        chain = tuple(records)
        for record in chain:
            record.chain = chain
        add_trigger(chain)
        self._subs[sub_id] = _Placed(tuple(words), chain)

    # -- delete (§3.3.3) --------------------------------------------------------------------------
    def remove(self, sub_id: Hashable) -> bool:
        placed = self._subs.pop(sub_id, None)
        if placed is None:
            return False
        last = placed.records[-1]
        remove_trigger(placed.records)
        for record in reversed(placed.records):  # bottom-up: the accept state first
            state: State | None = record.where
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
        if self.recombination == "anchored":
            return self._match_anchored(text)
        return self._match_paper(text)

    def _reached(self, text: str) -> Iterator[tuple[int, int, State]]:
        """(start, end, state) for every word the sliding window reaches, by increasing start."""
        root_transitions = self.root.transitions
        n = len(text)
        for start in range(n):
            state = root_transitions.get(text[start])
            end = start
            while state is not None:
                if state.accepts or state.half_accepts:
                    yield start, end, state
                end += 1
                if end == n:
                    break
                state = state.transitions.get(text[end])

    def _match_anchored(self, text: str) -> set[Hashable]:
        hits: dict[State, list[int]] = {}
        for _, end, state in self._reached(text):
            ends = hits.get(state)
            if ends is None:
                hits[state] = [end]
            else:
                ends.append(end)
        return recombine_triggered(hits, text)

    def _match_paper(self, text: str) -> set[Hashable]:
        found: set[Hashable] = set()
        noted: dict[Record, Noted] = {}
        n = len(text)
        for start, end, state in self._reached(text):
            for record in state.half_accepts:
                if recombines(record, start, noted):
                    entry = noted.get(record)
                    if entry is None:
                        noted[record] = Noted(end)
                    else:
                        entry.ends.add(end)
            for record in state.accepts:
                if (
                    record.sub not in found
                    and end + record.trailing < n
                    and recombines(record, start, noted)
                ):
                    found.add(record.sub)
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


def _trigger(chain: tuple[Record, ...]) -> tuple[Record, bool]:
    """The record recombination starts from (the longest word) and whether it is the whole check."""
    trigger = max(chain, key=lambda record: record.length)
    whole = len(chain) == 1 and trigger.questions == 0 and trigger.trailing == 0
    return trigger, whole


def _partner(trigger: Record, chain: tuple[Record, ...]) -> Any:
    """Where the next-longest noted word is (the trigger's own place when there is none)."""
    others = [r for r in chain if r is not trigger and r.where is not None]
    return max(others, key=lambda record: record.length).where if others else trigger.where


def add_trigger(chain: tuple[Record, ...]) -> None:
    trigger, whole = _trigger(chain)
    if whole:
        trigger.where.whole.append(trigger.sub)
        return
    partner = _partner(trigger, chain)
    noted = {r.where for r in chain if r is not trigger and r.where is not None}
    trigger.others = frozenset(noted - {partner})
    trigger.where.triggers.setdefault(partner, []).append(trigger)


def remove_trigger(chain: tuple[Record, ...]) -> None:
    trigger, whole = _trigger(chain)
    if whole:
        trigger.where.whole.remove(trigger.sub)
        return
    partner = _partner(trigger, chain)
    waiting = trigger.where.triggers[partner]
    waiting.remove(trigger)
    if not waiting:
        del trigger.where.triggers[partner]


def recombine_triggered(hits: dict[Any, list[int]], text: str) -> set[Hashable]:
    """Patterns whose trigger word occurs and whose words' noted ends form a valid chain.

    ``hits`` maps where a word is noted (a record's ``where``) to the ends of its occurrences in
    increasing order. Every pattern has one trigger and every
    ``where`` comes once, so each candidate is checked once. Candidates are reached through the
    words that occurred (a C-level intersection of the trigger's partners with the words found),
    so a pattern whose two longest words do not both occur costs nothing; the rest have any
    further words checked for presence, then their positions.
    """
    found: set[Hashable] = set()
    present = hits.keys()
    for where in hits:
        if where.whole:
            found.update(where.whole)
        triggers = where.triggers
        if not triggers:
            continue
        for partner in triggers.keys() & present:
            for trigger in triggers[partner]:
                if (not trigger.others or present >= trigger.others) and _positions_hold(
                    trigger.chain, hits, text
                ):
                    found.add(trigger.sub)
    return found


def _positions_hold(chain: tuple[Record, ...], hits: dict[Any, list[int]], text: str) -> bool:
    """Whether the words' occurrences chain up with every gap satisfied (forward, over ends)."""
    valid: list[int] = []
    for record in chain:
        length, questions = record.length, record.questions
        if record.where is None:
            valid = _find_after(record, valid, text)
        elif record.previous is None:
            ends = hits[record.where]
            # start = end - length + 1 must leave room for the leading questions
            valid = [end for end in ends if end - length + 1 >= questions] if questions else ends
        elif record.star:
            earliest = (
                valid[0] + questions + length - 1
            )  # ends after this start the word late enough
            valid = [end for end in hits[record.where] if end > earliest]
        else:
            # the previous word must end exactly questions + 1 characters before this one starts
            offset = length + questions
            valid = [end for end in hits[record.where] if end - offset in valid]
        if not valid:
            return False
    return valid[0] + chain[-1].trailing < len(text)


def _find_after(record: Record, previous_ends: list[int], text: str) -> list[int]:
    """Valid ends of a word that was not noted, found in the text where the gap allows."""
    word, length, questions = record.word, record.length, record.questions
    if record.previous is not None and not record.star:
        return [
            end + questions + length
            for end in previous_ends
            if text.startswith(word, end + questions + 1)
        ]
    at = text.find(word, questions if record.previous is None else previous_ends[0] + questions + 1)
    ends = []
    while at >= 0:
        ends.append(at + length - 1)
        at = text.find(word, at + 1)
    return ends


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
