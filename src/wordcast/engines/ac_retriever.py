"""REtriever's recombination over an Aho–Corasick keyword stage (pyahocorasick).

REtriever (see :mod:`wordcast.engines.retriever`) restarts its DFA at every position of the publication;
Aho–Corasick's failure links find every occurrence of every phrase in one left-to-right pass, in
compiled code. Here each distinct phrase is a keyword of a pyahocorasick automaton; its value holds
the phrase's accept and half-accept records, and the occurrences (which arrive in increasing end
order) feed REtriever's anchored recombination: only patterns whose longest phrase occurs are
checked, over the noted ends of their phrases.

Phrases shorter than ``min_keyword`` characters (``e``, ``pa``) occur in nearly every publication;
keeping them out of the automaton saves noting hundreds of occurrences per publication. They are
looked up in the text, at the position the gap dictates, only for the candidates that need them
(a pattern's longest phrase is always a keyword, so every pattern can still be triggered).

pyahocorasick cannot add a keyword to a built automaton, so new phrases wait in a small pending set
that is searched with ``str.find`` until there are enough of them to rebuild; removed phrases stay
in the automaton with no records until the next rebuild. Adding and deleting therefore stay cheap,
and matching never sees a stale result.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

import ahocorasick

from wordcast.engines.retriever import Record, add_trigger, recombine_triggered, remove_trigger
from wordcast.query.patterns import Pattern


class _Keyword:
    __slots__ = ("accepts", "half_accepts", "length", "triggers", "whole")

    def __init__(self, length: int) -> None:
        self.length = length
        self.accepts: list[Record] = []
        self.half_accepts: list[Record] = []
        self.triggers: dict[Any, list[Record]] = {}
        self.whole: list[Hashable] = []

    def __bool__(self) -> bool:
        return bool(self.accepts or self.half_accepts)


class AhoCorasickREtriever:
    def __init__(self, rebuild_after: int = 256, min_keyword: int = 3) -> None:
        self._rebuild_after = rebuild_after
        self._min_keyword = min_keyword
        self._keywords: dict[str, _Keyword] = {}
        self._pending: dict[str, _Keyword] = {}
        self._automaton: ahocorasick.Automaton | None = None
        self._built_size = 0
        self._subs: dict[Hashable, tuple[tuple[str, Record], ...]] = {}

    def __len__(self) -> int:
        return len(self._subs)

    def add(self, sub_id: Hashable, pattern: Pattern) -> None:
        if sub_id in self._subs:
            raise ValueError(f"pattern subscription {sub_id!r} is already indexed")
        placed: list[tuple[str, Record]] = []
        previous: Record | None = None
        for gap, phrase in zip(pattern.gaps, pattern.phrases, strict=False):
            record = Record(sub_id, None, phrase, previous, gap)
            placed.append((phrase, record))
            previous = record
        placed[-1][1].trailing = pattern.trailing.questions
        longest = max(len(phrase) for phrase in pattern.phrases)
        for phrase, record in placed:
            if len(phrase) < self._min_keyword and len(phrase) < longest:
                continue  # looked up in the text when a candidate needs it (where stays None)
            keyword = self._keywords.get(phrase)
            if keyword is None:
                keyword = self._keywords[phrase] = self._pending[phrase] = _Keyword(len(phrase))
            record.where = keyword
            is_last = record is placed[-1][1]
            (keyword.accepts if is_last else keyword.half_accepts).append(record)
        chain = tuple(record for _, record in placed)
        for record in chain:
            record.chain = chain
        add_trigger(chain)
        self._subs[sub_id] = tuple(placed)

    def remove(self, sub_id: Hashable) -> bool:
        placed = self._subs.pop(sub_id, None)
        if placed is None:
            return False
        last = placed[-1][1]
        remove_trigger(tuple(record for _, record in placed))
        for phrase, record in placed:
            if record.where is None:
                continue
            keyword = self._keywords[phrase]
            (keyword.accepts if record is last else keyword.half_accepts).remove(record)
            if not keyword:
                del self._keywords[phrase]
                self._pending.pop(phrase, None)
        return True

    def _rebuild(self) -> None:
        automaton = ahocorasick.Automaton()
        for phrase, keyword in self._keywords.items():
            automaton.add_word(phrase, keyword)
        if self._keywords:
            automaton.make_automaton()
            self._automaton = automaton
        else:
            self._automaton = None
        self._built_size = len(self._keywords)
        self._pending.clear()

    def _occurrences(self, text: str) -> Iterator[tuple[int, _Keyword]]:
        """(end, keyword) for every occurrence of every phrase; each keyword's in end order."""
        stale = self._built_size > 2 * len(self._keywords) + self._rebuild_after
        if len(self._pending) > max(self._rebuild_after, len(self._keywords) // 100) or stale:
            self._rebuild()
        if self._automaton is not None:
            yield from self._automaton.iter(text)
        for phrase, keyword in self._pending.items():
            at = text.find(phrase)
            while at >= 0:
                yield at + keyword.length - 1, keyword
                at = text.find(phrase, at + 1)

    def match(self, text: str) -> set[Hashable]:
        """The ids of the patterns ``text`` (already normalised) matches."""
        hits: dict[_Keyword, list[int]] = {}
        for end, keyword in self._occurrences(text):
            ends = hits.get(keyword)
            if ends is None:
                hits[keyword] = [end]
            else:
                ends.append(end)
        return recombine_triggered(hits, text)
