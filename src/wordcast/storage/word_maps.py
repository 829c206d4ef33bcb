"""Reads of the word maps routing and placement work on: s(W), each matcher's H(i) (S³-TM §4.2),
its anchors and pattern load, and the subscriptions placed on it. The writes are the subscription
scripts' (:mod:`wordcast.storage.subscriptions`)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

import orjson

from wordcast.storage import scripts
from wordcast.storage.keys import Keys
from wordcast.storage.records import FIELDS, Subscription, subscription_from_values
from wordcast.storage.redis import translated

MATCHER = FIELDS.index("matcher")


class WordMaps:
    def __init__(self, client: Any, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._records = client.register_script(scripts.RECORDS)

    async def subscribed_words(self) -> set[str]:
        with translated("reading the subscribed words"):
            return set(await self.client.hkeys(self.keys.words))

    async def held_words(self, matchers: int) -> dict[int, list[str]]:
        """The words of H(i) for matchers 0 … ``matchers`` - 1, in one round trip."""
        pipe = self.client.pipeline(transaction=False)
        for matcher in range(matchers):
            pipe.hkeys(self.keys.matcher_words(matcher))
        with translated("reading the subscription word maps"):
            replies = await pipe.execute()
        return dict(enumerate(replies))

    async def word_map(self, matcher: int) -> dict[str, int]:
        """H(i) with counts."""
        with translated("reading a subscription word map"):
            raw = await self.client.hgetall(self.keys.matcher_words(matcher))
        return {word: int(count) for word, count in raw.items()}

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
        round trip (a batch's :class:`~wordcast.routing.placement.PlanningView`)."""
        wanted = sorted(candidates)
        asked = list(dict.fromkeys(words))
        pipe = self.client.pipeline(transaction=False)
        for matcher in range(matchers):
            pipe.hlen(self.keys.matcher_words(matcher))
        for matcher in wanted:
            pipe.hmget(self.keys.matcher_words(matcher), asked)
        with translated("reading the subscription word maps"):
            replies = await pipe.execute()
        sizes = [int(size) for size in replies[:matchers]]
        held = {
            matcher: {word for word, count in zip(asked, counts, strict=True) if count is not None}
            for matcher, counts in zip(wanted, replies[matchers:], strict=True)
        }
        return sizes, held

    async def anchor_map(self, matcher: int) -> dict[str, int]:
        """The anchors of the pattern subscriptions on a matcher, with counts."""
        with translated("reading an anchor map"):
            raw = await self.client.hgetall(self.keys.matcher_anchors(matcher))
        return {anchor: int(count) for anchor, count in raw.items()}

    async def pattern_loads(self) -> dict[int, int]:
        """How many pattern subscriptions each matcher holds."""
        with translated("reading the pattern loads"):
            raw = await self.client.hgetall(self.keys.pattern_load)
        return {int(matcher): int(count) for matcher, count in raw.items()}

    async def placed_on(self, matcher: int, page: int = 2_000) -> AsyncIterator[list[Subscription]]:
        """The subscriptions placed on a matcher, in pages, for rebuilding its index.

        The ids are scanned and the records read ahead of the caller, two pages in flight, so
        Redis works while this process reads the page before (and while the caller works, if it
        awaits something that lets the loop run)."""
        ahead: asyncio.Queue[list[Subscription] | BaseException | None] = asyncio.Queue(2)

        async def read() -> None:
            flight: deque[tuple[list[str], asyncio.Future[str]]] = deque()

            async def hand_on(keep: int) -> None:
                while len(flight) > keep:
                    sub_ids, reply = flight.popleft()
                    await ahead.put(_subscriptions(sub_ids, await reply))

            try:
                async for sub_ids in self._ids_on(matcher, page):
                    flight.append((sub_ids, asyncio.ensure_future(self._fields_of(sub_ids))))
                    await hand_on(1)
                await hand_on(0)
                await ahead.put(None)
            except Exception as exc:  # handed to the caller, translated there
                await ahead.put(exc)
            finally:
                for _, reply in flight:
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

    async def _ids_on(self, matcher: int, page: int) -> AsyncIterator[list[str]]:
        """The ids in a matcher's set, in pages, each once (a scan may list one twice). All are
        listed before the first page: scans between the reads of records slow both down."""
        ids: list[str] = []
        cursor = 0
        while True:
            cursor, found = await self.client.sscan(
                self.keys.matcher_subs(matcher), cursor=cursor, count=10_000
            )
            ids += found
            if cursor == 0:
                break
        ids = list(dict.fromkeys(ids))
        for start in range(0, len(ids), page):
            yield ids[start : start + page]

    async def _fields_of(self, sub_ids: list[str]) -> str:
        keys = [self.keys.sub(sub_id) for sub_id in sub_ids]
        reply: str = await self._records(keys=keys, args=FIELDS)
        return reply


def _subscriptions(sub_ids: list[str], reply: str) -> list[Subscription]:
    return [
        subscription_from_values(sub_id, values)
        for sub_id, values in zip(sub_ids, orjson.loads(reply), strict=True)
        if values[MATCHER]  # else deleted since its id was listed
    ]
