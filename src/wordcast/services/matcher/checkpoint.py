"""A matcher's checkpoint: the subscriptions it holds and the event position they reflect, kept on
its local disk, so that a restart reads them there and replays only the events after that
position instead of reading every record from Redis again.

The file is JSON lines: chunks of records (each the subscription's fields, as ``_row`` writes
them), then a trailer naming the format, its version, the
namespace and matcher, the position, the number of records and the SHA-256 of everything before
it. It is written to a temporary file and renamed, so a crash leaves the previous one whole. A
file that is missing, truncated, altered, of another version or for another matcher is not used,
and the matcher loads from Redis as without one (:meth:`MatcherCheckpoints.read` says why).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from wordcast.routing.placement import decode, encode
from wordcast.services.matcher.settings import MatcherSettings
from wordcast.storage.events import EventFollower, EventLog
from wordcast.storage.records import Subscription

log = logging.getLogger(__name__)

FORMAT = "wordcast-matcher-checkpoint"
VERSION = 2  # 1: fields as strings, as Redis stores them
CHUNK = 10_000  # records a line: reading and writing stay in steps of a few MB


@dataclass(frozen=True, slots=True)
class Checkpoint:
    position: str  # the event stream position the subscriptions reflect
    subscriptions: list[Subscription]
    written: float  # Unix time


class MatcherCheckpoints:
    """Matcher ``ordinal``'s checkpoint file in ``directory``, for namespace ``namespace``."""

    def __init__(self, directory: Path, namespace: str, ordinal: int) -> None:
        self.namespace = namespace
        self.ordinal = ordinal
        self.path = directory / f"{namespace}-matcher-{ordinal}.checkpoint"

    def write(self, position: str, subs: Sequence[Subscription]) -> int:
        """Write a checkpoint of ``subs`` at ``position`` (replacing the last); its bytes."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(self.path.name + ".partial")
        digest = hashlib.sha256()
        size = 0
        with partial.open("wb") as out:
            for start in range(0, len(subs), CHUNK):
                line = orjson.dumps([_row(sub) for sub in subs[start : start + CHUNK]]) + b"\n"
                digest.update(line)
                out.write(line)
                size += len(line)
            trailer = {
                "format": FORMAT,
                "version": VERSION,
                "namespace": self.namespace,
                "matcher": self.ordinal,
                "position": position,
                "records": len(subs),
                "written": time.time(),
                "sha256": digest.hexdigest(),
            }
            out.write(orjson.dumps(trailer) + b"\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, self.path)
        return size

    def read(self) -> Checkpoint | None:
        """The checkpoint, whole and this matcher's; None (and why, logged) otherwise."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            return _not_used(f"it could not be read ({exc})")
        body_end = data.rfind(b"\n", 0, len(data) - 1) + 1
        try:
            trailer = orjson.loads(data[body_end:])
        except orjson.JSONDecodeError:
            return _not_used("it has no trailer (a write cut short?)")
        problem = self._problem(trailer, data[:body_end])
        if problem:
            return _not_used(problem)
        subs: list[Subscription] = []
        try:
            for line in data[:body_end].splitlines():
                subs += map(_subscription, orjson.loads(line))
        except (ValueError, KeyError, IndexError, TypeError) as exc:  # JSONDecodeError included
            return _not_used(f"a record could not be read ({exc})")
        if len(subs) != trailer["records"]:
            return _not_used(f"it holds {len(subs)} records, its trailer says {trailer['records']}")
        return Checkpoint(str(trailer["position"]), subs, float(trailer["written"]))

    def _problem(self, trailer: object, body: bytes) -> str:
        if not isinstance(trailer, dict) or trailer.get("format") != FORMAT:
            return "it is not a matcher checkpoint"
        if trailer.get("version") != VERSION:
            return f"it is of version {trailer.get('version')}, this matcher reads {VERSION}"
        if (trailer.get("namespace"), trailer.get("matcher")) != (self.namespace, self.ordinal):
            return (
                f"it is matcher {trailer.get('matcher')}'s of namespace "
                f"{trailer.get('namespace')!r}"
            )
        if hashlib.sha256(body).hexdigest() != trailer.get("sha256"):
            return "its checksum does not match (damaged)"
        return ""

    def discard(self) -> None:
        """Remove the checkpoint (it no longer matches what Redis holds)."""
        self.path.unlink(missing_ok=True)


class CheckpointKeeper:
    """When a matcher reads its checkpoint and writes a new one: at its start, if the event
    stream still holds every event after the checkpoint's position; every ``every_s`` seconds
    while what it holds changes; and when it stops."""

    def __init__(self, checkpoints: MatcherCheckpoints, events: EventLog, every_s: float) -> None:
        self.checkpoints = checkpoints
        self.events = events
        self.every_s = every_s
        self.written = ""  # the position of the last checkpoint written or read

    @classmethod
    def for_matcher(cls, settings: MatcherSettings, events: EventLog) -> CheckpointKeeper | None:
        """The keeper of a matcher with these settings; None when it keeps no checkpoint."""
        if settings.checkpoint_dir is None:
            return None
        files = MatcherCheckpoints(settings.checkpoint_dir, settings.namespace, settings.ordinal)
        return cls(files, events, settings.checkpoint_every_s)

    def kept_from(self) -> str:
        """The position of the checkpoint a restart would read ("" for none): the event stream
        must keep what came after it."""
        return self.written

    async def load(self) -> Checkpoint | None:
        """The checkpoint to start from, if it can be: whole, and no event after it trimmed."""
        checkpoint = await asyncio.to_thread(self.checkpoints.read)
        if checkpoint is None:
            return None
        if not await self.events.kept_after(checkpoint.position):
            return _not_used(
                f"the event stream no longer holds every change since it was written "
                f"{time.time() - checkpoint.written:.0f} s ago"
            )
        self.written = checkpoint.position
        return checkpoint

    async def write(self, position: str, subs: Callable[[], Sequence[Subscription]]) -> None:
        """A checkpoint at ``position`` of ``subs()`` (read now: they are what it reflects),
        unless the last one is there already. Written in a thread, so matching goes on."""
        if position == self.written:
            return
        held = subs()
        started = time.monotonic()
        size = await asyncio.to_thread(self.checkpoints.write, position, held)
        self.written = position
        log.info(
            "checkpoint of %d subscriptions written (%.0f MB, %.1f s)",
            len(held),
            size / 1e6,
            time.monotonic() - started,
        )

    async def keep(
        self, follower: EventFollower, subs: Callable[[], Sequence[Subscription]]
    ) -> None:
        """Write one every ``every_s`` seconds while the subscriptions change."""
        while True:
            await asyncio.sleep(self.every_s)
            if not follower.ready.is_set():
                continue
            try:
                await self.write(follower.position, subs)
            except OSError as exc:
                log.warning("could not write the matcher's checkpoint: %s", exc)


def _row(sub: Subscription) -> list[Any]:
    """What the index holds of a subscription, as :func:`_subscription` reads it back."""
    return [
        sub.id,
        sub.query,
        sub.terms,
        sub.callback_url,
        sub.matcher,
        sub.created,
        sub.pattern,
        sub.anchor,
        sub.tenant,
        encode(sub.placements) if sub.placements else "",
        sub.stream,
        sub.tag,
    ]


def _subscription(row: list[Any]) -> Subscription:
    """A subscription from its :func:`_row`, read straight into its fields (a restart reads a
    million: a conversion saved is a second saved)."""
    sub_id, query, terms, url, matcher, created, pattern, anchor, tenant, placements, stream = row[
        :11
    ]
    return Subscription(
        sub_id,
        query,
        tuple(terms),
        url,
        matcher,
        created,
        pattern,
        anchor,
        tenant,
        "",
        decode(placements) if placements else (),
        stream,
        row[11] if len(row) > 11 else "",  # its tag (a checkpoint from before tags has none)
    )


def _not_used(reason: str) -> Checkpoint | None:
    """None, the checkpoint not used, once the reason is logged."""
    log.warning("the matcher's checkpoint is not used, loading from Redis instead: %s", reason)
    return None
