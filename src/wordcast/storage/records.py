"""What Redis holds for a subscription, and the events that announce its changes, as Python values."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import orjson

from wordcast.routing.placement import Placement, decode, encode, matchers_of


class Subscription(NamedTuple):
    """A keyword subscription (``query`` and its ``terms``) or a pattern subscription.

    A named tuple rather than a frozen dataclass: a matcher holds a million and makes them all
    again at a restart, and a tuple is made in a fifth of the time (:meth:`_replace` changes
    fields)."""

    id: str
    query: str
    terms: tuple[str, ...]
    callback_url: str
    matcher: int
    created: float = 0.0
    pattern: str = ""
    anchor: str = ""
    tenant: str = ""
    secret: str = ""
    placements: tuple[Placement, ...] = ()
    stream: str = ""  # a shared stream it listens to; "" for its own tenant's publications
    tag: str = ""  # the subscriber's label for it, echoed in every match
    # Not stored with it: in a creation answer, its webhook endpoint and that one's secret.
    endpoint_id: str = ""

    def answered(self, endpoint_id: str, secret: str) -> Subscription:
        """As a creation answer shows it: with its endpoint's id and secret."""
        return self._replace(endpoint_id=endpoint_id, secret=secret)

    def __repr__(self) -> str:  # the secret left out, as from logs
        shown = ", ".join(
            f"{name}={value!r}"
            for name, value in zip(self._fields, self, strict=True)
            if name != "secret"
        )
        return f"Subscription({shown})"

    @property
    def is_pattern(self) -> bool:
        return bool(self.pattern)

    @property
    def webhook_url(self) -> str:
        """Where its matches are POSTed; "" when they go to the match stream only."""
        return delivery_of(self.callback_url)[0]

    @property
    def to_stream(self) -> bool:
        """Whether its matches go to its tenant's match stream."""
        return delivery_of(self.callback_url)[1]

    @property
    def audience(self) -> str:
        """Whose publications it matches: :func:`audience` of its stream, or of its tenant."""
        return audience(self.tenant, self.stream)

    @property
    def matchers(self) -> list[int]:
        """Every matcher that holds the subscription (a pattern lives on one, always)."""
        return matchers_of(self.placements) if self.placements else [self.matcher]


@dataclass(frozen=True, slots=True)
class SubscriptionEvent:
    """One committed change.

    ``words`` are the words born (add) or died (del) in s(W); ``held`` and ``dropped`` are, for a
    keyword subscription, the words whose count in a matcher's H(i) rose from or fell to zero, as
    (matcher, words) pairs. For a pattern, ``anchor_joined`` and ``anchor_left`` are the matchers
    on which the count of its anchor rose from or fell to zero.
    """

    id: str
    op: str
    subscription: Subscription
    words: tuple[str, ...]
    anchor_joined: tuple[int, ...] = ()
    anchor_left: tuple[int, ...] = ()
    held: tuple[tuple[int, tuple[str, ...]], ...] = ()
    dropped: tuple[tuple[int, tuple[str, ...]], ...] = ()
    shard: int = 0  # whose event stream it came from (:mod:`wordcast.storage.shards`)


# A subscription's deliveries are kept in its record's ``callback_url`` field, which every script
# and every event already carries, so that a record, a move and an event need nothing new: a
# webhook URL alone (as every record from before the match stream), ``stream:`` alone for the
# tenant's match stream, or ``stream:`` followed by the URL for both. No webhook URL can start so:
# a callback is http(s).
STREAM_DELIVERY = "stream:"


def delivery_address(webhook_url: str, to_stream: bool) -> str:
    """The stored form of a subscription's deliveries (see ``STREAM_DELIVERY``)."""
    return STREAM_DELIVERY + webhook_url if to_stream else webhook_url


def delivery_of(address: str) -> tuple[str, bool]:
    """(webhook URL or "", whether to the match stream) of a stored ``callback_url``."""
    if address.startswith(STREAM_DELIVERY):
        return address[len(STREAM_DELIVERY) :], True
    return address, False


def audience(publisher: str, stream: str) -> str:
    """The publications a subscription meets: a shared stream's, or else its own tenant's.

    A publication sent to a stream reaches the subscriptions to that stream; one sent without a
    stream reaches only its publisher's own subscriptions (tenants stay apart by default)."""
    return f"shared:{stream}" if stream else f"tenant:{publisher}"


def event_order(event_id: str) -> tuple[int, int]:
    millis, _, seq = event_id.partition("-")
    return int(millis), int(seq or 0)


# The fields a Subscription is read from, in the order ``subscription_from_values`` takes them.
FIELDS = (
    "query",
    "terms",
    "callback_url",
    "matcher",
    "created",
    "pattern",
    "anchor",
    "tenant",
    "placements",
    "stream",
    "tag",
)


# The packed layout (issue 41). A record is one value in its shard's bucket (:mod:`.keys`), a
# head the scripts read without parsing JSON, a newline, then the rest as a JSON array:
#
#   matchers \t matcher \t tenant \t placements \t terms \t anchor \n
#   [query, callback_url, created, secret, stream, pattern, previous_secret, previous_until, tag]
#
# ``matchers`` ("0,1") are those that hold it (:attr:`Subscription.matchers`), which a matcher's
# load filters on; ``terms`` are space-separated. Nothing in the head can hold a tab or a newline:
# tenants are names, terms and anchors are analysed words, placements are JSON. The array drops
# trailing empty values.
RECORD_BODY = (
    "query",
    "callback_url",
    "created",
    "secret",
    "stream",
    "pattern",
    "previous_secret",
    "previous_until",
    "tag",
)


def pack_record(sub: Subscription, previous_secret: str = "", previous_until: float = 0.0) -> str:
    """The stored value of ``sub``'s record."""
    matchers = ",".join(str(m) for m in sub.matchers)
    placements = encode(sub.placements) if sub.placements else ""
    head = f"{matchers}\t{sub.matcher}\t{sub.tenant}\t{placements}\t{' '.join(sub.terms)}"
    body: list[str | float] = [sub.query, sub.callback_url, sub.created, sub.secret, sub.stream]
    body += [sub.pattern, previous_secret, previous_until, sub.tag]
    while body and not body[-1]:
        body.pop()
    return f"{head}\t{sub.anchor}\n{orjson.dumps(body).decode()}"


def unpack_record(sub_id: str, value: str) -> Subscription:
    """The subscription a packed record holds."""
    head, _, body = value.partition("\n")
    _, matcher, tenant, placements, terms, anchor = head.split("\t")
    query, url, created, secret, stream, pattern, _, _, tag = (orjson.loads(body) + [""] * 9)[:9]
    return Subscription(
        id=sub_id,
        query=query,
        terms=tuple(terms.split()),
        callback_url=url,
        matcher=int(matcher),
        created=float(created or 0.0),
        pattern=pattern,
        anchor=anchor,
        tenant=tenant,
        secret=secret,
        placements=decode(placements) if placements else (),
        stream=stream,
        tag=tag,
    )


def secrets_of_record(value: str) -> tuple[str, str, float]:
    """(secret, previous secret, until when the previous one is valid) of a packed record."""
    body = orjson.loads(value.partition("\n")[2]) + [""] * 8
    return body[3], body[6], float(body[7] or 0.0)


def tenant_of_record(value: str) -> str:
    return value.split("\t", 3)[2]


def subscription_from_fields(sub_id: str, fields: dict[str, str]) -> Subscription:
    return subscription_from_values(sub_id, [fields.get(name) for name in FIELDS])


def subscription_from_values(sub_id: str, values: Sequence[str | None]) -> Subscription:
    """A subscription from its record's ``FIELDS`` (None or "" for a field it does not have)."""
    (
        query,
        terms,
        callback_url,
        matcher,
        created,
        pattern,
        anchor,
        tenant,
        placements,
        stream,
        tag,
    ) = values
    if not matcher:
        raise KeyError(f"subscription {sub_id} has no matcher field")
    return Subscription(
        id=sub_id,
        query=query or "",
        terms=tuple(terms.split()) if terms else (),
        callback_url=callback_url or "",
        matcher=int(matcher),
        created=float(created) if created else 0.0,
        pattern=pattern or "",
        anchor=anchor or "",
        tenant=tenant or "",
        placements=decode(placements) if placements else (),
        stream=stream or "",
        tag=tag or "",
    )


def event_from_fields(event_id: str, fields: dict[str, str], shard: int = 0) -> SubscriptionEvent:
    sub = subscription_from_fields(fields["sub"], fields)
    op = fields["op"]
    held = _word_changes(fields.get("held"))
    if "held" not in fields and op != "del" and sub.terms:
        # Written by a router from before events named H's changes: a reader that takes every
        # word as held where the subscription now is routes a little more, never less.
        held = tuple((matcher, sub.terms) for matcher in sub.matchers)
    return SubscriptionEvent(
        id=event_id,
        op=op,
        subscription=sub,
        words=tuple(fields.get("words", "").split()),
        anchor_joined=tuple(int(m) for m in fields.get("anchor_joined", "").split()),
        anchor_left=tuple(int(m) for m in fields.get("anchor_left", "").split()),
        held=held,
        dropped=_word_changes(fields.get("dropped")),
        shard=shard,
    )


# The fields of each change a batch entry (op "batch", written by ``ADD_MANY`` and
# ``DELETE_MANY``) holds, in this order ("" where a change has none).
BATCH_EVENT = (
    "op",
    "sub",
    "matcher",
    "terms",
    "callback_url",
    "query",
    "words",
    "tenant",
    "placements",
    "held",
    "dropped",
    "stream",
    "tag",  # absent from entries written before tags
    # An add's record's ``created`` (the incarnation its counters belong to), as Python wrote
    # it; absent from other changes and from entries written before issue 52.
    "created",
)


# Which rows of a batch entry (``BATCH_EVENT`` values) a follower reads; the others it would
# apply to no effect, and are not made into events.
BatchRows = Callable[[list[str]], bool]


def held_by(matcher: int) -> BatchRows:
    """A matcher's rows: the adds of records it holds, every move (one may take a record away
    from it) and every delete (its dispatcher may be delivering another matcher's outbox, and
    must forget the deleted subscriptions' secrets too)."""
    return lambda row: row[0] != "add" or matcher in _holders(row[8], row[2])


def changes_word_maps(row: list[str]) -> bool:
    """A router's rows: those that change an H(i), all its replica keeps of a batch."""
    return bool(row[9] or row[10])


def events_from_entry(
    entry_id: str, fields: dict[str, str], shard: int = 0, rows: BatchRows | None = None
) -> list[SubscriptionEvent]:
    """The events one entry of an event stream announces: one change, or a batch's (each under
    the entry's id: a batch is applied, and a position passes it, as a whole), only the
    ``rows`` the reader wants."""
    if fields.get("op") != "batch":
        return [event_from_fields(entry_id, fields, shard)]
    # Read straight into the values (a batch holds a thousand; every follower reads them all).
    events = []
    read = orjson.loads(fields["events"])
    if rows is not None:
        read = [row for row in read if rows(row)]
    for row in read:
        op, sub_id, matcher, terms, url, query, words, tenant, placements, held, dropped = row[:11]
        sub = Subscription(
            sub_id,
            query,
            tuple(terms.split()),
            url,
            int(matcher),
            tenant=tenant,
            placements=decode(placements) if placements else (),
            stream=row[11],
            tag=row[12] if len(row) > 12 else "",
            created=float(row[13]) if len(row) > 13 and row[13] else 0.0,
        )
        events.append(
            SubscriptionEvent(
                entry_id,
                op,
                sub,
                tuple(words.split()),
                held=_word_changes(held),
                dropped=_word_changes(dropped),
                shard=shard,
            )
        )
    return events


_HOLDERS: dict[tuple[str, str], frozenset[int]] = {}


def _holders(placements: str, matcher: str) -> frozenset[int]:
    """The matchers a batch row's record is placed on (a few placements recur in every batch)."""
    found = _HOLDERS.get((placements, matcher))
    if found is None:
        if len(_HOLDERS) > 4096:
            _HOLDERS.clear()
        held = matchers_of(decode(placements)) if placements else [int(matcher)]
        found = _HOLDERS[placements, matcher] = frozenset(held)
    return found


def _word_changes(text: str | None) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """ "matcher word word…" lines, one per matcher whose H(i) changed."""
    changes = []
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) > 1:
            changes.append((int(parts[0]), tuple(parts[1:])))
    return tuple(changes)
