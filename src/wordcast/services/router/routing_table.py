"""The router's routing table: what it routes by, rebuilt from Redis and kept in step by the events:
which matchers' H(i) hold each subscribed word (s(W), S³-TM §4.2) and which own each pattern
anchor, and which of the words are wildcard words (:mod:`wordcast.query.wildcards`), found in a
publication's tokens. A router keeps no state another router could not rebuild the same way."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from wordcast.query.wildcards import held_wildcards, is_wildcard
from wordcast.routing.anchors import AnchorIndex
from wordcast.routing.mapping import WordHolders
from wordcast.storage import Store
from wordcast.storage.records import SubscriptionEvent


class RoutingTable:
    """With more than one shard of subscription records (:mod:`wordcast.storage.shards`), a word
    is held by a matcher while any shard's share of its H(i) holds it: each shard's part is kept
    too, so that a word dropped in one shard stays routed while another still holds it."""

    def __init__(self) -> None:
        self.held = WordHolders()
        self.anchors = AnchorIndex()
        self.wildcards = held_wildcards()  # the held words that are wildcard words
        self._held_by_shard: list[WordHolders] = []
        self._anchors_by_shard: list[dict[str, set[int]]] = []

    async def load(self, store: Store, matchers: int) -> None:
        """Read matchers 0 … ``matchers`` - 1's word maps and anchors afresh."""
        held, anchors = WordHolders(), AnchorIndex()
        held_by_shard, anchors_by_shard = [], []
        shards = await store.word_maps.held_words_by_shard(matchers)
        for shard in shards:
            part = WordHolders()
            for matcher, words in shard.items():
                held.hold(matcher, words)
                part.hold(matcher, words)
            held_by_shard.append(part)
        for shard_anchors in await store.word_maps.anchor_maps_by_shard(matchers):
            owners: dict[str, set[int]] = {}
            for matcher, found in shard_anchors.items():
                for anchor in found:
                    anchors.add(anchor, matcher)
                    owners.setdefault(anchor, set()).add(matcher)
            anchors_by_shard.append(owners)
        self.held, self.anchors = held, anchors
        self.wildcards = held_wildcards(word for word in held if is_wildcard(word))
        if len(shards) > 1:  # one shard's part would be the whole, twice in memory
            self._held_by_shard, self._anchors_by_shard = held_by_shard, anchors_by_shard
        else:
            self._held_by_shard, self._anchors_by_shard = [], []

    def apply(self, events: Iterable[SubscriptionEvent]) -> None:
        for event in events:
            sub = event.subscription
            if sub.is_pattern:
                for matcher in event.anchor_joined:
                    self.anchors.add(sub.anchor, matcher)
                    if self._anchors_by_shard:
                        owners = self._anchors_by_shard[event.shard]
                        owners.setdefault(sub.anchor, set()).add(matcher)
                for matcher in event.anchor_left:
                    if self._anchor_elsewhere(event.shard, sub.anchor, matcher):
                        continue
                    self.anchors.discard(sub.anchor, matcher)
            else:
                for matcher, words in event.held:
                    self.held.hold(matcher, words)
                    if self._held_by_shard:
                        self._held_by_shard[event.shard].hold(matcher, words)
                for matcher, words in event.dropped:
                    self.held.drop(matcher, self._dropped_everywhere(event.shard, matcher, words))
                self._follow_wildcards(event)

    def _follow_wildcards(self, event: SubscriptionEvent) -> None:
        """Keep :attr:`wildcards` the held words that are wildcard words."""
        for _, words in (*event.held, *event.dropped):
            for word in words:
                if is_wildcard(word):
                    held = word in self.held
                    if held and word not in self.wildcards:
                        self.wildcards.add(word)
                    elif not held and word in self.wildcards:
                        self.wildcards.discard(word)

    def _dropped_everywhere(self, shard: int, matcher: int, words: Sequence[str]) -> list[str]:
        """Of ``words`` dropped from ``matcher`` in ``shard``, those no other shard holds on it."""
        if not self._held_by_shard:
            return list(words)
        self._held_by_shard[shard].drop(matcher, words)
        bit = 1 << matcher
        return [w for w in words if not any(part.get(w, 0) & bit for part in self._held_by_shard)]

    def _anchor_elsewhere(self, shard: int, anchor: str, matcher: int) -> bool:
        """Forget ``anchor`` on ``matcher`` in ``shard``; whether another shard still has it."""
        if not self._anchors_by_shard:
            return False
        owners = self._anchors_by_shard[shard].get(anchor)
        if owners is not None:
            owners.discard(matcher)
            if not owners:
                del self._anchors_by_shard[shard][anchor]
        return any(matcher in part.get(anchor, ()) for part in self._anchors_by_shard)
