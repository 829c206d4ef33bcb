"""What a matcher holds, and which of it a routed batch matches.

Keyword subscriptions live in the term index (a compact trie by default), pattern subscriptions in
the pattern index (REtriever or one of its peers); a routed publication is matched against the
pattern index only when the router flagged it, that is when one of this matcher's anchors occurs
in it.

A subscription's placements (:mod:`wordcast.routing.placement`) say for which mapping versions —
and, for a multicast of hot words, which drawn copies — this matcher evaluates it; a match found
for a batch that another placement serves is dropped here, so each publication is evaluated
against each subscription exactly once while routers switch mapping versions.

A subscription made only of hot words is multicast to the matchers holding copies of its least
frequent hot word (S³-TM §5.1); each of them serves only the publications whose drawn copy it
holds. Such subscriptions sit in an index of their own per hot word, consulted only for
publications that drew a copy of that word, so the rest of the stream never visits them.

An alternative of a boolean query (:mod:`wordcast.query.boolean`) is indexed by its required words
like any keyword subscription; a match then stands only if the alternative is the one that
delivers (none of its excluded terms, no earlier alternative holding).

The indexes hold every tenant's subscriptions; a batch matches only those of its audience
(:func:`wordcast.storage.records.audience`: the publisher's own, or a shared stream's).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Protocol

from wordcast.engines.base import PatternIndex, TermIndex, add_many
from wordcast.query.alternatives import HeldAlternatives
from wordcast.query.analysis import term_positions
from wordcast.query.boolean import has_operators, parse_query, split_part_id
from wordcast.query.patterns import normalise, parse
from wordcast.query.wildcards import found_in_texts
from wordcast.routing.placement import Placement, decode, encode
from wordcast.storage.records import Subscription, SubscriptionEvent, audience

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Batch:
    """A routed batch as a matcher takes it: by columns, as the router sent it
    (:class:`wordcast.services.schemas.MatchRequest`), decoded once. The k-th id, text and terms
    are publication k's (its terms as the router analysed them, filter terms last), and its
    language if ``languages`` says ('' where not known; no list from a router that did not
    send one: the language is then the filter term ``lang:…``); ``flagged``
    holds the positions of the publications in which an anchor of this matcher's patterns
    occurs, ``drawn`` by position the copy the router drew for each hot word in a publication
    (S³-TM §5.1). Routed under mapping ``mapping_version``, published by tenant ``publisher`` to
    shared stream ``stream`` ('' for its own subscriptions), accepted by the router at
    ``accepted`` (Unix seconds; 0: not said); ``backfill``: read again for a new subscription's
    backfill."""

    ids: Sequence[str]
    texts: Sequence[str]
    terms: Sequence[Sequence[str]]
    publisher: str = ""
    stream: str = ""
    mapping_version: int = 0
    languages: Sequence[str] = ()
    flagged: AbstractSet[int] = frozenset()
    drawn: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    accepted: float = 0.0
    backfill: bool = False
    # Whether ``terms`` hold the wildcard words the matcher's alternatives name that a token
    # instantiates (:meth:`MatcherIndex.with_wildcards`): found once a batch.
    wildcards_found: bool = False

    def __len__(self) -> int:
        return len(self.ids)

    def language(self, position: int) -> str | None:
        """The language of the publication at ``position``, if known."""
        if self.languages:
            return self.languages[position] or None
        # A router that sent no languages: the language is among the filter terms, last.
        return next((t[5:] for t in reversed(self.terms[position]) if t.startswith("lang:")), None)

    def slice(self, start: int, end: int) -> Batch:
        """Publications ``start`` to ``end`` (excluded) as a batch of their own, numbered from 0."""
        flagged = frozenset(k - start for k in self.flagged if start <= k < end)
        drawn = {k - start: copies for k, copies in self.drawn.items() if start <= k < end}
        return replace(
            self,
            ids=self.ids[start:end],
            texts=self.texts[start:end],
            terms=self.terms[start:end],
            languages=self.languages[start:end],
            flagged=flagged,
            drawn=drawn,
        )


class TextReadings(Protocol):
    """A batch's texts, each read once (``explanations.Readings``): where each term of a text
    occurs, and the text as patterns match it."""

    def positions(self, position: int) -> Mapping[str, Sequence[int]]: ...

    def normalised(self, position: int) -> str: ...


class MatcherIndex:
    """The subscriptions placed on one matcher, in the indexes that match them."""

    def __init__(
        self,
        ordinal: int,
        new_term_index: Callable[[], TermIndex],
        new_pattern_index: Callable[[], PatternIndex],
    ) -> None:
        self.ordinal = ordinal
        self._new_term_index = new_term_index
        self.terms: TermIndex = new_term_index()
        self.hot_indexes: dict[str, TermIndex] = {}  # hot word -> its multicast subscriptions here
        self.patterns: PatternIndex = new_pattern_index()
        self.subscriptions: dict[str, Subscription] = {}
        # Placements here of the subscriptions that do not serve every version from 0 on.
        self.restricted: dict[str, tuple[Placement, ...]] = {}
        self.alternatives = HeldAlternatives()  # of boolean queries
        # Whose publications each subscription meets, and how many held meet each audience: with
        # one audience held (one tenant, no shared stream) a batch needs no filtering at all.
        self.audience_of: dict[str, str] = {}
        self.audiences: Counter[str] = Counter()
        # The ids of subscriptions changed since a compiled writer last read them (None: no
        # writer follows this index; see .messages).
        self.changed: set[str] | None = None

    def __len__(self) -> int:
        return len(self.subscriptions)

    # -- changes ----------------------------------------------------------------------------------
    def load(self, subs: Iterable[Subscription]) -> None:
        """Hold these subscriptions (into a fresh index: the snapshot a restart rebuilds from)."""
        # Most of a snapshot are keyword subscriptions placed here from version 0 on and nowhere
        # else: held and indexed together, with none of the checks a general change needs. (A
        # restart reads a million: per-subscription work is most of its time.)
        everywhere = decode(encode((Placement(self.ordinal, 0),)))  # the records' (cached)
        plain_ids: list[str] = []
        plain_terms: list[Sequence[str]] = []
        subscriptions, audience_of = self.subscriptions, self.audience_of
        changed = self.changed
        audience_names: dict[tuple[str, str], str] = {}
        plain_audiences: Counter[str] = Counter()
        for sub in subs:
            sub_id = sub.id
            if sub_id in subscriptions:
                continue  # read twice (a scan may list an element twice): the same record
            if changed is not None:
                changed.add(sub_id)
            if sub.placements is everywhere and not sub.pattern:
                plain_ids.append(sub_id)
                plain_terms.append(sub.terms)
                subscriptions[sub_id] = sub
                key = (sub.tenant, sub.stream)
                name = audience_names.get(key)
                if name is None:
                    name = audience_names[key] = sub.audience
                audience_of[sub_id] = name
                plain_audiences[name] += 1
            else:
                self._index(sub)
                self._hold(sub)
                self._restrict(sub)
            if has_operators(sub.query):
                self._read_alternative(sub)
        self.audiences.update(plain_audiences)
        add_many(self.terms, plain_ids, plain_terms)

    def apply(self, events: Iterable[SubscriptionEvent]) -> None:
        """Follow committed changes (a replayed event changes nothing)."""
        for event in events:
            sub = event.subscription
            held = self.subscriptions.get(sub.id)
            if self.changed is not None:
                self.changed.add(sub.id)
            if event.op != "del" and self.ordinal in sub.matchers:
                if held is None:  # replays of an add are harmless
                    self._index(sub)
                elif self._hot_word(held) != self._hot_word(sub):  # moved between indexes
                    self._unindex(held)
                    self._index(sub)
                self._hold(sub)
                self._restrict(sub)
                self._read_alternative(sub)
            elif held is not None:  # deleted, or moved away from this matcher
                self._let_go(held)
                self.restricted.pop(sub.id, None)
                self.alternatives.discard(sub.id)
                self._unindex(held)

    def _hold(self, sub: Subscription) -> None:
        if sub.id in self.subscriptions:
            self.audiences[self.audience_of[sub.id]] -= 1
        self.subscriptions[sub.id] = sub
        self.audience_of[sub.id] = sub.audience
        self.audiences[sub.audience] += 1

    def _let_go(self, sub: Subscription) -> None:
        del self.subscriptions[sub.id]
        gone = self.audience_of.pop(sub.id)
        self.audiences[gone] -= 1
        if not self.audiences[gone]:
            del self.audiences[gone]

    def _restrict(self, sub: Subscription) -> None:
        here = tuple(p for p in sub.placements if p.matcher == self.ordinal)
        if len(here) == 1 and here[0].first == 0 and here[0].is_open and not here[0].hot:
            self.restricted.pop(sub.id, None)  # serves every batch: no check needed
        elif here:
            self.restricted[sub.id] = here

    def _read_alternative(self, sub: Subscription) -> None:
        if sub.is_pattern or not has_operators(sub.query) or sub.id in self.alternatives:
            return
        try:
            query = parse_query(sub.query)
        except ValueError as exc:  # the router checked it: only a changed analyser gets here
            log.error("subscription %s: %s; matching its terms as a conjunction", sub.id, exc)
            return
        part = split_part_id(sub.id)[1]
        if part >= len(query.clauses) or set(query.clauses[part].words) != set(sub.terms):
            # Stored by a version that read the query otherwise (``!spam ham`` was the words
            # ham and spam before issue 53): it matches as stored, its words, until subscribed
            # again (``wordcast subscriptions --check`` lists it).
            return
        if not query.is_plain:
            self.alternatives.add(sub.id, query)

    def _hot_word(self, sub: Subscription) -> str:
        """The hot word whose drawn copy decides every placement of ``sub`` here, else ''."""
        words = {p.hot for p in sub.placements if p.matcher == self.ordinal}
        return words.pop() if len(words) == 1 else ""

    def _index(self, sub: Subscription) -> None:
        if sub.is_pattern:
            self.patterns.add(sub.id, parse(sub.pattern, min_anchor=1))  # validated when stored
            return
        word = self._hot_word(sub)
        if word:
            if word not in self.hot_indexes:
                self.hot_indexes[word] = self._new_term_index()
            self.hot_indexes[word].add(sub.id, sub.terms)
        else:
            self.terms.add(sub.id, sub.terms)

    def _unindex(self, sub: Subscription) -> None:
        if sub.is_pattern:
            self.patterns.remove(sub.id)
            return
        word = self._hot_word(sub)
        index = self.hot_indexes[word] if word else self.terms
        index.remove(sub.id, sub.terms)
        if word and not len(index):
            del self.hot_indexes[word]

    # -- matching ---------------------------------------------------------------------------------
    def pairs(self, batch: Batch, readings: TextReadings | None = None) -> list[tuple[str, int]]:
        """(stored subscription id, position) for every match of ``batch`` this matcher is to
        deliver (``readings``: where each text's terms occur and its normalised form, read
        once for the batch; else read here)."""
        pairs = self.terms.match_batch(batch.terms)
        if readings is None:
            return self.delivering(pairs + self.pairs_beside_terms(batch), batch)
        pairs += self.pairs_beside_terms(batch, readings.normalised)
        return self.delivering(pairs, batch, readings.positions)

    def pairs_beside_terms(
        self, batch: Batch, normalised: Callable[[int], str] | None = None
    ) -> list[tuple[str, int]]:
        """The matches found by the hot words' and the patterns' indexes (not yet checked);
        ``normalised(position)``: the text as patterns match it."""
        pairs: list[tuple[str, int]] = []
        if self.hot_indexes and batch.drawn:
            for position, copies in sorted(batch.drawn.items()):
                for word in copies:
                    hot_index = self.hot_indexes.get(word)
                    if hot_index is not None:
                        terms = batch.terms[position]
                        pairs.extend((sub_id, position) for sub_id in hot_index.match(terms))
        if len(self.patterns) and batch.flagged:
            texts = batch.texts
            read = normalised or (lambda position: normalise(texts[position]))
            pairs += [
                (str(sub_id), position)
                for position in sorted(batch.flagged)
                for sub_id in self.patterns.match(read(position))
            ]
        return pairs

    def delivering(
        self,
        pairs: list[tuple[str, int]],
        batch: Batch,
        positions_of: Callable[[int], Mapping[str, Sequence[int]]] | None = None,
    ) -> list[tuple[str, int]]:
        """Of the matches the indexes found, those this matcher delivers: of the batch's
        audience, served here by their placements, and (an alternative) the one delivering;
        ``positions_of(position)``: where each term of a text occurs (else read here)."""
        # Tenants stay apart: the indexes found every tenant's subscriptions with these words.
        wanted = audience(batch.publisher, batch.stream)
        if len(self.audiences) > 1 or wanted not in self.audiences:
            of = self.audience_of
            pairs = [pair for pair in pairs if of[pair[0]] == wanted]
        if self.restricted:
            pairs = self._serving(pairs, batch)
        if self.alternatives:
            batch = self.with_wildcards(batch)
            terms, texts = batch.terms, batch.texts
            pairs = self.alternatives.delivering(
                pairs,
                lambda k: frozenset(terms[k]),
                positions_of or (lambda k: term_positions(texts[k])),
            )
        return pairs

    def with_wildcards(self, batch: Batch) -> Batch:
        """``batch`` with the wildcard words this matcher's alternatives name that a token of
        a text instantiates among that text's terms: an excluded one, which no router carries,
        is then checked as any term is (once a batch)."""
        wild = self.alternatives.wildcards
        if batch.wildcards_found or not len(wild):
            return batch
        found = found_in_texts(wild, batch.texts)
        terms = [(*t, *more) if more else t for t, more in zip(batch.terms, found, strict=True)]
        return replace(batch, terms=terms, wildcards_found=True)

    def _serving(self, pairs: list[tuple[str, int]], batch: Batch) -> list[tuple[str, int]]:
        """The pairs whose subscription's placements here serve the batch's mapping version
        (and the hot-word copy drawn for its publication)."""
        restricted, drawn, version = self.restricted, batch.drawn, batch.mapping_version
        none: Mapping[str, int] = {}
        return [
            (sub_id, position)
            for sub_id, position in pairs
            if sub_id not in restricted
            or any(p.serves(version, drawn.get(position, none)) for p in restricted[sub_id])
        ]
