"""Reads of the word maps routing and placement work on: s(W), each matcher's H(i) (S³-TM §4.2),
its anchors and pattern load, and the subscriptions placed on it. The writes are the subscription
scripts' (:mod:`wordcast.storage.subscriptions`). Each shard holds its records' share of every map
(:mod:`wordcast.storage.shards`): a word is held where any shard holds it, counts add up."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from wordcast.storage import read_scripts
from wordcast.storage.keys import RECORD_BUCKETS, Keys
from wordcast.storage.records import Subscription, unpack_record
from wordcast.storage.redis import translated
from wordcast.storage.shards import Shards


class WordMaps:
    def __init__(self, client: Any, shards: Shards) -> None:
        self.client = client
        self.shards = shards
        self._records_of = client.register_script(read_scripts.RECORDS_OF)

    async def subscribed_words(self) -> set[str]:
        shards = await self.shards.keys()
        pipe = self.client.pipeline(transaction=False)
        for keys in shards:
            pipe.hkeys(keys.words)
        with translated("reading the subscribed words"):
            return {word for words in await pipe.execute() for word in words}

    async def held_words_by_shard(self, matchers: int) -> list[dict[int, list[str]]]:
        """For each shard, the words of its share of H(i) for matchers 0 … ``matchers`` - 1, in
        one round trip."""
        return await self._fields_by_shard(
            "reading the subscription word maps", Keys.matcher_words, matchers
        )

    async def _fields_by_shard(
        self, action: str, key_of: Any, matchers: int
    ) -> list[dict[int, list[str]]]:
        """For each shard, the fields of ``key_of(shard's keys, matcher)`` for each matcher."""
        shards = await self.shards.keys()
        pipe = self.client.pipeline(transaction=False)
        for keys in shards:
            for matcher in range(matchers):
                pipe.hkeys(key_of(keys, matcher))
        with translated(action):
            replies = await pipe.execute()
        return [
            dict(enumerate(replies[shard * matchers : (shard + 1) * matchers]))
            for shard in range(len(shards))
        ]

    async def word_map(self, matcher: int) -> dict[str, int]:
        """H(i) with counts."""
        return await self._summed("reading a subscription word map", Keys.matcher_words, matcher)

    async def _summed(self, action: str, key_of: Any, *args: Any) -> dict[str, int]:
        shards = await self.shards.keys()
        pipe = self.client.pipeline(transaction=False)
        for keys in shards:
            pipe.hgetall(key_of(keys, *args))
        with translated(action):
            replies = await pipe.execute()
        summed: dict[str, int] = {}
        for raw in replies:
            for field, count in raw.items():
                summed[field] = summed.get(field, 0) + int(count)
        return summed

    async def word_map_view(
        self, matchers: int, candidates: Iterable[int], terms: Sequence[str]
    ) -> tuple[list[int], dict[int, int]]:
        """LASP's view of H: |H(i)| for every matcher, and how many of ``terms`` each candidate's
        H(i) holds already; one round trip."""
        sizes, held = await self.word_maps_holding(matchers, candidates, terms)
        return sizes, {m: sum(1 for t in terms if t in words) for m, words in held.items()}

    async def word_maps_holding(
        self, matchers: int, candidates: Iterable[int], words: Iterable[str]
    ) -> tuple[list[int], dict[int, set[str]]]:
        """|H(i)| for every matcher, and which of ``words`` each candidate's H(i) holds; one
        round trip (a batch's :class:`~wordcast.routing.placement.PlanningView`). With more than
        one shard |H(i)| is the sum of the shards' sizes, which counts a word two shards hold
        twice: LASP balances on that bound rather than read every word map whole per batch."""
        shards = await self.shards.keys()
        wanted = sorted(candidates)
        asked = list(dict.fromkeys(words))
        pipe = self.client.pipeline(transaction=False)
        for keys in shards:
            for matcher in range(matchers):
                pipe.hlen(keys.matcher_words(matcher))
            for matcher in wanted:
                pipe.hmget(keys.matcher_words(matcher), asked)
        with translated("reading the subscription word maps"):
            replies = await pipe.execute()
        sizes = [0] * matchers
        held: dict[int, set[str]] = {matcher: set() for matcher in wanted}
        step = matchers + len(wanted)
        for start in range(0, len(replies), step):
            shard = replies[start : start + step]
            for matcher, size in enumerate(shard[:matchers]):
                sizes[matcher] += int(size)
            for matcher, counts in zip(wanted, shard[matchers:], strict=True):
                held[matcher].update(w for w, c in zip(asked, counts, strict=True) if c is not None)
        return sizes, held

    async def anchor_map(self, matcher: int) -> dict[str, int]:
        """The anchors of the pattern subscriptions on a matcher, with counts."""
        return await self._summed("reading an anchor map", Keys.matcher_anchors, matcher)

    async def anchor_maps_by_shard(self, matchers: int) -> list[dict[int, list[str]]]:
        """For each shard, the anchors its patterns hold on matchers 0 … ``matchers`` - 1."""
        return await self._fields_by_shard(
            "reading the anchor maps", Keys.matcher_anchors, matchers
        )

    async def pattern_loads(self) -> dict[int, int]:
        """How many pattern subscriptions each matcher holds."""
        loads = await self._summed("reading the pattern loads", lambda keys: keys.pattern_load)
        return {int(matcher): count for matcher, count in loads.items()}

    async def placed_on(self, matcher: int, page: int = 32) -> AsyncIterator[list[Subscription]]:
        """The subscriptions placed on a matcher, in pages of ``page`` record buckets, for
        rebuilding its index.

        Each shard's buckets are read ahead of the caller, two pages in flight, so Redis works
        while this process unpacks the page before (and while the caller works, if it awaits
        something that lets the loop run)."""
        ahead: asyncio.Queue[list[Subscription] | BaseException | None] = asyncio.Queue(2)

        async def read() -> None:
            flight: deque[asyncio.Future[list[str]]] = deque()

            async def hand_on(keep: int) -> None:
                while len(flight) > keep:
                    flat = await flight.popleft()
                    await ahead.put(
                        [unpack_record(i, v) for i, v in zip(flat[::2], flat[1::2], strict=True)]
                    )

            try:
                for keys in await self.shards.keys():
                    for first in range(0, RECORD_BUCKETS, page):
                        buckets = range(first, min(first + page, RECORD_BUCKETS))
                        reply = self._records_of(
                            keys=[keys.records(b) for b in buckets],
                            args=read_scripts.RECORDS_OF.args(matcher=matcher),
                        )
                        flight.append(asyncio.ensure_future(reply))
                        await hand_on(1)
                await hand_on(0)
                await ahead.put(None)
            except Exception as exc:  # handed to the caller, translated there
                await ahead.put(exc)
            finally:
                for reply in flight:
                    reply.cancel()

        with translated("listing a matcher's subscriptions"):
            reader = asyncio.ensure_future(read())
            try:
                while (subs := await ahead.get()) is not None:
                    if isinstance(subs, BaseException):
                        raise subs
                    if subs:
                        yield subs
            finally:
                reader.cancel()
