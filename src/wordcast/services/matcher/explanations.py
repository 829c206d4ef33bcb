"""Why each match matched: the ``matched`` of a match (:mod:`wordcast.query.explain`), each
publication analysed once for all its matches, and a dry run's answer.

The message writer (:mod:`.messages`) takes these as the JSON of each match the compiled table
hands back (an alternative of a boolean query, a restricted placement, a hot word's or a
pattern's); the compiled core explains plain matches itself, from the compiled analyser's
offsets or (a text it does not read) from :func:`reference_reading`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import orjson

from wordcast.query.alternatives import HeldAlternatives
from wordcast.query.explain import (
    AnalysedText,
    compiled_term_parts,
    explain_clause,
    explain_pattern,
)
from wordcast.query.languages import ENGLISH, SNOWBALL
from wordcast.services.matcher.index import Batch
from wordcast.storage.records import Subscription


class Explanations:
    """The ``matched`` of each match of a batch, each publication analysed once for all its
    matches; ``delivered_id`` gives the id a stored subscription's matches are delivered
    under (an alternative's: its query's)."""

    def __init__(
        self,
        batch: Batch,
        alternatives: HeldAlternatives,
        wanted: bool,
        read: Mapping[int, dict[str, bytes]] | None = None,
    ) -> None:
        self.batch = batch
        self.texts = batch.texts
        self.alternatives = alternatives if len(alternatives) else None
        self.wanted = wanted
        self._texts: dict[int, AnalysedText] = {}
        # position -> term -> '"term":[[s,e]]', starting from what was ``read`` already
        self._parts: dict[int, dict[str, bytes]] = dict(read or {})

    def delivered_id(self, stored_id: str) -> str:
        alternatives = self.alternatives
        return stored_id if alternatives is None else alternatives.subscription_id(stored_id)

    def read(self, positions: Iterable[int]) -> None:
        """Read the offsets of the English publications among ``positions`` at once, compiled
        (the others are analysed one by one when a match needs them)."""
        if not self.wanted:
            return
        language, known = self.batch.language, self._parts
        english = [k for k in sorted(positions) if k not in known and read_as_english(language(k))]
        texts = [self.texts[k] for k in english]
        for k, parts in zip(english, compiled_term_parts(texts), strict=True):
            if parts is not None:
                self._parts[k] = parts

    def matched(self, sub: Subscription, position: int) -> bytes:
        """The JSON of the match's ``matched``."""
        text = self.texts[position]
        if sub.pattern:
            return orjson.dumps(explain_pattern(sub.pattern, text))
        alternatives = self.alternatives
        alternative = None if alternatives is None else alternatives.clause(sub.id)
        if alternative is None:
            # A plain conjunction: its terms' parts, each encoded once for every match of the
            # publication, put together as explain_terms's JSON would be.
            parts = self._parts.get(position)
            if parts is None:
                parts = self._parts[position] = {}
            encoded = []
            for term in sub.terms:
                part = parts.get(term)
                if part is None:  # read by the reference, or a term absent (a filter's)
                    offsets = self._analysed(position).term_offsets.get(term, [])
                    part = parts[term] = _part(term, offsets)
                encoded.append(part)
            return b'{"terms":{' + b",".join(encoded) + b"}}"
        analysed = self._analysed(position)
        return orjson.dumps(
            explain_clause(alternative[1], analysed, alternative[0], alternative[2])
        )

    def _analysed(self, position: int) -> AnalysedText:
        analysed = self._texts.get(position)
        if analysed is None:
            analysed = AnalysedText(self.texts[position], self.batch.language(position))
            self._texts[position] = analysed
        return analysed


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


def reference_reading(
    text: str, language: str | None
) -> tuple[dict[str, bytes], list[tuple[int, int]]]:
    """Each term's JSON member of a ``matched`` (``b'"term":[[s,e]]'``), and the places of the
    text's tokens by position, as the reference reads a publication's ``text`` in
    ``language``."""
    analysed = AnalysedText(text, language)
    offsets = analysed.term_offsets
    parts = {term: _part(term, found) for term, found in offsets.items()}
    return parts, analysed.token_spans
