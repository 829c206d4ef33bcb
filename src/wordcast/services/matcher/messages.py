"""A routed batch's messages, every one written by the compiled core (``wordcast._core.Deliveries``).

One writer for every match: the compact trie's plain matches (a conjunction of keywords of the
batch's audience, served by every placement here, and an alternative whose only condition is its
phrases and windows, once they hold) are decided and written in the core with no Python object
each; the core hands back the trie's other matches (an alternative with more to check, a
subscription whose placements restrict it), and the matcher decides those with the hot words'
and the patterns' matches (:meth:`.index.MatcherIndex.delivering`) and gives the ones that stand
to the same call, each with its ``matched`` (:mod:`.explanations`). The core then groups every
match into messages, bounds them, and writes their bodies and webhook-ids. With another term
index than the compiled trie, every match is decided in Python and written by the core alike.
Each text is read once in the process, whatever its matches need (:class:`.explanations.Readings`:
the core's reading is the matcher's, and the reference's the core's).

The reference is :func:`wordcast.testing.messages.messages`: the tests hold the two equal byte
for byte. The table follows the index: the index notes the ids its changes touch
(:attr:`.index.MatcherIndex.changed`) and the table reads them again before the next batch.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import orjson

from wordcast import _core
from wordcast.engines.compiled import CompiledCompactTrie
from wordcast.query.boolean import Clause
from wordcast.query.conditions import Condition
from wordcast.query.explain import offsets_analyser
from wordcast.services.matcher.explanations import Explanations, Readings
from wordcast.services.matcher.index import Batch, MatcherIndex
from wordcast.storage.outbox import Message
from wordcast.storage.records import STREAM_DELIVERY, Subscription, audience, delivery_of

NOBODY = 2**32 - 1  # the audience code of a batch no held subscription meets

# A phrase or window as the compiled core takes it: ([(term, offset)], near, str(span)); a
# condition: (name, kind, low, high, low included, high included, the part contained); and a
# clause's rule: (the spans that must hold, those that must not, the start of its `matched`,
# (filter terms required, terms excluded, conditions required, conditions excluded), the rest
# of its `matched` after its terms).
SpanIn = tuple[list[tuple[str, int]], int, str]
ConditionIn = tuple[str, str, str, str, bool, bool, str]
TermRuleIn = tuple[list[str], list[str], list[ConditionIn], list[ConditionIn]]
SpanRule = tuple[list[SpanIn], list[SpanIn], bytes, TermRuleIn, bytes]


@dataclass(frozen=True, slots=True)
class MessageOptions:
    """What a matcher's messages look like: at most ``most`` matches, ``max_bytes`` bytes and
    ``subscriptions_max`` subscriptions (None: no bound) each, each match explained or not, in
    payload version ``payload_version``."""

    most: int = 100
    max_bytes: int = 1 << 20
    subscriptions_max: int | None = None
    explain: bool = True
    payload_version: int = 2


def _rule(place: int, clause: Clause, written: str) -> SpanRule:
    """What ``HeldAlternatives.delivering`` checks of an alternative it checks alone, for the
    compiled core to check it, and ``explain_clause``'s answer around its terms (alternative
    ``place``, written so)."""
    head = orjson.dumps({"alternative": place, "clause": written})[1:-1] + b","
    filters = [*clause.filters, *map(str, clause.conditions)]
    tail = b',"filters":' + orjson.dumps(filters) if filters else b""
    terms = (
        list(clause.filters),
        list(clause.without),
        [_condition(c) for c in clause.conditions],
        [_condition(c) for c in clause.not_conditions],
    )
    return (
        [(list(span.offsets), span.near, str(span)) for span in clause.spans],
        [(list(span.offsets), span.near, str(span)) for span in clause.not_spans],
        head,
        terms,
        tail,
    )


def _condition(condition: Condition) -> ConditionIn:
    kind = "contains" if condition.contains else condition.kind
    return (
        condition.name,
        kind,
        condition.low,
        condition.high,
        condition.low_inclusive,
        condition.high_inclusive,
        condition.contains,
    )


class MessageWriter:
    """Writes the messages of an index's matches in ``wordcast._core`` (module docstring)."""

    def __init__(self, index: MatcherIndex, options: MessageOptions) -> None:
        self.index = index
        self.options = options
        terms = index.terms
        self.trie = terms if isinstance(terms, CompiledCompactTrie) else None
        self.deliveries = _core.Deliveries()
        analyser = offsets_analyser()  # the reference's explanations read with it too
        # Without the compiled analyser (the reference asked for), the reference reads every text.
        self.analyser = analyser if isinstance(analyser, _core.Analyser) else None
        self.groups: list[tuple[str, str]] = []  # (tenant, URL or STREAM_DELIVERY)
        self._group_of: dict[tuple[str, str], int] = {}
        self._delivery: dict[tuple[str, str], tuple[int | None, int | None]] = {}
        self._audiences: dict[str, int] = {}
        index.changed = set()
        self._unread = True  # every subscription of the index, read at the first follow()
        # Whether a rule asks of a publication's terms (then the core is given them).
        self.asks_terms = False

    def follow(self) -> None:
        """Read again what the index's changes since the last call touched (everything, the
        first time)."""
        index = self.index
        changed, index.changed = index.changed, set()
        if self.trie is None:
            return
        if self._unread:
            self._unread = False
            self._read(index.subscriptions.items())  # in the order they were loaded
        elif changed:
            subscriptions = index.subscriptions
            self._read((sub_id, subscriptions.get(sub_id)) for sub_id in changed)

    def _read(self, changed: Iterable[tuple[str, Subscription | None]]) -> None:
        """Set each changed subscription's row of the table (None: it is gone)."""
        index, trie = self.index, self.trie
        assert trie is not None  # only the compiled trie's numbers have rows
        rows = _Rows()
        # A snapshot loaded is a million of these: what most share is looked up once.
        restricted, alternatives = index.restricted, index.alternatives
        number_of = trie.number_of
        audience_of: dict[tuple[str, str], int] = {}
        for sub_id, sub in changed:
            number = number_of(sub_id)
            if sub is None or number is None:
                # Not in the trie (deleted, a pattern, a hot word's): the trie never answers
                # its old number, or answers it for a subscription changed too.
                continue
            key = (sub.tenant, sub.stream)
            code = audience_of.get(key)
            if code is None:
                code = audience_of[key] = self._audience(sub.audience)
            if sub_id not in restricted and sub_id not in alternatives:
                rows.add(number, sub, self.groups_of(sub), code, sub.terms, None)
                continue
            rule = None
            clause = None if sub_id in restricted else alternatives.checked_alone(sub_id)
            if clause is not None:
                alternative = alternatives.clause(sub_id)
                assert alternative is not None  # an alternative held has its clause
                rule = _rule(alternative[0], clause, alternative[2])
                self.asks_terms |= bool(rule[3] != ([], [], [], []))
            # An alternative's matches are its query's, explained by its clause's words.
            terms = sub.terms if clause is None else clause.words
            delivered = alternatives.subscription_id(sub_id)
            rows.add(number, sub, self.groups_of(sub), code, terms, rule, delivered, plain=False)
        self.deliveries.set_many(rows.columns())

    def groups_of(self, sub: Subscription) -> tuple[int | None, int | None]:
        """The message groups of ``sub`` (its webhook's, its tenant's match stream's)."""
        key = (sub.tenant, sub.callback_url)
        pair = self._delivery.get(key)
        if pair is None:
            url, to_stream = delivery_of(sub.callback_url)
            pair = self._delivery[key] = (
                self._group(sub.tenant, url) if url else None,
                self._group(sub.tenant, STREAM_DELIVERY) if to_stream else None,
            )
        return pair

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

    def messages(self, batch: Batch) -> tuple[list[Message], int]:
        """The messages of ``batch``, and how many matches they hold."""
        self.follow()
        batch = self.index.with_wildcards(batch)  # the core checks them as any term
        if self.trie is None:
            return self._written(batch, *_nothing_matched(len(batch)))
        numbers, offsets = self.trie.match_flat(batch.terms)
        return self._written(batch, numbers, offsets)

    def write(self, batch: Batch, pairs: Sequence[tuple[str, int]]) -> tuple[list[Message], int]:
        """The messages of matches decided already: (stored id, position) ``pairs`` of
        ``batch``, and how many matches they hold."""
        return self._written(batch, *_nothing_matched(len(batch)), pairs)

    def _written(
        self,
        batch: Batch,
        numbers: memoryview,
        offsets: memoryview,
        decided: Sequence[tuple[str, int]] | None = None,
    ) -> tuple[list[Message], int]:
        readings = Readings(batch, self.analyser is not None)
        written, count = self.deliveries.write(
            numbers,
            offsets,
            self._audiences.get(audience(batch.publisher, batch.stream), NOBODY),
            batch.ids,
            batch.texts,
            self._shape(batch),
            analyser=self.analyser,
            left=readings.left(),
            reference=readings.reference,
            decide=_Decision(self, batch, readings, decided),
            terms=batch.terms if self.asks_terms else None,
        )
        now = time.time()
        found = []
        for group, body, webhook_id, matches, subscription_ids, counts, incarnations in written:
            tenant, url = self.groups[group]
            found.append(
                Message(
                    subscription_ids,
                    tenant,
                    url,
                    webhook_id,
                    body,
                    matches,
                    now,
                    batch.accepted,
                    counts,
                    incarnations,
                )
            )
        return found, count

    def _shape(self, batch: Batch) -> _core.MessageShape:
        options = self.options
        return _core.MessageShape(
            version=options.payload_version,
            publisher=batch.publisher,
            stream=batch.stream,
            most=options.most,
            max_bytes=options.max_bytes,
            most_subscriptions=options.subscriptions_max or len(self.index.subscriptions) + 1,
            explain=options.explain,
            backfill=batch.backfill,
        )


def _nothing_matched(publications: int) -> tuple[memoryview, memoryview]:
    """The trie's flat answer when it matched nothing (or is not the index)."""
    # A slice of one number: an empty array's buffer may not be aligned as the core reads it.
    return memoryview(array("I", [0]))[:0], memoryview(array("I", [0]) * (publications + 1))


class _Decision:
    """The matches of a batch the table does not decide, decided: called by the core with the
    (number, position) of the trie's matches it hands back."""

    def __init__(
        self,
        writer: MessageWriter,
        batch: Batch,
        readings: Readings,
        decided: Sequence[tuple[str, int]] | None = None,
    ) -> None:
        self.writer = writer
        self.batch = batch
        self.readings = readings  # each text read once, by the core or the reference
        self.decided = decided

    def __call__(
        self, others: list[tuple[int, int]], core: _core.Readings
    ) -> _core.ChosenMatches | None:
        writer, batch, readings = self.writer, self.batch, self.readings
        readings.core = core
        index, trie = writer.index, writer.trie
        if self.decided is not None:
            pairs = list(self.decided)
        elif trie is None:
            pairs = index.pairs(batch, readings)
        else:
            name_of = trie.name_of
            pairs = [(name_of(number), position) for number, position in others]
            pairs += index.pairs_beside_terms(batch, readings.normalised)
            pairs = index.delivering(pairs, batch, readings.positions)
        if not pairs:
            return None
        return self.chosen(pairs)

    def chosen(self, pairs: Sequence[tuple[str, int]]) -> _core.ChosenMatches:
        """The columns of the matches ``pairs`` (stored id, position)."""
        writer = self.writer
        options, subscriptions = writer.options, writer.index.subscriptions
        alternatives = writer.index.alternatives
        explained = Explanations(self.batch, alternatives, options.explain, self.readings)
        explained.read({position for _, position in pairs})
        subs = [subscriptions[sub_id] for sub_id, _ in pairs]
        positions = [position for _, position in pairs]
        matched = (
            [
                explained.matched(sub, position)
                for sub, position in zip(subs, positions, strict=True)
            ]
            if options.explain
            else [b""] * len(pairs)
        )
        written = None
        if options.payload_version < 2:
            written = [("pattern", s.pattern) if s.pattern else ("query", s.query) for s in subs]
        return _core.ChosenMatches(
            ids=[sub.id for sub in subs],
            delivered_ids=[explained.delivered_id(sub.id) for sub in subs],
            tags=[sub.tag for sub in subs],
            groups=[writer.groups_of(sub) for sub in subs],
            positions=positions,
            matched=matched,
            written=written,
            incarnations=[sub.created for sub in subs],
        )


class _Rows:
    """The table's rows a change sets, by columns (``_core.DeliveryColumns``)."""

    __slots__ = (
        "audiences",
        "delivered",
        "groups",
        "ids",
        "incarnations",
        "numbers",
        "plain",
        "spans",
        "tags",
        "terms",
    )

    def __init__(self) -> None:
        self.numbers: list[int] = []
        self.ids: list[str] = []
        self.delivered: list[str] = []
        self.terms: list[Sequence[str]] = []
        self.groups: list[tuple[int | None, int | None]] = []
        self.audiences: list[int] = []
        self.plain: list[bool] = []
        self.spans: list[SpanRule | None] = []
        self.tags: list[str] = []
        self.incarnations: list[float] = []

    def add(
        self,
        number: int,
        sub: Subscription,
        groups: tuple[int | None, int | None],
        code: int,
        terms: Sequence[str],
        rule: SpanRule | None,
        delivered: str = "",
        *,
        plain: bool = True,
    ) -> None:
        self.numbers.append(number)
        self.ids.append(sub.id)
        self.delivered.append(delivered)
        self.terms.append(terms)
        self.groups.append(groups)
        self.audiences.append(code)
        self.plain.append(plain)
        self.spans.append(rule)
        self.tags.append(sub.tag)
        self.incarnations.append(sub.created)

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
            delivered_ids=self.delivered,
            incarnations=self.incarnations,
        )
