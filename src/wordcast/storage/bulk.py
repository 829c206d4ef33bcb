"""A batch of subscription changes as one script per shard (:data:`~.scripts.ADD_MANY`): its keys
and its one JSON argument (``batch_json``), and its answer read back.

One script per subscription cost the router more to pack (a dozen arguments each, through
redis-py) than Redis to run, and every follower read an event per subscription; a batch is one
argument and one event entry (read by :func:`~.records.events_from_entry`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from wordcast.errors import LimitExceeded, StaleMapping
from wordcast.routing.placement import Placement, encode, matchers_of
from wordcast.storage import scripts
from wordcast.storage.keys import Keys
from wordcast.storage.records import Subscription, pack_record


def add_many_call(
    keys: Keys, events_max: int, subs: Sequence[Subscription], window: str, room: dict[str, int]
) -> tuple[list[str], list[Any]]:
    """``ADD_MANY``'s keys and argument for keyword subscriptions placed for ``window``; ``room``:
    each tenant's limit in this shard."""
    tenants = list(room)
    tenant_at = {tenant: k for k, tenant in enumerate(tenants, 1)}
    placed = [
        sub if sub.placements else sub._replace(placements=(Placement(sub.matcher, 0),))
        for sub in subs
    ]
    matchers = sorted({m for sub in placed for m in sub.matchers})
    matcher_at = {matcher: k for k, matcher in enumerate(matchers, 1)}
    rows = [
        [
            sub.id, str(sub.matcher), sub.query, " ".join(sub.terms), sub.callback_url,
            pack_record(sub), tenant_at[sub.tenant], encode(sub.placements), sub.stream,
            [matcher_at[m] for m in sub.matchers], sub.tag,
            repr(sub.created) if sub.created else "",
        ]
        for sub in placed
    ]  # fmt: skip
    argument = {
        "w": window,
        "m": events_max,
        "tn": tenants,
        "tr": [room[tenant] for tenant in tenants],
        "o": [str(m) for m in matchers],
        "s": rows,
    }
    touched = [keys.words, keys.events, keys.window, keys.tenant_counts, keys.matcher_counts]
    touched += [keys.matcher_words(matcher) for matcher in matchers]
    touched += [keys.record_of(sub.id) for sub in subs]
    return touched, scripts.ADD_MANY.args(batch_json=orjson.dumps(argument))


def delete_many_call(
    keys: Keys, events_max: int, subs: Sequence[Subscription]
) -> tuple[list[str], list[Any]]:
    """``DELETE_MANY``'s keys and argument for keyword records as read (each is deleted only if
    its placements are still these)."""
    matchers = sorted({m for sub in subs for m in sub.matchers})
    matcher_at = {matcher: k for k, matcher in enumerate(matchers, 1)}
    rows = [
        [
            sub.id,
            encode(sub.placements) if sub.placements else "",
            [matcher_at[m] for m in sub.matchers],
        ]
        for sub in subs
    ]
    touched = [keys.words, keys.events, keys.tenant_counts, keys.matcher_counts]
    touched += [keys.matcher_words(matcher) for matcher in matchers]
    touched += [keys.record_of(sub.id) for sub in subs]
    argument = {"m": events_max, "o": [str(m) for m in matchers], "s": rows}
    return touched, scripts.DELETE_MANY.args(batch_json=orjson.dumps(argument))


def move_many_call(
    keys: Keys, events_max: int, moves: Sequence[tuple[Subscription, Sequence[Placement]]]
) -> tuple[list[str], list[Any]]:
    """``MOVE_MANY``'s keys and argument for keyword records as read, each to its placements."""
    steps = []
    for sub, placements in moves:
        before, after = set(sub.matchers), set(matchers_of(placements))
        opened = [p.matcher for p in placements if p.is_open] or [placements[-1].matcher]
        steps.append((sub, placements, sorted(before - after), sorted(after - before), opened[0]))
    matchers = sorted({m for _, _, left, joined, _ in steps for m in left + joined})
    matcher_at = {matcher: k for k, matcher in enumerate(matchers, 1)}
    rows = [
        [
            sub.id, encode(sub.placements) if sub.placements else "", encode(placements),
            str(opened), [matcher_at[m] for m in left], [matcher_at[m] for m in joined],
            ",".join(str(m) for m in matchers_of(placements)),
        ]
        for sub, placements, left, joined, opened in steps
    ]  # fmt: skip
    touched = [keys.events, keys.matcher_counts]
    touched += [keys.matcher_words(matcher) for matcher in matchers]
    touched += [keys.record_of(sub.id) for sub, _ in moves]
    argument = {"m": events_max, "o": [str(m) for m in matchers], "s": rows}
    return touched, scripts.MOVE_MANY.args(batch_json=orjson.dumps(argument))


def add_many_answers(
    reply: Any, subs: Sequence[Subscription], tenant_limit: int, window: str
) -> list[str | BaseException]:
    """Each subscription's event id (the batch's), or the error one added alone would raise."""
    if str(reply) == "-1":
        stale = StaleMapping(f"the mapping window is no longer {window!r}")
        return [stale] * len(subs)
    event_id, codes = orjson.loads(reply)
    answers: list[str | BaseException] = []
    for sub, code in zip(subs, codes, strict=True):
        if code == 1:
            answers.append(event_id)
        elif code == 0:
            answers.append(over_limit(sub.tenant, tenant_limit))
        else:
            answers.append(ValueError(f"subscription id {sub.id} already exists"))
    return answers


def over_limit(tenant: str, tenant_limit: int) -> LimitExceeded:
    return LimitExceeded(
        f"tenant {tenant!r} holds {tenant_limit} subscriptions, the limit; delete some first"
    )
