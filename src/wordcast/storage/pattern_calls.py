"""A pattern's scripts (:data:`~.scripts.ADD_PATTERN`, ``DELETE_PATTERN``, ``MOVE_PATTERN``): the
keys each touches and its named arguments, built from the subscription. A pattern is changed by
a script of its own, not in a batch: each needs the anchors before it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wordcast.routing.placement import Placement, encode, matchers_of
from wordcast.storage import scripts
from wordcast.storage.keys import Keys
from wordcast.storage.records import Subscription, pack_record

Call = tuple[list[str], list[Any]]  # a script's keys and arguments


def add_pattern_call(
    keys: Keys, events_max: int, sub: Subscription, limit: int, window: str
) -> Call:
    """Store a pattern placed for ``window``, its tenant allowed ``limit`` in this shard."""
    touched = [keys.record_of(sub.id), keys.matcher_counts, keys.matcher_anchors(sub.matcher)]
    touched += [keys.pattern_load, keys.events, keys.tenant_counts, keys.window]
    return touched, scripts.ADD_PATTERN.args(
        id=sub.id,
        matcher=sub.matcher,
        pattern=sub.pattern,
        anchor=sub.anchor,
        callback_url=sub.callback_url,
        record=pack_record(sub),
        events_kept=events_max,
        tenant=sub.tenant,
        limit=limit,
        window=window,
        stream=sub.stream,
        tag=sub.tag,
    )


def delete_pattern_call(keys: Keys, events_max: int, sub: Subscription) -> Call:
    """Delete a pattern if its placements are still those read."""
    touched = [keys.record_of(sub.id), keys.events, keys.pattern_load]
    touched += [keys.tenant_counts, keys.matcher_counts]
    touched += [keys.matcher_anchors(m) for m in sub.matchers]
    return touched, scripts.DELETE_PATTERN.args(
        id=sub.id,
        placements_read=encode(sub.placements) if sub.placements else "",
        events_kept=events_max,
        matchers=sub.matchers,
    )


def move_pattern_call(
    keys: Keys, events_max: int, sub: Subscription, placements: Sequence[Placement]
) -> Call:
    """Re-place a pattern as read on ``placements``."""
    before, after = set(sub.matchers), set(matchers_of(placements))
    leaving, joining = sorted(before - after), sorted(after - before)
    opened = [p.matcher for p in placements if p.is_open] or [placements[-1].matcher]
    touched = [keys.record_of(sub.id), keys.events, keys.pattern_load]
    touched += [keys.tenant_counts, keys.matcher_counts]
    touched += [keys.matcher_anchors(m) for m in [*leaving, *joining]]
    return touched, scripts.MOVE_PATTERN.args(
        id=sub.id,
        placements_read=encode(sub.placements) if sub.placements else "",
        new_placements=encode(placements),
        new_matcher=opened[0],
        leaving=len(leaving),
        events_kept=events_max,
        holders=",".join(map(str, sorted(after))),
        matchers=[*leaving, *joining],
    )
