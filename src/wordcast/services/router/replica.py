"""The router's replica of what it routes by, rebuilt from Redis and kept in step by the events:
which matchers' H(i) hold each subscribed word (s(W), S³-TM §4.2) and which own each pattern
anchor. A router keeps no state another router could not rebuild the same way."""

from __future__ import annotations

from collections.abc import Iterable

from wordcast.routing.anchors import AnchorIndex
from wordcast.routing.mapping import WordHolders
from wordcast.storage import Store
from wordcast.storage.records import SubscriptionEvent


class Replica:
    def __init__(self) -> None:
        self.held = WordHolders()
        self.anchors = AnchorIndex()

    async def load(self, store: Store, matchers: int) -> None:
        """Read matchers 0 … ``matchers`` - 1's word maps and anchors afresh."""
        held = WordHolders()
        for matcher, words in (await store.word_maps.held_words(matchers)).items():
            held.hold(matcher, words)
        anchors = AnchorIndex()
        for matcher in range(matchers):
            for anchor in await store.word_maps.anchor_map(matcher):
                anchors.add(anchor, matcher)
        self.held, self.anchors = held, anchors

    def apply(self, events: Iterable[SubscriptionEvent]) -> None:
        for event in events:
            sub = event.subscription
            if sub.is_pattern:
                for matcher in event.anchor_joined:
                    self.anchors.add(sub.anchor, matcher)
                for matcher in event.anchor_left:
                    self.anchors.discard(sub.anchor, matcher)
            else:
                for matcher, words in event.held:
                    self.held.hold(matcher, words)
                for matcher, words in event.dropped:
                    self.held.drop(matcher, words)
