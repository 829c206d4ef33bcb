"""A matcher's checkpoint file read back: exactly what was written, or nothing when it is cut
short, altered, of another version or another matcher's (the file alone; the e2e tests restart
real matchers from it)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from wordcast.routing.placement import Placement
from wordcast.services.matcher import checkpoint
from wordcast.services.matcher.checkpoint import MatcherCheckpoints
from wordcast.storage.records import Subscription

HELD = [
    Subscription("a", "zebra okapi", ("okapi", "zebra"), "http://127.0.0.1:9/h", 0, 1.5),
    Subscription(
        "b~1",
        "(zebra OR lion) -cage",
        ("lion",),
        "stream:",
        2,
        tenant="acme",
        placements=(Placement(2, 0, 3), Placement(0, 3, None, "lion", frozenset({1}))),
        stream="news",
        tag="big cats ✓",
    ),
    Subscription("p", "", (), "http://127.0.0.1:9/h", 1, pattern="colou?r", anchor="colo"),
] + [Subscription(f"s{k}", "w x", ("w", "x"), "", 0) for k in range(25_000)]


def test_what_is_written_is_read_back_whole(tmp_path: Path) -> None:
    files = MatcherCheckpoints(tmp_path, "ns", 0)
    files.write("5-0 7-1", HELD)
    read = files.read()
    assert read is not None
    assert read.position == "5-0 7-1"
    assert read.subscriptions == HELD


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) - 40],  # cut short
        lambda data: data[:100] + bytes([data[100] ^ 1]) + data[101:],  # a bit of a record
        lambda data: data.replace(b'"version":%d' % checkpoint.VERSION, b'"version":0'),
        lambda data: data.replace(b'"namespace":"ns"', b'"namespace":"other"'),
        lambda data: data.replace(b'"matcher":0', b'"matcher":1'),
        lambda data: b"",
    ],
)
def test_a_checkpoint_that_is_not_whole_or_not_ours_is_not_used(
    tmp_path: Path, damage: object
) -> None:
    files = MatcherCheckpoints(tmp_path, "ns", 0)
    files.write("5-0", HELD)
    assert callable(damage)
    files.path.write_bytes(damage(files.path.read_bytes()))
    assert files.read() is None


def test_a_record_count_that_disagrees_is_not_used(tmp_path: Path) -> None:
    files = MatcherCheckpoints(tmp_path, "ns", 0)
    files.write("5-0", HELD[:3])
    body, _, trailer = files.path.read_bytes().rstrip(b"\n").rpartition(b"\n")
    fields = orjson.loads(trailer) | {"records": 4}
    files.path.write_bytes(body + b"\n" + orjson.dumps(fields) + b"\n")
    assert files.read() is None


def test_no_file_is_no_checkpoint_and_a_failed_write_keeps_the_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = MatcherCheckpoints(tmp_path, "ns", 0)
    assert files.read() is None
    files.write("1-0", HELD[:2])

    def broken(*_: object) -> bytes:
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint.orjson, "dumps", broken)
    with pytest.raises(OSError, match="disk full"):
        files.write("2-0", HELD)
    monkeypatch.undo()
    read = files.read()
    assert read is not None
    assert (read.position, read.subscriptions) == ("1-0", HELD[:2])
