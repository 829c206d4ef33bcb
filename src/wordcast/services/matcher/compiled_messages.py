"""A routed batch's messages written by the compiled core, with no Python object per match.

:func:`.messages.messages` is the reference: for the same matches this writes the same messages,
byte for byte (``tests/unit/test_compiled_messages.py`` holds them equal). The compact trie's flat
answer (``match_many_flat``) goes to ``wordcast._core.Deliveries``, which knows for each of the
trie's numbers the subscription's id, terms, audience and messages (an endpoint of its tenant,
its match stream, or both), and writes the messages of every plain match: its audience's, a
conjunction of keywords served by every placement here. The rest (an alternative of a boolean
query, a subscription whose placements restrict it, and the matches of the hot words' and the
patterns' indexes) go through the reference, in messages of their own; of an alternative whose
only condition is its phrases and proximity windows, the core hands back only the candidates
whose text keeps them (checked on the compiled analyser's positions), so a phrase's candidates
that fail cost no Python.

The table follows the index: the index notes the ids its changes touch
(:attr:`.index.MatcherIndex.changed`) and the table reads them again before the next batch.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

import orjson

from wordcast import _core
from wordcast.engines.compiled import CompiledCompactTrie
from wordcast.query.boolean import Clause
from wordcast.query.explain import offsets_analyser
from wordcast.services.matcher.index import MatcherIndex, RoutedPublication
from wordcast.services.matcher.messages import (
    Batch,
    compiled_reads,
    frame_of,
    messages,
    reference_reading,
)
from wordcast.storage.outbox import Message
from wordcast.storage.records import STREAM_DELIVERY, Subscription, audience, delivery_of

NOBODY = 2**32 - 1  # the audience code of a batch no held subscription meets

# A phrase or window as the compiled core takes it: ([(term, offset)], near, str(span)); and a
# clause's rule: (the spans that must hold, those that must not, the start of its `matched`).
SpanIn = tuple[list[tuple[str, int]], int, str]
SpanRule = tuple[list[SpanIn], list[SpanIn], bytes]


def _rule(place: int, clause: Clause, written: str) -> SpanRule:
    """What ``Clause.spans_hold`` checks, for the compiled core to check it, and the start of
    ``explain_clause``'s answer (alternative ``place``, written so)."""
    head = orjson.dumps({"alternative": place, "clause": written})[1:-1] + b","
    return (
        [(list(span.offsets), span.near, str(span)) for span in clause.spans],
        [(list(span.offsets), span.near, str(span)) for span in clause.not_spans],
        head,
    )


class CompiledMessages:
    """Writes the messages of an index's matches in ``wordcast._core`` (module docstring)."""

    def __init__(self, index: MatcherIndex) -> None:
        if not isinstance(index.terms, CompiledCompactTrie):
            raise ValueError("compiled messages need the compiled compact trie")
        self.index = index
        self.trie: CompiledCompactTrie = index.terms
        self.deliveries = _core.Deliveries()
        analyser = offsets_analyser()  # the reference's explanations read with it too
        if not isinstance(analyser, _core.Analyser):
            raise ValueError("compiled messages need the compiled analyser")
        self.analyser = analyser
        self.groups: list[tuple[str, str]] = []  # (tenant, URL or STREAM_DELIVERY)
        self._group_of: dict[tuple[str, str], int] = {}
        self._audiences: dict[str, int] = {}
        index.changed = set()
        self._unread = True  # every subscription of the index, read at the first follow()

    @staticmethod
    def writes_for(index: MatcherIndex) -> bool:
        """Whether this writer can follow ``index`` (its term index is the compiled trie)."""
        return isinstance(index.terms, CompiledCompactTrie)

    def follow(self) -> None:
        """Read again what the index's changes since the last call touched (everything, the
        first time)."""
        index = self.index
        changed, index.changed = index.changed, set()
        if self._unread:
            self._unread = False
            self._read(index.subscriptions.items())  # in the order they were loaded
        elif changed:
            subscriptions = index.subscriptions
            self._read((sub_id, subscriptions.get(sub_id)) for sub_id in changed)

    def _read(self, changed: Iterable[tuple[str, Subscription | None]]) -> None:
        """Set each changed subscription's row of the table (None: it is gone)."""
        index = self.index
        rows = _Rows()
        numbers, ids, terms, groups = rows.numbers, rows.ids, rows.terms, rows.groups
        audiences, plain, spans, tags = rows.audiences, rows.plain, rows.spans, rows.tags
        # A snapshot loaded is a million of these: what most share is looked up once.
        restricted, alternatives = index.restricted, index.alternatives
        number_of = self.trie.number_of
        delivery: dict[tuple[str, str], tuple[int | None, int | None]] = {}
        audience: dict[tuple[str, str], int] = {}
        for sub_id, sub in changed:
            number = number_of(sub_id)
            if sub is None or number is None:
                # Not in the trie (deleted, a pattern, a hot word's): the trie never answers
                # its old number, or answers it for a subscription changed too.
                continue
            key = (sub.tenant, sub.callback_url)
            pair = delivery.get(key)
            if pair is None:
                pair = delivery[key] = self._groups(*key)
            key = (sub.tenant, sub.stream)
            code = audience.get(key)
            if code is None:
                code = audience[key] = self._audience(sub.audience)
            numbers.append(number)
            groups.append(pair)
            audiences.append(code)
            tags.append(sub.tag)
            if sub_id not in restricted and sub_id not in alternatives:
                ids.append(sub_id)
                terms.append(sub.terms)
                plain.append(True)
                spans.append(None)
                continue
            rule = None
            clause = None if sub_id in restricted else alternatives.spans_only(sub_id)
            if clause is not None:
                held = alternatives.clause(sub_id)
                assert held is not None  # an alternative held has its clause
                rule = _rule(held[0], clause, held[2])
            # An alternative's matches are its query's, explained by its clause's words.
            ids.append(alternatives.subscription_id(sub_id))
            terms.append(sub.terms if clause is None else clause.words)
            plain.append(False)
            spans.append(rule)
        self.deliveries.set_many(rows.columns())

    def _groups(self, tenant: str, address: str) -> tuple[int | None, int | None]:
        """The message groups of a subscription delivering to ``address`` (its webhook's, its
        tenant's match stream's)."""
        url, to_stream = delivery_of(address)
        return (
            self._group(tenant, url) if url else None,
            self._group(tenant, STREAM_DELIVERY) if to_stream else None,
        )

    def _group(self, tenant: str, url: str) -> int:
        key = (tenant, url)
        group = self._group_of.get(key)
        if group is None:
            group = self._group_of[key] = len(self.groups)
            self.groups.append(key)
        return group

    def _audience(self, name: str) -> int:
        code = self._audiences.get(name)
        if code is None:
            code = self._audiences[name] = len(self._audiences)
        return code

    def messages(
        self,
        batch: Batch,
        mapping_version: int,
        drawn: Sequence[dict[str, int]] | None,
        most: int,
        *,
        explain: bool,
        max_bytes: int,
        subscriptions_max: int | None,
    ) -> tuple[list[Message], int]:
        """The messages of ``batch`` (as :func:`.messages.messages` with payload version 2), and how many
        matches they hold."""
        self.follow()
        index, publications = self.index, batch.publications
        numbers, offsets = self.trie.match_flat([terms for _, _, terms, _ in publications])
        given, given_tokens = _reference_reading(publications, offsets) if explain else ({}, {})
        most_subscriptions = subscriptions_max or len(index.subscriptions) + 1
        shape = _shape(batch, most, max_bytes, most_subscriptions, explain)
        written, others, plain = self.deliveries.write(
            numbers,
            offsets,
            self._audiences.get(audience(batch.publisher, batch.stream), NOBODY),
            [publication[0] for publication in publications],
            [publication[1] for publication in publications],
            self.analyser,
            shape,
            given=given,
            given_tokens=given_tokens,
        )
        now = time.time()
        found = []
        for group, body, webhook_id, count, held, counts in written:
            tenant, url = self.groups[group]
            found.append(
                Message(held, tenant, url, webhook_id, body, count, now, batch.accepted, counts)
            )
        name_of = self.trie.name_of
        pairs = [(name_of(number), position) for number, position in others]
        pairs += index.pairs_beside_terms(publications, drawn)
        pairs = index.delivering(
            pairs, publications, mapping_version, drawn, batch.publisher, batch.stream
        )
        found += messages(
            pairs,
            batch,
            index.subscriptions,
            index.alternatives,
            most,
            explain=explain,
            max_bytes=max_bytes,
            subscriptions_max=subscriptions_max,
        )
        return found, plain + len(pairs)


class _Rows:
    """The table's rows a change sets, by columns (``_core.DeliveryColumns``)."""

    __slots__ = ("audiences", "groups", "ids", "numbers", "plain", "spans", "tags", "terms")

    def __init__(self) -> None:
        self.numbers: list[int] = []
        self.ids: list[str] = []
        self.terms: list[Sequence[str]] = []
        self.groups: list[tuple[int | None, int | None]] = []
        self.audiences: list[int] = []
        self.plain: list[bool] = []
        self.spans: list[SpanRule | None] = []
        self.tags: list[str] = []

    def columns(self) -> _core.DeliveryColumns:
        return _core.DeliveryColumns(
            numbers=self.numbers,
            ids=self.ids,
            terms=self.terms,
            groups=self.groups,
            audiences=self.audiences,
            plain=self.plain,
            spans=self.spans,
            tags=self.tags,
        )


def _shape(
    batch: Batch, most: int, max_bytes: int, most_subscriptions: int, explain: bool
) -> _core.MessageShape:
    """What the batch's messages look like around their matches, and their bounds."""
    head, between, tail = frame_of(batch)
    return _core.MessageShape(
        head=head,
        between=between,
        tail=tail,
        publisher=batch.publisher,
        stream=batch.stream,
        most=most,
        max_bytes=max_bytes,
        most_subscriptions=most_subscriptions,
        explain=explain,
    )


def _reference_reading(
    publications: Sequence[RoutedPublication], offsets: memoryview
) -> tuple[dict[int, dict[str, bytes]], dict[int, list[tuple[int, int]]]]:
    """The parts of ``matched``, and the tokens' places, of each matched publication the
    compiled analyser leaves to the reference (:func:`.messages.compiled_reads`)."""
    parts: dict[int, dict[str, bytes]] = {}
    tokens: dict[int, list[tuple[int, int]]] = {}
    for position, publication in enumerate(publications):
        if offsets[position] != offsets[position + 1] and not compiled_reads(publication):
            parts[position], tokens[position] = reference_reading(publication)
    return parts, tokens
