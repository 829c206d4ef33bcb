"""``wordcast subscribe --file subs.jsonl``: a file of subscriptions imported in batches.

Each line is one subscription as the batch endpoint takes it (``{"query": "white house"}``,
``{"pattern": "pie*tea", "callback_url": "…", "stream": "…"}``) or a bare JSON string (a
query). A line without ``key`` gets one from the file's name, its line number and its text, so
sending a line again (a retried request, a resumed import) finds the subscription it made instead
of making another. The lines done so far (the longest run from the top whose batches were all
answered) are written to ``FILE.wordcast-done`` as the import goes: a later run starts after them,
and re-sends at most the batches that were in flight, which their keys make harmless.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from wordcast.backoff import Backoff
from wordcast.client import ApiError, ProgressLine, RouterClient, RouterUnreachable
from wordcast.errors import InvalidInput

DONE_SUFFIX = ".wordcast-done"
FIELDS = {"query", "pattern", "callback_url", "delivery", "stream", "key", "tag"}
RETRIED = {429, 502, 503, 504}  # answers a later try may not get; keys make the retry safe
TRIES = 5


@dataclass
class Imported:
    lines: int  # subscriptions in the file
    skipped: int  # done by an earlier run
    sent: int  # sent by this run (created, or found made by an earlier request)


def done_path(path: Path) -> Path:
    return path.with_name(path.name + DONE_SUFFIX)


def read_items(
    path: Path, callback: str | None, stream: str | None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, batch item) for each non-blank line; InvalidInput names a bad line."""
    with path.open("rb") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            yield number, _item(path, number, line, callback, stream)


def _item(
    path: Path, number: int, line: bytes, callback: str | None, stream: str | None
) -> dict[str, Any]:
    where = f"{path.name}:{number}"
    try:
        item = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"{where}: not JSON ({exc})") from exc
    if isinstance(item, str):
        item = {"query": item}
    if not isinstance(item, dict):
        raise InvalidInput(f'{where}: expected an object such as {{"query": "white house"}}')
    unknown = sorted(set(item) - FIELDS)
    if unknown:
        raise InvalidInput(f"{where}: unknown field {unknown[0]!r} (known: {sorted(FIELDS)})")
    if callback and "delivery" not in item:
        item.setdefault("callback_url", callback)
    if stream:
        item.setdefault("stream", stream)
    if "key" not in item:
        digest = hashlib.sha256(line.strip()).hexdigest()[:24]
        item["key"] = f"{path.name[:120]}:{number}:{digest}".replace(" ", "_")
    return item


def _lines_done(path: Path) -> int:
    try:
        return int(done_path(path).read_text().strip() or 0)
    except FileNotFoundError:
        return 0
    except ValueError as exc:
        raise InvalidInput(
            f"{done_path(path)} is not a line count: delete it to import from the start"
        ) from exc


def _record_done(path: Path, lines: int) -> None:
    """Written aside and renamed: an interrupted write never leaves a half-written count."""
    aside = done_path(path).with_suffix(".tmp")
    aside.write_text(f"{lines}\n")
    os.replace(aside, done_path(path))


async def import_file(
    client: RouterClient,
    path: Path,
    callback: str | None = None,
    stream: str | None = None,
    *,
    batch: int = 500,
    in_flight: int = 4,
    progress: bool = True,
    strict: bool = False,
) -> Imported:
    """Register every subscription of a JSON Lines file, resuming after the lines done before;
    each query read otherwise than X's rules or Lucene's syntax would is named by its line on
    stderr (``strict``: refused, and the import stops there)."""
    skip = _lines_done(path)
    items = [(n, item) for n, item in read_items(path, callback, stream)]  # every line checked
    todo = [(n, item) for n, item in items if n > skip]
    bar = ProgressLine("subscribing", len(todo), enabled=progress)
    if skip:
        bar.note(f"resuming after line {skip:,} ({len(items) - len(todo):,} done before)")
    batches = [todo[i : i + batch] for i in range(0, len(todo), batch)]
    answered = [False] * len(batches)
    first_unanswered = 0
    slots = asyncio.Semaphore(in_flight)

    async def send(index: int) -> None:
        nonlocal first_unanswered
        lines = batches[index]
        async with slots:
            created = await _send(client, path, lines, strict)
        for (number, _), sub in zip(lines, created, strict=True):
            for warning in sub.get("warnings") or ():
                note = f"warning: {path.name} line {number}: {warning}"
                if bar.enabled:
                    bar.note(note)  # under the progress line being redrawn
                else:
                    print(note, file=sys.stderr)
        answered[index] = True
        bar.advance(len(lines))
        while first_unanswered < len(batches) and answered[first_unanswered]:
            first_unanswered += 1
        if first_unanswered:
            _record_done(path, batches[first_unanswered - 1][-1][0])

    tasks = [asyncio.create_task(send(index)) for index in range(len(batches))]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
    if items and not todo:
        bar.note(f"every line was imported before (delete {done_path(path).name} to send again)")
    return Imported(len(items), len(items) - len(todo), len(todo))


async def _send(
    client: RouterClient, path: Path, lines: list[tuple[int, dict[str, Any]]], strict: bool
) -> list[dict[str, Any]]:
    where = f"{path.name} lines {lines[0][0]}–{lines[-1][0]}"
    backoff = Backoff(first_s=0.5, most_s=8.0)
    for attempt in range(TRIES):
        try:
            return await client.subscribe_items([item for _, item in lines], strict=strict)
        except ApiError as exc:
            if exc.status not in RETRIED or attempt == TRIES - 1:
                raise ApiError(exc.status, f"{where}: {_by_line(str(exc), lines)}") from exc
            await backoff.wait(exc.retry_after)
        except RouterUnreachable:
            if attempt == TRIES - 1:
                raise
            await backoff.wait()
    raise AssertionError("the last try returns or raises")


def _by_line(detail: str, lines: list[tuple[int, dict[str, Any]]]) -> str:
    """The router names a refused item by its index in the request: say its line too."""
    for index, (number, _) in enumerate(lines):
        marker = f"subscription {index}:"
        if marker in detail:
            return detail.replace(marker, f"line {number} (subscription {index} of the batch):")
    return detail.removeprefix("HTTP ")
