"""The matcher's in-memory state: its indexes, the subscriptions on them, and the dispatcher.

Keyword subscriptions live in the term index (a trie by default), pattern subscriptions in the
pattern index (REtriever or one of its peers); a routed publication is matched against the pattern
index only when the router flagged it, that is when one of this matcher's anchors occurs in it.

A subscription's placements (:mod:`wordcast.routing.placement`) say for which mapping versions — and, for
a multicast of hot words, which drawn copies — this matcher evaluates it; a match found
for a batch that another placement serves is dropped here, so each publication is evaluated
against each subscription exactly once while routers switch mapping versions.

A subscription made only of hot words is multicast to the matchers holding copies of its least
frequent hot word (S³-TM §5.1); each of them serves only the publications whose drawn copy it
holds. Such subscriptions sit in an index of their own per hot word, consulted only for
publications that drew a copy of that word, so the rest of the stream never visits them.

An alternative of a boolean query (:mod:`wordcast.query.boolean`) is indexed by its required words like
any keyword subscription; a match then stands only if the alternative is the one that delivers
(none of its excluded terms, no earlier alternative holding), and goes out under the
subscription's id.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
import time
from collections.abc import Iterable, Sequence
from typing import Any

import orjson
from prometheus_client import Counter, Gauge

from wordcast.engines.ac_retriever import AhoCorasickREtriever
from wordcast.engines.compact_trie import CompactTrie
from wordcast.engines.naive_patterns import NaivePatterns
from wordcast.engines.nfa import NFAMatcher
from wordcast.engines.querynote import QueryNoteIndex
from wordcast.engines.retriever import REtriever
from wordcast.engines.termstats import TermOrder, TermStats
from wordcast.engines.trie import Trie
from wordcast.errors import StoreUnavailable
from wordcast.query.boolean import HeldAlternatives, has_operators, parse_query
from wordcast.query.patterns import normalise, parse
from wordcast.routing.placement import Placement
from wordcast.services.matcher.dispatcher import Dispatcher
from wordcast.services.matcher.settings import MatcherSettings
from wordcast.storage import Store
from wordcast.storage.events import EventFollower
from wordcast.storage.outbox import MAX_SIGNERS, Message, webhook_id
from wordcast.storage.records import Subscription, SubscriptionEvent, audience

log = logging.getLogger(__name__)

PUBLICATIONS = Counter("wordcast_matcher_publications", "Publications matched")
MATCHES = Counter("wordcast_matcher_matches", "Matches found")
SUBSCRIPTIONS = Gauge("wordcast_matcher_subscriptions", "Subscriptions held")
# A request with another internal token re-reads the cluster's from Redis at most this often.
TOKEN_REREAD_S = 1.0


def make_engine(name: str, stats: TermStats | None) -> Any:
    """A fresh index of the kind ``name``; every kind has add, remove and match."""
    if name == "trie":
        return Trie()
    if name == "compact-trie":
        return CompactTrie(TermOrder("rare-first", stats) if stats else TermOrder())
    if name == "querynote":
        return QueryNoteIndex(stats or TermStats(0, {}))
    raise ValueError(f"unknown engine {name!r}")


def make_pattern_engine(settings: MatcherSettings) -> Any:
    """A fresh pattern index of the configured kind; every kind has add, remove and match."""
    name = settings.pattern_engine
    if name == "retriever":
        return REtriever(
            settings.pattern_split, settings.pattern_min_word_len, settings.pattern_min_split_score
        )
    if name == "aho-corasick":
        return AhoCorasickREtriever()
    if name == "nfa":
        return NFAMatcher()
    if name == "naive":
        return NaivePatterns()
    raise ValueError(f"unknown pattern engine {name!r}")


class MatcherState:
    def __init__(self, settings: MatcherSettings, store: Store) -> None:
        self.ordinal = settings.ordinal
        self.store = store
        self.engine = settings.engine
        self._stats = TermStats.load(settings.term_stats) if settings.term_stats else None
        self.index: Any = make_engine(self.engine, self._stats)
        self.hot_indexes: dict[str, Any] = {}  # hot word -> its multicast subscriptions here
        self.settings = settings
        self.patterns: Any = make_pattern_engine(settings)
        self.subscriptions: dict[str, Subscription] = {}
        # Placements here of the subscriptions that do not serve every version from 0 on.
        self.restricted: dict[str, tuple[Placement, ...]] = {}
        self.alternatives = HeldAlternatives()  # of boolean queries
        self.follower = EventFollower(store.events, self._load_snapshot, self._apply)
        self.outbox = store.outbox(settings.ordinal)
        self.dispatcher = Dispatcher(
            self.outbox,
            store,
            concurrency=settings.delivery_concurrency,
            attempts=settings.delivery_attempts,
            timeout_s=settings.delivery_timeout_s,
            backoff_s=settings.delivery_backoff_s,
            max_backoff_s=settings.delivery_max_backoff_s,
            address_policy=settings.address_policy,
            take_over_after_s=settings.delivery_take_over_after_s,
            redis_memory_max=settings.redis_memory_max,
        )
        self.publications = 0
        self.matches = 0
        self._internal_token: bytes | None = None  # read from Redis with the first snapshot
        self._token_read_at = -math.inf

    @property
    def ready(self) -> bool:
        return self.follower.ready.is_set()

    async def accepts(self, token: str | None) -> bool:
        """Whether ``token`` is the cluster's internal token, the routers' proof on /internal.
        Another token sends this matcher back to Redis (at most every TOKEN_REREAD_S), so a
        token rotated there is taken without a restart."""
        if not token:
            return False
        if self._matches(token):
            return True
        now = time.monotonic()
        if now - self._token_read_at < TOKEN_REREAD_S:
            return False
        self._token_read_at = now
        self._internal_token = (await self.store.cluster.internal_token()).encode()
        return self._matches(token)

    def _matches(self, token: str) -> bool:
        expected = self._internal_token
        return expected is not None and hmac.compare_digest(token.encode(), expected)

    async def register(self) -> None:
        """Tell routers where this matcher answers (retried until Redis takes it)."""
        url = self.settings.advertise_url or f"http://127.0.0.1:{self.settings.port}"
        delay = 0.1
        while True:
            try:
                await self.store.cluster.register_matcher(self.ordinal, url.rstrip("/"))
                return
            except StoreUnavailable as exc:
                log.warning("could not register this matcher's URL, retrying: %s", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def hand_on_if_removed(self) -> int:
        """After the dispatcher stopped: if scaling down removed this matcher for good (its
        ordinal is past the number wanted and it holds nothing), let the others deliver what it
        left half done at their next take-over pass rather than after the take-over bound. A
        matcher that is only restarting keeps them for its successor. Returns how many."""
        wanted = await self.store.cluster.matchers_wanted()
        if (
            wanted is None
            or self.ordinal < wanted
            or await self.store.cluster.held_by(self.ordinal)
        ):
            return 0
        released = await self.outbox.release_everywhere(
            self.outbox.consumer, self.settings.delivery_take_over_after_s
        )
        if released:
            log.info(
                "matcher %d removed: %d unfinished deliveries go to the others",
                self.ordinal,
                released,
            )
        return released

    async def _load_snapshot(self) -> None:
        self._internal_token = (await self.store.cluster.internal_token()).encode()
        self._token_read_at = time.monotonic()
        index = make_engine(self.engine, self._stats)
        hot_indexes: dict[str, Any] = {}
        patterns = make_pattern_engine(self.settings)
        subscriptions: dict[str, Subscription] = {}
        restricted: dict[str, tuple[Placement, ...]] = {}
        alternatives = HeldAlternatives()
        async for page in self.store.word_maps.placed_on(self.ordinal):
            for sub in page:
                self._index(sub, index, hot_indexes, patterns)
                subscriptions[sub.id] = sub
                self._restrict(sub, restricted)
                self._read_alternative(sub, alternatives)
        self.index, self.patterns, self.subscriptions = index, patterns, subscriptions
        self.hot_indexes, self.restricted = hot_indexes, restricted
        self.alternatives = alternatives
        SUBSCRIPTIONS.set(len(subscriptions))
        log.info("matcher %d loaded %d subscriptions from Redis", self.ordinal, len(subscriptions))

    def _restrict(self, sub: Subscription, restricted: dict[str, tuple[Placement, ...]]) -> None:
        here = tuple(p for p in sub.placements if p.matcher == self.ordinal)
        if len(here) == 1 and here[0].first == 0 and here[0].is_open and not here[0].hot:
            restricted.pop(sub.id, None)  # serves every batch: no check needed
        elif here:
            restricted[sub.id] = here

    def _read_alternative(self, sub: Subscription, alternatives: HeldAlternatives) -> None:
        if sub.is_pattern or not has_operators(sub.query) or sub.id in alternatives:
            return
        try:
            query = parse_query(sub.query)
            if not query.is_plain:
                alternatives.add(sub.id, query)
        except ValueError as exc:  # the router checked it: only a changed analyser gets here
            log.error("subscription %s: %s; matching its terms as a conjunction", sub.id, exc)

    def _apply(self, events: Iterable[SubscriptionEvent]) -> None:
        for event in events:
            sub = event.subscription
            held = self.subscriptions.get(sub.id)
            if event.op != "del" and self.ordinal in sub.matchers:
                if held is None:  # replays of an add are harmless
                    self._index(sub, self.index, self.hot_indexes, self.patterns)
                elif self._hot_word(held) != self._hot_word(sub):  # moved between indexes
                    self._unindex(held)
                    self._index(sub, self.index, self.hot_indexes, self.patterns)
                self.subscriptions[sub.id] = sub
                self._restrict(sub, self.restricted)
                self._read_alternative(sub, self.alternatives)
            elif held is not None:  # deleted, or moved away from this matcher
                del self.subscriptions[sub.id]
                self.restricted.pop(sub.id, None)
                self.alternatives.discard(sub.id)
                self._unindex(held)
        SUBSCRIPTIONS.set(len(self.subscriptions))

    def _hot_word(self, sub: Subscription) -> str:
        """The hot word whose drawn copy decides every placement of ``sub`` here, else ''."""
        words = {p.hot for p in sub.placements if p.matcher == self.ordinal}
        return words.pop() if len(words) == 1 else ""

    def _index(
        self, sub: Subscription, index: Any, hot_indexes: dict[str, Any], patterns: Any
    ) -> None:
        if sub.is_pattern:
            patterns.add(sub.id, parse(sub.pattern, min_anchor=1))  # validated when stored
            return
        word = self._hot_word(sub)
        if word:
            if word not in hot_indexes:
                hot_indexes[word] = make_engine(self.engine, self._stats)
            index = hot_indexes[word]
        index.add(sub.id, sub.terms)

    def _unindex(self, sub: Subscription) -> None:
        if sub.is_pattern:
            self.patterns.remove(sub.id)
            return
        word = self._hot_word(sub)
        index = self.hot_indexes[word] if word else self.index
        index.remove(sub.id, sub.terms)
        if word and not len(index):
            del self.hot_indexes[word]

    def _message(
        self,
        tenant: str,
        url: str,
        chunk: list[tuple[str, int]],
        publications: Sequence[tuple[str, str, Iterable[str], bool]],
        now: float,
        publisher: str,
        stream: str,
    ) -> Message:
        matches = []
        alternatives = self.alternatives
        stream_name = stream or None
        for stored_id, position in chunk:
            sub = self.subscriptions[stored_id]
            field, value = ("pattern", sub.pattern) if sub.is_pattern else ("query", sub.query)
            pub_id, text = publications[position][0], publications[position][1]
            # An alternative's match is its subscription's, signed with that one's secret.
            sub_id = alternatives.subscription_id(stored_id)
            matches.append(
                {
                    "subscription_id": sub_id,
                    field: value,
                    "publisher": publisher,
                    "stream": stream_name,
                    "publication_id": pub_id,
                    "text": text,
                }
            )
        signers = tuple(dict.fromkeys(str(m["subscription_id"]) for m in matches))
        found = [(str(m["subscription_id"]), str(m["publication_id"])) for m in matches]
        body = orjson.dumps({"type": "matches", "matches": matches}).decode()
        msg_id = webhook_id(found, publisher, stream)
        return Message(signers, tenant, url, msg_id, body, len(found), now)

    def match(
        self,
        publications: Sequence[tuple[str, str, Iterable[str], bool]],
        version: int = 0,
        drawn: Sequence[dict[str, int]] | None = None,
        *,
        publisher: str = "",
        stream: str = "",
    ) -> list[Message]:
        """Match (id, text, terms, has an anchor here) tuples routed with mapping ``version``
        (``drawn[k]``: the hot-word copies drawn for publication k), published by tenant
        ``publisher`` to shared stream ``stream`` (or to its own subscriptions, for ""); returns
        the messages to deliver.

        Only the subscriptions of that audience (:func:`wordcast.storage.records.audience`) match: the
        indexes hold every tenant's subscriptions, and routing follows words alone.

        A message holds this batch's matches for one callback URL of one tenant (at most
        delivery_batch matches from at most MAX_SIGNERS subscriptions), signed later with each of
        those subscriptions' secrets; its webhook-id is derived from the (subscription,
        publication) pairs it holds, the same on every attempt and redelivery.
        """
        index = self.index
        if hasattr(index, "match_batch"):
            pairs = index.match_batch([terms for _, _, terms, _ in publications])
        else:
            pairs = [
                (sub_id, position)
                for position, (_, _, terms, _) in enumerate(publications)
                for sub_id in index.match(terms)
            ]
        if self.hot_indexes and drawn:
            hot_indexes = self.hot_indexes
            for position, copies in enumerate(drawn):
                for word in copies:
                    hot_index = hot_indexes.get(word)
                    if hot_index is not None:
                        terms = publications[position][2]
                        pairs.extend((sub_id, position) for sub_id in hot_index.match(terms))
        if len(self.patterns):
            pairs += [
                (sub_id, position)
                for position, (_, text, _, flagged) in enumerate(publications)
                if flagged
                for sub_id in self.patterns.match(normalise(text))
            ]
        # Tenants stay apart: the index found every tenant's subscriptions with these words.
        wanted = audience(publisher, stream)
        subscriptions = self.subscriptions
        pairs = [pair for pair in pairs if subscriptions[pair[0]].audience == wanted]
        restricted = self.restricted
        if restricted:
            none: dict[str, int] = {}
            pairs = [
                (sub_id, position)
                for sub_id, position in pairs
                if sub_id not in restricted
                or any(
                    p.serves(version, drawn[position] if drawn else none)
                    for p in restricted[sub_id]
                )
            ]
        if self.alternatives:
            pairs = self.alternatives.delivering(pairs, lambda k: frozenset(publications[k][2]))
        per_subscription: dict[str, list[int]] = {}
        for sub_id, position in pairs:
            per_subscription.setdefault(sub_id, []).append(position)
        per_endpoint: dict[tuple[str, str], list[str]] = {}
        for sub_id in per_subscription:
            sub = self.subscriptions[sub_id]
            per_endpoint.setdefault((sub.tenant, sub.callback_url), []).append(sub_id)
        messages: list[Message] = []
        now = time.time()
        for (tenant, url), sub_ids in per_endpoint.items():
            chunk: list[tuple[str, int]] = []
            signers: set[str] = set()
            for sub_id in sub_ids:
                for position in per_subscription[sub_id]:
                    full = len(chunk) >= self.settings.delivery_batch
                    if full or (sub_id not in signers and len(signers) >= MAX_SIGNERS):
                        messages.append(
                            self._message(tenant, url, chunk, publications, now, publisher, stream)
                        )
                        chunk, signers = [], set()
                    chunk.append((sub_id, position))
                    signers.add(sub_id)
            if chunk:
                messages.append(
                    self._message(tenant, url, chunk, publications, now, publisher, stream)
                )
        count = len(publications)
        self.publications += count
        self.matches += len(pairs)
        PUBLICATIONS.inc(count)
        MATCHES.inc(len(pairs))
        return messages
