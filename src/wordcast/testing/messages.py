"""The reference of the message writer (``wordcast._core.Deliveries``, driven by
:mod:`wordcast.services.matcher.messages`): a batch's matches gathered into the messages a
matcher records and delivers, one Python object per match. The tests hold the compiled writer to
it byte for byte, for every kind of match and both payload versions.

A message holds a batch's matches for one callback URL of one tenant, its webhook endpoint (at
most ``delivery_batch`` matches in at most ``message_max_bytes``: what a message costs a router
streaming it, or a receiver, is bounded in bytes as well as in matches), signed later with the
endpoint's secret (and, while the migration window is open, with the secrets of its
subscriptions too, at most ``subscriptions_max`` of them), or for the tenant's match stream
(``STREAM_DELIVERY`` as its URL; a subscription delivered both ways is in a message of each).
Within a message, matches go by stored subscription id, each subscription's by position. Its
webhook-id is derived from the (subscription, publication) pairs it holds and their publisher and
stream (which the message names once: every match of a routed batch has the same), the same on
every attempt and redelivery. An alternative of a boolean query is delivered under its
subscription's id.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import orjson

from wordcast.storage.outbox import Message, webhook_id
from wordcast.storage.records import STREAM_DELIVERY, Subscription, delivery_of


class BatchLike(Protocol):
    """A routed batch (``wordcast.services.matcher.index.Batch``)."""

    @property
    def ids(self) -> Sequence[str]: ...
    @property
    def texts(self) -> Sequence[str]: ...
    @property
    def publisher(self) -> str: ...
    @property
    def stream(self) -> str: ...
    @property
    def accepted(self) -> float: ...
    @property
    def backfill(self) -> bool: ...


class Explaining(Protocol):
    """Why each match matched (``wordcast.services.matcher.explanations.Explanations``)."""

    def delivered_id(self, stored_id: str) -> str: ...
    def matched(self, sub: Subscription, position: int) -> bytes: ...


MESSAGE_MAX_BYTES = 1 << 20  # the setting's default
MESSAGE_VERSION = 2  # the setting's default


def messages(
    pairs: Sequence[tuple[str, int]],
    batch: BatchLike,
    subscriptions: Mapping[str, Subscription],
    explained: Explaining,
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
    each match says why (``matched``, as ``explained`` gives it). ``payload_version`` is the
    payload's shape (module docstring)."""
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
    frame = _Frame(batch, payload_version)
    room = max_bytes - frame.size
    for (tenant, url), sub_ids in per_endpoint.items():
        chunk = _Chunk(frame)
        # By id: which matches share a message (and its webhook-id) must not follow the order
        # the subscriptions were loaded in (a matcher restarted loads them in another).
        for sub_id in sorted(sub_ids):
            sub = subscriptions[sub_id]
            for position in sorted(per_subscription[sub_id]):
                delivered, head, rest = _match(
                    sub, position, batch, explained, explain, payload_version
                )
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
                chunk.add(sub, delivered, position, head, rest)
        if chunk.pairs:
            found.append(chunk.message(tenant, url, batch, now))
    return found


class _Frame:
    """What a message's body holds around its matches (and, in version 2, its publications):
    the JSON of the whole payload, whose parts are put in between. The publisher and the stream
    are the whole batch's, named once for every match of it."""

    def __init__(self, batch: BatchLike, version: int) -> None:
        self.version = version
        self.ids, self.texts = batch.ids, batch.texts
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
            pub_id, text = self.ids[position], self.texts[position]
            encoded = self._encoded[position] = orjson.dumps({"id": pub_id, "text": text})
        return encoded


def _match(
    sub: Subscription,
    position: int,
    batch: BatchLike,
    explained: Explaining,
    explain: bool,
    version: int,
) -> tuple[str, bytes, bytes | None]:
    """The id a match is delivered under, and its JSON: in version 2 as the part before its
    publication's place in the message and the part after it (the place is known once it is in
    a message); in version 1 whole (and None)."""
    sub_id = explained.delivered_id(sub.id)
    matched = b',"matched":' + explained.matched(sub, position) + b"}" if explain else b"}"
    tagged = b',"tag":' + orjson.dumps(sub.tag) if sub.tag else b""
    if version >= 2:
        head = b'{"subscription_id":' + orjson.dumps(sub_id) + tagged + b',"publication":'
        return sub_id, head, matched
    pub_id, text = batch.ids[position], batch.texts[position]
    kind, written = ("pattern", sub.pattern) if sub.pattern else ("query", sub.query)
    match: dict[str, Any] = {"subscription_id": sub_id}
    if sub.tag:
        match["tag"] = sub.tag
    match |= {kind: written, "publication_id": pub_id, "text": text}
    return sub_id, orjson.dumps(match)[:-1] + matched, None


class _Chunk:
    """The matches of one message as they are gathered: their JSON, pairs and subscriptions, and (in
    version 2) the publications they name, each once."""

    __slots__ = (
        "encoded",
        "frame",
        "incarnations",
        "pairs",
        "places",
        "publications",
        "size",
        "subscriptions",
    )

    def __init__(self, frame: _Frame) -> None:
        self.frame = frame
        self.encoded: list[bytes] = []
        self.pairs: list[tuple[str, str]] = []
        self.subscriptions: set[str] = set()  # stored ids: each brings a secret to sign with
        # By delivered id, its first match's record's ``created`` (a query's alternatives share it).
        self.incarnations: dict[str, float] = {}
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
        self,
        sub: Subscription,
        delivered_id: str,
        position: int,
        head: bytes,
        rest: bytes | None,
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
        self.pairs.append((delivered_id, frame.ids[position]))
        self.subscriptions.add(sub.id)
        self.incarnations.setdefault(delivered_id, sub.created)
        self.size += len(encoded) + 1

    def message(self, tenant: str, url: str, batch: BatchLike, now: float) -> Message:
        frame = self.frame
        parts = (frame.head, b",".join(self.publications), frame.between, b",".join(self.encoded))
        body = b"".join(parts) + frame.tail
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
            tuple(self.incarnations[sub_id] for sub_id in subscription_ids),
        )
