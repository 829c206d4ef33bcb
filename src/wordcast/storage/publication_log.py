"""The bounded stream of sampled, analysed publications that the routing learner reads (S³-TM §3:
the mapping is learned from traffic)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from wordcast.storage.keys import Keys
from wordcast.storage.redis import translated


class PublicationLog:
    def __init__(self, client: Any, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    async def length(self) -> int:
        with translated("reading the publication log"):
            return int(await self.client.xlen(self.keys.publications))

    async def append(self, samples: Sequence[tuple[float, Iterable[str]]], max_length: int) -> None:
        """Append sampled (time, terms) to the bounded log: one round trip for the whole batch."""
        if not samples:
            return
        pipe = self.client.pipeline(transaction=False)
        for at, terms in samples:
            fields = {"at": repr(at), "terms": " ".join(sorted(terms))}
            pipe.xadd(self.keys.publications, fields, maxlen=max_length, approximate=True)
        with translated("logging publications"):
            await pipe.execute()

    async def recent(self, count: int) -> list[tuple[float, tuple[str, ...]]]:
        """The ``count`` latest logged publications, newest first."""
        with translated("reading the publication log"):
            entries = await self.client.xrevrange(self.keys.publications, count=count)
        return [(float(f["at"]), tuple(f["terms"].split())) for _, f in entries]

    async def read(self, count: int | None = None) -> list[tuple[float, tuple[str, ...]]]:
        """The logged publications, oldest first."""
        with translated("reading the publication log"):
            entries = await self.client.xrange(self.keys.publications, count=count)
        return [(float(f["at"]), tuple(f["terms"].split())) for _, f in entries]
