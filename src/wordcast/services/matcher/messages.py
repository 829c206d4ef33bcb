"""A routed batch's matches, gathered into the messages a matcher records and delivers.

A message holds a batch's matches for one callback URL of one tenant (at most ``delivery_batch``
matches from at most ``MAX_SIGNERS`` subscriptions), signed later with each of those subscriptions'
secrets, or for the tenant's match stream (``STREAM_DELIVERY`` as its URL; a subscription
delivered both ways is in a message of each); its webhook-id is derived from the (subscription,
publication) pairs it holds and their publisher and stream (which the message names once: every
match of a routed batch has the same), the same on every attempt and redelivery. An alternative
of a boolean query is delivered under its subscription's id.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from wordcast.query.alternatives import HeldAlternatives
from wordcast.query.explain import AnalysedText, explain_clause, explain_pattern, explain_terms
from wordcast.services.matcher.index import Routed
from wordcast.storage.outbox import MAX_SIGNERS, Message, webhook_id
from wordcast.storage.records import STREAM_DELIVERY, Subscription, delivery_of


@dataclass(frozen=True, slots=True)
class Batch:
    """A routed batch as the messages need it: its publications, who published them, where."""

    publications: Sequence[Routed]
    publisher: str
    stream: str
    accepted: float = 0.0  # when the router took the publications (0: not said)
    backfill: bool = False  # matches of a new subscription in recent publications


def messages(
    pairs: Sequence[tuple[str, int]],
    batch: Batch,
    subscriptions: Mapping[str, Subscription],
    alternatives: HeldAlternatives,
    most: int,
    *,
    explain: bool = True,
) -> list[Message]:
    """The messages for (stored subscription id, position) ``pairs`` of ``batch``, at most
    ``most`` matches each; with ``explain``, each match says why (``matched``)."""
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
    for (tenant, url), sub_ids in per_endpoint.items():
        chunk: list[tuple[Subscription, int]] = []
        signers: set[str] = set()
        for sub_id in sub_ids:
            for position in per_subscription[sub_id]:
                full = len(chunk) >= most
                if full or (sub_id not in signers and len(signers) >= MAX_SIGNERS):
                    found.append(_message(tenant, url, chunk, batch, explained, now))
                    chunk, signers = [], set()
                chunk.append((subscriptions[sub_id], position))
                signers.add(sub_id)
        if chunk:
            found.append(_message(tenant, url, chunk, batch, explained, now))
    return found


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

    def matched(self, sub: Subscription, position: int) -> dict[str, Any]:
        text = self.publications[position][1]
        if sub.pattern:
            return explain_pattern(sub.pattern, text)
        analysed = self._texts.get(position)
        if analysed is None:
            terms = self.publications[position][2]
            # The router names the language among the filter terms (lang:de).
            language = next((t[5:] for t in terms if t.startswith("lang:")), None)
            analysed = self._texts[position] = AnalysedText(text, language)
        alternatives = self.alternatives
        held = None if alternatives is None else alternatives.clause(sub.id)
        if held is None:
            return explain_terms(sub.terms, analysed)
        return explain_clause(held[1], analysed, held[0], held[2])


def _message(
    tenant: str,
    url: str,
    chunk: list[tuple[Subscription, int]],
    batch: Batch,
    explained: _Explanations,
    now: float,
) -> Message:
    # One pass, no call per match that can be spared: at 4 matches a publication this loop is a
    # tenth of a matcher's time, bound by reading subscriptions scattered over its memory.
    matches = []
    pairs = []
    publications = batch.publications
    delivered_id = explained.delivered_id
    matched = explained.matched if explained.wanted else None
    for sub, position in chunk:
        sub_id = sub.id if delivered_id is None else delivered_id(sub.id)
        pub_id, text = publications[position][:2]
        kind, written = ("pattern", sub.pattern) if sub.pattern else ("query", sub.query)
        match: dict[str, Any] = {
            "subscription_id": sub_id,
            kind: written,
            "publication_id": pub_id,
            "text": text,
        }
        if matched is not None:
            match["matched"] = matched(sub, position)
        matches.append(match)
        pairs.append((sub_id, pub_id))
    signers = tuple(dict.fromkeys(sub_id for sub_id, _ in pairs))
    # The publisher and the stream are the whole batch's: named once, for every match of it.
    payload: dict[str, Any] = {
        "type": "matches",
        "publisher": batch.publisher,
        "stream": batch.stream or None,
        "matches": matches,
    }
    if batch.backfill:
        payload["backfill"] = True
    body = orjson.dumps(payload).decode()
    msg_id = webhook_id(pairs, batch.publisher, batch.stream)
    return Message(signers, tenant, url, msg_id, body, len(pairs), now, batch.accepted)
