"""The recent publications a new subscription's backfill reads (issue 13, part 5).

Off unless a router is told to keep them (``WORDCAST_ROUTER_BACKFILL_S``). Then each published
request that every matcher concerned accepted is appended as one entry: its publisher and shared
stream, and its publications' ids, texts and routed terms (the analysed words and filter terms the
matchers matched, so a backfill matches exactly as live matching did), as one JSON value. Reading
a backfill of minutes is then a few thousand entries, not millions. Entries older than the
retention are trimmed as new ones come (``MINID``), and the stream holds at most
``max_entries`` (``MAXLEN``), so its memory is bounded whatever the rate: about the retention
times the publishing rate times a publication's size (200 bytes for a short post).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from wordcast.storage.keys import Keys
from wordcast.storage.redis import translated

READ_ENTRIES = 20  # entries per read: up to 20,000 publications, a few MB


@dataclass(frozen=True, slots=True)
class RecentBatch:
    """One published request, as the matchers received it."""

    entry_id: str
    publisher: str
    stream: str
    ids: list[str]
    texts: list[str]
    terms: list[list[str]]


class RecentPublications:
    def __init__(self, client: Any, keys: Keys) -> None:
        self.client = client
        self.key = keys.recent

    async def append(
        self,
        publisher: str,
        stream: str,
        publications: Sequence[tuple[str, str, Sequence[str]]],
        keep_s: float,
        max_entries: int,
    ) -> None:
        """Append one published request's (id, text, routed terms), trimming what is older
        than ``keep_s`` or beyond ``max_entries``."""
        body = orjson.dumps(
            {
                "publisher": publisher,
                "stream": stream,
                "ids": [p[0] for p in publications],
                "texts": [p[1] for p in publications],
                "terms": [list(p[2]) for p in publications],
            }
        )
        oldest_ms = int((time.time() - keep_s) * 1000)
        pipe = self.client.pipeline(transaction=False)
        pipe.xadd(self.key, {"batch": body}, minid=oldest_ms, approximate=True)
        pipe.xtrim(self.key, maxlen=max_entries, approximate=True)
        with translated("keeping recent publications for backfill"):
            await pipe.execute()

    async def read(
        self, since: float, until: float, after: str | None = None
    ) -> AsyncIterator[list[RecentBatch]]:
        """The entries appended from Unix time ``since`` to ``until`` (after entry ``after``,
        when given), oldest first, a few at a time."""
        start = f"({after}" if after else f"{int(since * 1000)}-0"
        end = f"{int(until * 1000)}-18446744073709551615"
        while True:
            with translated("reading recent publications"):
                entries = await self.client.xrange(self.key, start, end, count=READ_ENTRIES)
            if not entries:
                return
            yield [_batch(entry_id, fields["batch"]) for entry_id, fields in entries]
            start = "(" + entries[-1][0]
            if len(entries) < READ_ENTRIES:
                return

    async def oldest(self) -> float | None:
        """When the oldest entry kept was appended (Unix time), or None when there is none."""
        with translated("reading recent publications"):
            entries = await self.client.xrange(self.key, count=1)
        return int(entries[0][0].split("-")[0]) / 1000 if entries else None


def _batch(entry_id: str, body: str | bytes) -> RecentBatch:
    read = orjson.loads(body)
    return RecentBatch(
        entry_id, read["publisher"], read["stream"], read["ids"], read["texts"], read["terms"]
    )
