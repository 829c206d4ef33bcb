"""A routed batch's matches, gathered into the messages a matcher records and delivers.

A message holds a batch's matches for one callback URL of one tenant, its webhook endpoint (at
most ``delivery_batch`` matches in at most ``message_max_bytes``: what a message costs a router
streaming it, or a receiver, is bounded in bytes as well as in matches), signed later with the
endpoint's secret (and, while the migration window is open, with the secrets of its
subscriptions too, at most ``subscriptions_max`` of them), or for the tenant's match stream
(``STREAM_DELIVERY`` as its URL; a subscription delivered both ways is in a message of each). Its
webhook-id is derived from the (subscription, publication) pairs it holds and their publisher and
stream (which the message names once: every match of a routed batch has the same), the same on
every attempt and redelivery. An alternative of a boolean query is delivered under its
subscription's id.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from wordcast.query.alternatives import HeldAlternatives
from wordcast.query.explain import (
    AnalysedText,
    compiled_term_parts,
    explain_clause,
    explain_pattern,
)
from wordcast.query.languages import ENGLISH, SNOWBALL
from wordcast.services.matcher.index import RoutedPublication
from wordcast.storage.outbox import Message, webhook_id
from wordcast.storage.records import STREAM_DELIVERY, Subscription, delivery_of


@dataclass(frozen=True, slots=True)
class Batch:
    """A routed batch as the messages need it: its publications, who published them, where."""

    publications: Sequence[RoutedPublication]
    publisher: str
    stream: str
    accepted: float = 0.0  # when the router took the publications (0: not said)
    backfill: bool = False  # matches of a new subscription in recent publications


MESSAGE_MAX_BYTES = 1 << 20  # the setting's default
MESSAGE_VERSION = 2  # the setting's default


def messages(
    pairs: Sequence[tuple[str, int]],
    batch: Batch,
    subscriptions: Mapping[str, Subscription],
    alternatives: HeldAlternatives,
    most: int,
    *,
    explain: bool = True,
    max_bytes: int = MESSAGE_MAX_BYTES,
    subscriptions_max: int | None = None,
    payload_version: int = MESSAGE_VERSION,
) -> list[Message]:
    """The messages for (stored subscription id, position) ``pairs`` of ``batch``, at most
    ``most`` matches and ``max_bytes`` bytes each (a message of one match may be larger: a match
    is never split), for at most ``subscriptions_max`` subscriptions each if given; with ``explain``,
    each match says why (``matched``). ``payload_version`` is the payload's shape (module docstring)."""
    most_subscriptions = subscriptions_max or len(subscriptions) + 1
    per_subscription: dict[str, list[int]] = {}
    for sub_id, position in pairs:
        per_subscription.setdefault(sub_id, []).append(position)
    per_endpoint: dict[tuple[str, str], list[str]] = {}
    for sub_id in per_subscription:
        sub = subscriptions[sub_id]
        webhook_url, to_stream = delivery_of(sub.callback_url)
        if webhook_url:
            per_endpoint.setdefault((sub.tenant, webhook_url), []).append(sub_id)
        if to_stream:
            per_endpoint.setdefault((sub.tenant, STREAM_DELIVERY), []).append(sub_id)
    found: list[Message] = []
    now = time.time()
    explained = _Explanations(batch, alternatives, explain)
    explained.read({position for _, position in pairs})
    frame = _Frame(batch, payload_version)
    room = max_bytes - frame.size
    for (tenant, url), sub_ids in per_endpoint.items():
        chunk = _Chunk(frame)
        # By id: which matches share a message (and its webhook-id) must not follow the order
        # the subscriptions were loaded in (a matcher restarted loads them in another).
        for sub_id in sorted(sub_ids):
            sub = subscriptions[sub_id]
            for position in per_subscription[sub_id]:
                delivered, head, rest = _match(sub, position, batch, explained, payload_version)
                if chunk.pairs and (
                    len(chunk.pairs) >= most
                    or (
                        sub_id not in chunk.subscriptions
                        and len(chunk.subscriptions) >= most_subscriptions
                    )
                    or chunk.size + chunk.cost(position, head, rest) > room
                ):
                    found.append(chunk.message(tenant, url, batch, now))
                    chunk = _Chunk(frame)
                chunk.add(sub_id, delivered, position, head, rest)
        if chunk.pairs:
            found.append(chunk.message(tenant, url, batch, now))
    return found


def explained_matches(
    pairs: Sequence[tuple[str, int]],
    batch: Batch,
    subscriptions: Mapping[str, Subscription],
    alternatives: HeldAlternatives,
    tenant: str,
    max_bytes: int = 0,
) -> tuple[list[tuple[str, int, bytes]], bool]:
    """(id delivered under, position, JSON of ``matched``) for each of ``pairs`` whose
    subscription is ``tenant``'s, once each: what :func:`messages` would deliver to that tenant
    (a dry run's answer; the other tenants' matches of a shared stream are not shown); and
    whether that is all of them: with ``max_bytes``, explaining stops once the JSON passes it,
    so that a dry run's memory is bounded whatever its size."""
    explained = _Explanations(batch, alternatives, True)
    mine = [(subscriptions[sub_id], position) for sub_id, position in pairs]
    mine = [(sub, position) for sub, position in mine if sub.tenant == tenant]
    explained.read({position for _, position in mine})
    delivered_id = explained.delivered_id
    found: dict[tuple[str, int], bytes] = {}
    size = 0
    for sub, position in mine:
        sub_id = sub.id if delivered_id is None else delivered_id(sub.id)
        if (sub_id, position) not in found:
            matched = found[sub_id, position] = explained.matched(sub, position)
            size += len(matched) + len(sub_id) + 16
            if max_bytes and size > max_bytes:
                return [], False
    return [(sub_id, position, matched) for (sub_id, position), matched in found.items()], True


class _Explanations:
    """The ``matched`` of each match (:mod:`wordcast.query.explain`), each publication analysed
    once for all its matches."""

    def __init__(self, batch: Batch, alternatives: HeldAlternatives, wanted: bool) -> None:
        self.publications = batch.publications
        self.alternatives = alternatives if len(alternatives) else None
        # An alternative's match is its subscription's, signed with that one's secret.
        self.delivered_id = None if self.alternatives is None else alternatives.subscription_id
        self.wanted = wanted
        self._texts: dict[int, AnalysedText] = {}
        self._parts: dict[int, dict[str, bytes]] = {}  # position -> term -> '"term":[[s,e]]'

    def read(self, positions: Iterable[int]) -> None:
        """Read the offsets of the English publications among ``positions`` at once, compiled
        (the others are analysed one by one when a match needs them)."""
        if not self.wanted:
            return
        english = [k for k in sorted(positions) if _read_as_english(self.publications[k][2])]
        texts = [self.publications[k][1] for k in english]
        for k, parts in zip(english, compiled_term_parts(texts), strict=True):
            if parts is not None:
                self._parts[k] = parts

    def matched(self, sub: Subscription, position: int) -> bytes:
        """The JSON of the match's ``matched``."""
        text = self.publications[position][1]
        if sub.pattern:
            return orjson.dumps(explain_pattern(sub.pattern, text))
        alternatives = self.alternatives
        held = None if alternatives is None else alternatives.clause(sub.id)
        if held is None:
            # A plain conjunction, most matches: its terms' parts, each encoded once for every
            # match of the publication, put together as explain_terms's JSON would be.
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
        return orjson.dumps(explain_clause(held[1], analysed, held[0], held[2]))

    def _analysed(self, position: int) -> AnalysedText:
        analysed = self._texts.get(position)
        if analysed is None:
            text, terms = self.publications[position][1:3]
            analysed = self._texts[position] = AnalysedText(text, _language(terms))
        return analysed


def _language(terms: Iterable[str]) -> str | None:
    """The language the router named among a publication's filter terms (lang:de), if any:
    they come after its words, so looked for from the end."""
    listed = terms if isinstance(terms, Sequence) else tuple(terms)
    return next((t[5:] for t in reversed(listed) if t.startswith("lang:")), None)


def _read_as_english(terms: Iterable[str]) -> bool:
    """Whether a publication's terms are all its English analysis gives (no language, English,
    or one without a Snowball stemmer, which adds no terms of its own): what the compiled
    analyser reads the offsets of."""
    language = _language(terms)
    return language is None or language == ENGLISH or language not in SNOWBALL


def _part(term: str, offsets: Sequence[tuple[int, int]]) -> bytes:
    """A term's JSON member of a ``matched``'s ``terms``: ``b'"term":[[start,end],…]'``."""
    return orjson.dumps({term: offsets})[1:-1]


def compiled_reads(publication: RoutedPublication) -> bool:
    """Whether the compiled analyser reads the offsets of ``publication`` for its ``matched``
    (an English ASCII text); the reference reads the others."""
    return publication[1].isascii() and _read_as_english(publication[2])


def reference_reading(
    publication: RoutedPublication,
) -> tuple[dict[str, bytes], list[tuple[int, int]]]:
    """Each term's JSON member of a ``matched`` (``b'"term":[[s,e]]'``), and the places of the
    text's tokens by position, as the reference reads ``publication``."""
    analysed = AnalysedText(publication[1], _language(publication[2]))
    offsets = analysed.term_offsets
    parts = {term: _part(term, found) for term, found in offsets.items()}
    return parts, analysed.token_spans


def frame_of(batch: Batch) -> tuple[bytes, bytes, bytes]:
    """A version 2 message's JSON before its publications, between them and its matches, and
    after its matches."""
    frame = _Frame(batch, 2)
    return frame.head, frame.between, frame.tail


class _Frame:
    """What a message's body holds around its matches (and, in version 2, its publications):
    the JSON of the whole payload, whose parts are put in between. The publisher and the stream
    are the whole batch's, named once for every match of it."""

    def __init__(self, batch: Batch, version: int) -> None:
        self.version = version
        self.publications = batch.publications
        self._encoded: dict[int, bytes] = {}
        payload: dict[str, Any] = {"type": "matches"}
        if version >= 2:
            payload["version"] = version
        payload |= {"publisher": batch.publisher, "stream": batch.stream or None}
        self.head = orjson.dumps(payload)[:-1]
        self.tail = b"]" + (b',"backfill":true' if batch.backfill else b"") + b"}"
        if version >= 2:
            self.head += b',"publications":['
            self.between = b'],"matches":['
        else:
            self.head += b',"matches":['
            self.between = b""
        self.size = len(self.head) + len(self.between) + len(self.tail)

    def publication(self, position: int) -> bytes:
        """A publication as version 2 names it, once a message (encoded once a batch)."""
        encoded = self._encoded.get(position)
        if encoded is None:
            pub_id, text = self.publications[position][:2]
            encoded = self._encoded[position] = orjson.dumps({"id": pub_id, "text": text})
        return encoded


def _match(
    sub: Subscription, position: int, batch: Batch, explained: _Explanations, version: int
) -> tuple[str, bytes, bytes | None]:
    """The id a match is delivered under, and its JSON: in version 2 as the part before its
    publication's place in the message and the part after it (the place is known once it is in
    a message); in version 1 whole (and None)."""
    delivered_id = explained.delivered_id
    sub_id = sub.id if delivered_id is None else delivered_id(sub.id)
    matched = b',"matched":' + explained.matched(sub, position) + b"}" if explained.wanted else b"}"
    tagged = b',"tag":' + orjson.dumps(sub.tag) if sub.tag else b""
    if version >= 2:
        head = b'{"subscription_id":' + orjson.dumps(sub_id) + tagged + b',"publication":'
        return sub_id, head, matched
    pub_id, text = batch.publications[position][:2]
    kind, written = ("pattern", sub.pattern) if sub.pattern else ("query", sub.query)
    match: dict[str, Any] = {"subscription_id": sub_id}
    if sub.tag:
        match["tag"] = sub.tag
    match |= {kind: written, "publication_id": pub_id, "text": text}
    return sub_id, orjson.dumps(match)[:-1] + matched, None


class _Chunk:
    """The matches of one message as they are gathered: their JSON, pairs and subscriptions, and (in
    version 2) the publications they name, each once."""

    __slots__ = ("encoded", "frame", "pairs", "places", "publications", "size", "subscriptions")

    def __init__(self, frame: _Frame) -> None:
        self.frame = frame
        self.encoded: list[bytes] = []
        self.pairs: list[tuple[str, str]] = []
        self.subscriptions: set[str] = set()  # stored ids: each brings a secret to sign with
        self.places: dict[int, int] = {}  # position in the batch -> place in the message
        self.publications: list[bytes] = []
        self.size = 0

    def cost(self, position: int, head: bytes, rest: bytes | None) -> int:
        """The bytes a match adds to the message (with its publication, if new to it)."""
        if rest is None:
            return len(head) + 1
        place = self.places.get(position)
        if place is not None:
            return len(head) + len(str(place)) + len(rest) + 1
        new = len(str(len(self.places))) + len(self.frame.publication(position)) + 1
        return len(head) + len(rest) + 1 + new

    def add(
        self, stored_id: str, delivered_id: str, position: int, head: bytes, rest: bytes | None
    ) -> None:
        frame = self.frame
        encoded = head
        if rest is not None:
            place = self.places.get(position)
            if place is None:
                place = self.places[position] = len(self.publications)
                publication = frame.publication(position)
                self.publications.append(publication)
                self.size += len(publication) + 1
            encoded = head + str(place).encode() + rest
        self.encoded.append(encoded)
        self.pairs.append((delivered_id, frame.publications[position][0]))
        self.subscriptions.add(stored_id)
        self.size += len(encoded) + 1

    def message(self, tenant: str, url: str, batch: Batch, now: float) -> Message:
        frame = self.frame
        parts = (frame.head, b",".join(self.publications), frame.between, b",".join(self.encoded))
        body = (b"".join(parts) + frame.tail).decode()
        each = Counter(sub_id for sub_id, _ in self.pairs)
        subscription_ids = tuple(each)  # in the order of their first match
        msg_id = webhook_id(self.pairs, batch.publisher, batch.stream)
        counts = tuple(each.values())
        return Message(
            subscription_ids,
            tenant,
            url,
            msg_id,
            body,
            len(self.pairs),
            now,
            batch.accepted,
            counts,
        )
