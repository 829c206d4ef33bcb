"""The matcher's in-memory state: its trie, the subscriptions on it, and the dispatcher."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from prometheus_client import Counter, Gauge

from ...store import EventFollower, Subscription, SubscriptionEvent, SubscriptionStore
from ...trie import Trie
from .dispatcher import Dispatcher, PendingMatch
from .settings import MatcherSettings

log = logging.getLogger(__name__)

PUBLICATIONS = Counter("wordcast_matcher_publications", "Publications matched")
MATCHES = Counter("wordcast_matcher_matches", "Matches found")
SUBSCRIPTIONS = Gauge("wordcast_matcher_subscriptions", "Subscriptions held")


class MatcherState:
    engine = "trie"

    def __init__(self, settings: MatcherSettings, store: SubscriptionStore) -> None:
        self.ordinal = settings.ordinal
        self.store = store
        self.trie: Trie[str] = Trie()
        self.subscriptions: dict[str, Subscription] = {}
        self.follower = EventFollower(store, self._load_snapshot, self._apply)
        self.dispatcher = Dispatcher(
            queue_size=settings.delivery_queue,
            batch=settings.delivery_batch,
            concurrency=settings.delivery_concurrency,
            attempts=settings.delivery_attempts,
            timeout_s=settings.delivery_timeout_s,
        )
        self.publications = 0
        self.matches = 0

    @property
    def ready(self) -> bool:
        return self.follower.ready.is_set()

    async def _load_snapshot(self) -> None:
        trie: Trie[str] = Trie()
        subscriptions: dict[str, Subscription] = {}
        async for page in self.store.placed_on(self.ordinal):
            for sub in page:
                trie.add(sub.id, sub.terms)
                subscriptions[sub.id] = sub
        self.trie, self.subscriptions = trie, subscriptions
        SUBSCRIPTIONS.set(len(subscriptions))
        log.info("matcher %d loaded %d subscriptions from Redis", self.ordinal, len(subscriptions))

    def _apply(self, events: Iterable[SubscriptionEvent]) -> None:
        for event in events:
            sub = event.subscription
            if sub.matcher != self.ordinal:
                continue
            if event.op == "add":
                self.trie.add(sub.id, sub.terms)
                self.subscriptions[sub.id] = sub
            elif event.op == "del":
                self.trie.remove(sub.id)
                self.subscriptions.pop(sub.id, None)
        SUBSCRIPTIONS.set(len(self.subscriptions))

    def match(self, publications: Iterable[tuple[str, str, Iterable[str]]]) -> list[PendingMatch]:
        """Match (id, text, terms) triples; returns the matches to deliver."""
        found: list[PendingMatch] = []
        count = 0
        for pub_id, text, terms in publications:
            count += 1
            for sub_id in self.trie.match(terms):
                sub = self.subscriptions[sub_id]
                found.append(
                    PendingMatch(
                        sub.callback_url,
                        {
                            "subscription_id": sub_id,
                            "query": sub.query,
                            "publication_id": pub_id,
                            "text": text,
                        },
                    )
                )
        self.publications += count
        self.matches += len(found)
        PUBLICATIONS.inc(count)
        MATCHES.inc(len(found))
        return found
