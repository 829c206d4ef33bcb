"""Reads of the word maps routing and placement work on: s(W), each matcher's H(i) (S³-TM §4.2),
its anchors and pattern load, and the subscriptions placed on it. The writes are the subscription
scripts' (:mod:`wordcast.storage.subscriptions`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from wordcast.storage.keys import Keys
from wordcast.storage.records import Subscription, subscription_from_fields
from wordcast.storage.redis import translated


class WordMaps:
    def __init__(self, client: Any, keys: Keys) -> None:
        self.client = client
        self.keys = keys

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
        wanted = sorted(candidates)
        pipe = self.client.pipeline(transaction=False)
        for matcher in range(matchers):
            pipe.hlen(self.keys.matcher_words(matcher))
        for matcher in wanted:
            pipe.hmget(self.keys.matcher_words(matcher), list(terms))
        with translated("reading the subscription word maps"):
            replies = await pipe.execute()
        sizes = [int(size) for size in replies[:matchers]]
        known = {
            matcher: sum(1 for count in counts if count is not None)
            for matcher, counts in zip(wanted, replies[matchers:], strict=True)
        }
        return sizes, known

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
        """The subscriptions placed on a matcher, in pages, for rebuilding its index."""
        with translated("listing a matcher's subscriptions"):
            cursor = 0
            while True:
                cursor, ids = await self.client.sscan(
                    self.keys.matcher_subs(matcher), cursor=cursor, count=page
                )
                if ids:
                    pipe = self.client.pipeline(transaction=False)
                    for sub_id in ids:
                        pipe.hgetall(self.keys.sub(sub_id))
                    records = await pipe.execute()
                    yield [
                        subscription_from_fields(sub_id, fields)
                        for sub_id, fields in zip(ids, records, strict=True)
                        if fields
                    ]
                if cursor == 0:
                    return
