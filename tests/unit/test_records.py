"""The packed record layout and the batch events, as pure functions (issue 41)."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from wordcast.routing.placement import Placement, encode
from wordcast.storage.records import (
    Subscription,
    changes_word_maps,
    events_from_entry,
    held_by,
    pack_record,
    secrets_of_record,
    tenant_of_record,
    unpack_record,
)

WORDS = st.text(st.characters(blacklist_categories=("Cs", "Zs", "Cc")), min_size=1, max_size=8)
PLACEMENTS = st.lists(
    st.builds(
        Placement,
        matcher=st.integers(0, 9),
        first=st.integers(0, 5),
        until=st.none() | st.integers(6, 9),
        copies=st.frozensets(st.integers(0, 9), max_size=2),
    ),
    max_size=3,
).map(tuple)


@settings(max_examples=300, deadline=None)
@given(
    query=st.text(max_size=40),  # tabs, newlines and quotes included: they sit in the JSON part
    terms=st.lists(WORDS, max_size=4).map(tuple),
    url=st.text(max_size=30),
    matcher=st.integers(0, 9),
    created=st.floats(0, 2e9, allow_nan=False),
    pattern=st.text(max_size=10),
    anchor=st.text(st.characters(blacklist_categories=("Cs", "Zs", "Cc")), max_size=6),
    tenant=st.from_regex(r"[A-Za-z0-9_.-]{1,12}", fullmatch=True),
    secret=st.text(max_size=12),
    stream=st.text(max_size=8),
    placements=PLACEMENTS,
    previous=st.text(max_size=12),
    until=st.floats(0, 2e9, allow_nan=False),
)
def test_a_packed_record_reads_back_as_it_was(
    query: str,
    terms: tuple[str, ...],
    url: str,
    matcher: int,
    created: float,
    pattern: str,
    anchor: str,
    tenant: str,
    secret: str,
    stream: str,
    placements: tuple[Placement, ...],
    previous: str,
    until: float,
) -> None:
    sub = Subscription(
        "id", query, terms, url, matcher, created, pattern, anchor, tenant, secret, placements,
        stream,
    )  # fmt: skip
    value = pack_record(sub, previous, until)
    assert unpack_record("id", value) == sub
    assert tenant_of_record(value) == tenant
    assert secrets_of_record(value) == (secret, previous, until)
    head = value.partition("\n")[0].split("\t")  # what the Lua scripts read
    assert head[0] == ",".join(map(str, sub.matchers))
    assert head[3] == (encode(placements) if placements else "")


def _row(op: str, sub_id: str, matcher: int, placements: str) -> list[str]:
    return [op, sub_id, str(matcher), "w", "", "q", "", "t", placements, "", "", ""]


def test_a_matchers_follower_reads_only_the_batch_rows_it_has_to_apply() -> None:
    on_0, on_1 = encode((Placement(0, 0),)), encode((Placement(1, 0),))
    both = encode((Placement(0, 0, 2), Placement(1, 2)))
    rows = [
        _row("add", "a", 0, on_0),
        _row("add", "b", 1, on_1),
        _row("del", "c", 1, on_1),  # every dispatcher forgets a deleted one's secrets
        _row("move", "d", 1, on_1),  # may leave matcher 0: every follower reads a move
        _row("add", "e", 1, both),
    ]
    fields = {"op": "batch", "events": orjson.dumps(rows).decode()}
    read = {
        matcher: [
            e.subscription.id
            for e in events_from_entry(
                "1-0", fields, 0, None if matcher is None else held_by(matcher)
            )
        ]
        for matcher in (None, 0, 1, 2)
    }
    assert read == {
        None: ["a", "b", "c", "d", "e"],
        0: ["a", "c", "d", "e"],
        1: ["b", "c", "d", "e"],
        2: ["c", "d"],
    }


def test_a_routers_follower_reads_only_the_batch_rows_that_change_a_word_map() -> None:
    rows = [_row("add", "a", 0, ""), _row("add", "b", 0, ""), _row("del", "c", 0, "")]
    rows[1][9] = "0 w"  # held: w is new in H(0)
    rows[2][10] = "0 w"  # dropped
    fields = {"op": "batch", "events": orjson.dumps(rows).decode()}
    events = events_from_entry("1-0", fields, 0, changes_word_maps)
    assert [(e.subscription.id, e.held, e.dropped) for e in events] == [
        ("b", ((0, ("w",)),), ()),
        ("c", (), ((0, ("w",)),)),
    ]
