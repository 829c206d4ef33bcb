"""Why each match matched: the ``matched`` of a match (:mod:`wordcast.query.explain`), each
publication read once in the process for everything its matches need (:class:`Readings`), and
a dry run's answer.

The message writer (:mod:`.messages`) takes these as the JSON of each match the compiled table
hands back (an alternative of a boolean query, a restricted placement, a hot word's or a
pattern's); the compiled core explains plain matches itself, from the same readings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import orjson

from wordcast import _core
from wordcast.query.alternatives import HeldAlternatives
from wordcast.query.explain import (
    AnalysedText,
    compiled_readings,
    explain_clause,
    explain_pattern,
)
from wordcast.query.languages import ENGLISH, SNOWBALL
from wordcast.query.patterns import normalise
from wordcast.services.matcher.index import Batch
from wordcast.storage.records import Subscription


class Reading:
    """One publication as it was read: by the compiled analyser (``compiled``, whose parts,
    positions and places are made when first asked), or by the reference (``analysed``)."""

    __slots__ = ("_analysed", "_compiled", "_parts", "_positions", "text")

    def __init__(
        self, text: str, compiled: _core.TextReading | None, analysed: AnalysedText | None = None
    ) -> None:
        self.text = text
        self._compiled = compiled
        self._analysed = analysed
        self._parts: dict[str, bytes] | None = None
        self._positions: dict[str, list[int]] | None = None

    @property
    def parts(self) -> dict[str, bytes]:
        """Each term's JSON member of a ``matched``'s ``terms``."""
        if self._parts is None:
            if self._compiled is not None:
                self._parts = self._compiled.parts()
            else:
                offsets = self.analysed.term_offsets
                self._parts = {term: _part(term, found) for term, found in offsets.items()}
        return self._parts

    @property
    def analysed(self) -> AnalysedText:
        if self._analysed is None:
            assert self._compiled is not None  # a reference reading is made analysed
            self._analysed = AnalysedText.of(self.text, self.positions, self._compiled.spans())
        return self._analysed

    @property
    def positions(self) -> dict[str, list[int]]:
        if self._positions is None:
            if self._compiled is not None:
                self._positions = self._compiled.positions()
            else:
                self._positions = self.analysed.positions
        return self._positions


Referred = tuple[dict[str, bytes], dict[str, list[int]], list[tuple[int, int]]]
"""A text as the reference reads it for the writer: its terms' JSON members of a ``matched``,
where they occur, and its tokens' places."""


class Readings:
    """Each publication of a batch read once in this process, whatever its matches need (issue
    52): by the compiled analyser (the writer's reading, ``_core.Readings``, once it has read;
    else here, many at once), or by the reference (:class:`AnalysedText`) for a text in a
    language with a stemmer of its own, one holding a code point the compiled analyser's
    tables cannot vouch for, and every text without the compiled analyser. Its pattern
    matching's normalised form too."""

    def __init__(self, batch: Batch, compiled: bool) -> None:
        self.batch = batch
        self.compiled = compiled
        self.core: _core.Readings | None = None  # the writer's, given to its decisions
        self._read: dict[int, Reading] = {}
        self._normalised: dict[int, str] = {}

    def left(self) -> list[int]:
        """The publications the reference reads, whatever their text: in a language with a
        stemmer of its own (none, most often: then found without a look at each)."""
        batch = self.batch
        if batch.languages and all(read_as_english(lang or None) for lang in set(batch.languages)):
            return []
        language = batch.language
        return [k for k in range(len(batch)) if not read_as_english(language(k))]

    def reference(self, positions: Iterable[int]) -> dict[int, Referred]:
        """The writer's reference: the publications at ``positions`` read by the reference."""
        found: dict[int, Referred] = {}
        for k in positions:
            read = self._read.get(k)
            if read is None:
                read = self._read[k] = self._referred(k)
            analysed = read.analysed
            found[k] = (read.parts, analysed.positions, analysed.token_spans)
        return found

    def read(self, positions: Iterable[int]) -> None:
        """Read the publications at ``positions`` not read yet (the English ones compiled, at
        once when the writer has not read them)."""
        unread = sorted(k for k in set(positions) if k not in self._read)
        english = [k for k in unread if self.compiled and read_as_english(self.batch.language(k))]
        texts = self.batch.texts
        if self.core is not None:
            compiled = [self.core.reading(k) for k in english]
        else:
            compiled = compiled_readings([texts[k] for k in english])
        for k, reading in zip(english, compiled, strict=True):
            self._read[k] = Reading(texts[k], reading) if reading is not None else self._referred(k)
        for k in unread:
            if k not in self._read:
                self._read[k] = self._referred(k)

    def __getitem__(self, position: int) -> Reading:
        found = self._read.get(position)
        if found is None:
            self.read([position])
            found = self._read[position]
        return found

    def positions(self, position: int) -> Mapping[str, Sequence[int]]:
        """Where each term of the publication occurs (:func:`~wordcast.query.analysis.term_positions`)."""
        return self[position].positions

    def normalised(self, position: int) -> str:
        """The publication's text as patterns match it."""
        found = self._normalised.get(position)
        if found is None:
            found = self._normalised[position] = normalise(self.batch.texts[position])
        return found

    def _referred(self, k: int) -> Reading:
        text = self.batch.texts[k]
        return Reading(text, None, AnalysedText(text, self.batch.language(k)))


class Explanations:
    """The ``matched`` of each match of a batch, from each publication's one reading;
    ``delivered_id`` gives the id a stored subscription's matches are delivered under (an
    alternative's: its query's)."""

    def __init__(
        self,
        batch: Batch,
        alternatives: HeldAlternatives,
        wanted: bool,
        readings: Readings | None = None,
    ) -> None:
        self.batch = batch
        self.texts = batch.texts
        self.alternatives = alternatives if len(alternatives) else None
        self.wanted = wanted
        self.readings = readings if readings is not None else Readings(batch, True)

    def delivered_id(self, stored_id: str) -> str:
        alternatives = self.alternatives
        return stored_id if alternatives is None else alternatives.subscription_id(stored_id)

    def read(self, positions: Iterable[int]) -> None:
        """Read the publications among ``positions`` not read yet, at once."""
        if self.wanted:
            self.readings.read(positions)

    def matched(self, sub: Subscription, position: int) -> bytes:
        """The JSON of the match's ``matched``."""
        read = self.readings[position]
        if sub.pattern:
            normalised = self.readings.normalised(position)
            return orjson.dumps(explain_pattern(sub.pattern, read.text, normalised))
        alternatives = self.alternatives
        alternative = None if alternatives is None else alternatives.clause(sub.id)
        if alternative is None:
            # A plain conjunction: its terms' parts, each encoded once for every match of the
            # publication, put together as explain_terms's JSON would be.
            parts = read.parts
            encoded = []
            for term in sub.terms:
                part = parts.get(term)
                if part is None:  # a term absent (a filter's)
                    part = parts[term] = _part(term, [])
                encoded.append(part)
            return b'{"terms":{' + b",".join(encoded) + b"}}"
        return orjson.dumps(
            explain_clause(alternative[1], read.analysed, alternative[0], alternative[2])
        )


def explained_matches(
    pairs: Sequence[tuple[str, int]],
    batch: Batch,
    subscriptions: Mapping[str, Subscription],
    alternatives: HeldAlternatives,
    tenant: str,
    max_bytes: int = 0,
) -> tuple[list[tuple[str, int, bytes]], bool]:
    """(id delivered under, position, JSON of ``matched``) for each of ``pairs`` whose
    subscription is ``tenant``'s, once each: what the messages would deliver to that tenant
    (a dry run's answer; the other tenants' matches of a shared stream are not shown); and
    whether that is all of them: with ``max_bytes``, explaining stops once the JSON passes it,
    so that a dry run's memory is bounded whatever its size."""
    explained = Explanations(batch, alternatives, True)
    mine = [(subscriptions[sub_id], position) for sub_id, position in pairs]
    mine = [(sub, position) for sub, position in mine if sub.tenant == tenant]
    explained.read({position for _, position in mine})
    found: dict[tuple[str, int], bytes] = {}
    size = 0
    for sub, position in mine:
        sub_id = explained.delivered_id(sub.id)
        if (sub_id, position) not in found:
            matched = found[sub_id, position] = explained.matched(sub, position)
            size += len(matched) + len(sub_id) + 16
            if max_bytes and size > max_bytes:
                return [], False
    return [(sub_id, position, matched) for (sub_id, position), matched in found.items()], True


def read_as_english(language: str | None) -> bool:
    """Whether a publication in ``language`` has for terms all its English analysis gives (no
    language, English, or one without a Snowball stemmer, which adds no terms of its own):
    what the compiled analyser reads the offsets of (the reference reads the others)."""
    return language is None or language == ENGLISH or language not in SNOWBALL


def _part(term: str, offsets: Sequence[tuple[int, int]]) -> bytes:
    """A term's JSON member of a ``matched``'s ``terms``: ``b'"term":[[start,end],…]'``."""
    return orjson.dumps({term: offsets})[1:-1]
