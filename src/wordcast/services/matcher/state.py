"""The matcher's state: what it holds (:mod:`.index`), the messages a batch makes
(:mod:`.messages`, written by the compiled core), its outbox and dispatcher, and its standing in
the cluster (the internal token routers show it, its registered URL, handing on its deliveries
when scaling removes it)."""

from __future__ import annotations

import gc
import hmac
import logging
import math
import time
from collections.abc import Iterable

from prometheus_client import Counter, Gauge

from wordcast.backoff import Backoff
from wordcast.engines.registry import pattern_index, term_index
from wordcast.engines.termstats import TermStats
from wordcast.errors import StoreUnavailable
from wordcast.query.boolean import PART_SEPARATOR
from wordcast.services.matcher.backfill import Backfills
from wordcast.services.matcher.checkpoint import CheckpointKeeper
from wordcast.services.matcher.counting import Counting
from wordcast.services.matcher.dispatcher import Dispatcher
from wordcast.services.matcher.endpoints import DeliveryEndpoints
from wordcast.services.matcher.index import Batch, MatcherIndex
from wordcast.services.matcher.messages import MessageOptions, MessageWriter
from wordcast.services.matcher.settings import MatcherSettings
from wordcast.storage import Store
from wordcast.storage.events import EventFollower
from wordcast.storage.outbox import Message
from wordcast.storage.records import Subscription, SubscriptionEvent, held_by

log = logging.getLogger(__name__)

PUBLICATIONS = Counter("wordcast_matcher_publications", "Publications matched")
MATCHES = Counter("wordcast_matcher_matches", "Matches found")
SUBSCRIPTIONS = Gauge("wordcast_matcher_subscriptions", "Subscriptions held")
READY = Gauge("wordcast_matcher_ready", "1 once the matcher serves (its subscriptions loaded)")
# A request with another internal token re-reads the cluster's from Redis at most this often.
TOKEN_REREAD_S = 1.0


class MatcherState:
    def __init__(self, settings: MatcherSettings, store: Store) -> None:
        self.ordinal = settings.ordinal
        self.store = store
        self.engine = settings.engine
        self._stats = TermStats.load(settings.term_stats) if settings.term_stats else None
        self.settings = settings
        self.index = self._new_index()
        self.checkpoints = CheckpointKeeper.for_matcher(settings, store.events)
        self.follower = EventFollower(
            store.events,
            self._load_snapshot,
            self._apply,
            reader=f"matcher:{self.ordinal}",
            forget_after_s=settings.events_kept_for_s,
            kept_from=self.checkpoints.kept_from if self.checkpoints else None,
            rows=held_by(self.ordinal),
        )
        READY.set_function(lambda: float(self.ready))
        self.outbox = store.outbox(settings.ordinal)
        self.counting = Counting(store, lambda: self.index.subscriptions)
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
            stream_retention_s=settings.stream_retention_s,
            stream_max_messages=settings.stream_max_messages,
            counting=self.counting,
            endpoints=DeliveryEndpoints(
                store,
                settings.endpoint_disable_after_s,
                settings.failing_endpoint_slots,
                settings.delivery_concurrency,
                settings.subscription_signatures_end,
            ),
        )
        self.publications = 0
        self.matches = 0
        self.backfills = Backfills(self, self._new_index)
        self._writer: MessageWriter | None = None
        self.loaded_from = ""  # where the index was last loaded from: "checkpoint" or "redis"
        self._internal_token: bytes | None = None  # read from Redis with the first snapshot
        self._token_read_at = -math.inf

    def _new_index(self) -> MatcherIndex:
        settings = self.settings
        return MatcherIndex(
            self.ordinal,
            lambda: term_index(settings.engine, self._stats),
            lambda: pattern_index(
                settings.pattern_engine,
                settings.pattern_splitting,
                settings.pattern_min_word_len,
                settings.pattern_min_split_score,
            ),
        )

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
        self._internal_token = (await self.store.membership.internal_token()).encode()
        return self._matches(token)

    def _matches(self, token: str) -> bool:
        expected = self._internal_token
        return expected is not None and hmac.compare_digest(token.encode(), expected)

    async def register(self) -> None:
        """Tell routers where this matcher answers (retried until Redis takes it)."""
        url = self.settings.advertise_url or f"http://127.0.0.1:{self.settings.port}"
        backoff = Backoff()
        while True:
            try:
                await self.store.membership.register_matcher(self.ordinal, url.rstrip("/"))
                return
            except StoreUnavailable as exc:
                log.warning("could not register this matcher's URL, retrying: %s", exc)
                await backoff.wait()

    async def hand_on_if_removed(self) -> int:
        """After the dispatcher stopped: if scaling down removed this matcher for good (its
        ordinal is past the number wanted and it holds nothing), let the others deliver what it
        left half done at their next take-over pass rather than after the take-over bound. A
        matcher that is only restarting keeps them for its successor. Returns how many."""
        wanted = await self.store.membership.matchers_wanted()
        if (
            wanted is None
            or self.ordinal < wanted
            or await self.store.membership.held_by(self.ordinal)
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

    async def _load_snapshot(self) -> str | None:
        """Hold what Redis holds for this matcher: from the checkpoint if there is a usable one
        (its position returned, for the events after it to be replayed), else every record."""
        self._internal_token = (await self.store.membership.internal_token()).encode()
        self._token_read_at = time.monotonic()
        index = self._new_index()
        started = time.monotonic()
        # A million long-lived objects arrive: the cyclic collector would walk them all again and
        # again as they do, and none of them is garbage.
        collecting = gc.isenabled()
        gc.disable()
        try:
            checkpoint = await self.checkpoints.load() if self.checkpoints else None
            if checkpoint is not None:
                index.load(checkpoint.subscriptions)
            else:
                await self._load_records(index)
        finally:
            if collecting:
                gc.enable()
        self.index = index
        self.loaded_from = "checkpoint" if checkpoint else "redis"
        self.writer().follow()  # every subscription read now, not at the first batch
        SUBSCRIPTIONS.set(len(index))
        log.info(
            "matcher %d loaded %d subscriptions from %s in %.1f s",
            self.ordinal,
            len(index),
            "its checkpoint" if checkpoint else "Redis",
            time.monotonic() - started,
        )
        return checkpoint.position if checkpoint else None

    async def _load_records(self, index: MatcherIndex) -> None:
        last_said = time.monotonic()
        async for page in self.store.word_maps.placed_on(self.ordinal):
            index.load(page)  # meanwhile the next pages are read (and probes answered)
            if time.monotonic() - last_said > 5:
                last_said = time.monotonic()
                log.info("matcher %d: %d subscriptions loaded…", self.ordinal, len(index))

    async def keep_checkpoints(self) -> None:
        if self.checkpoints is not None:
            await self.checkpoints.keep(self.follower, self._held)

    def _held(self) -> list[Subscription]:
        return list(self.index.subscriptions.values())

    async def checkpoint(self) -> None:
        """Write a checkpoint now (when one is kept and the index is loaded)."""
        if self.checkpoints is not None and self.ready:
            await self.checkpoints.write(self.follower.position, self._held)

    def _apply(self, events: Iterable[SubscriptionEvent]) -> None:
        events = list(events)
        self.index.apply(events)
        deleted = [e.subscription.id for e in events if e.op == "del"]
        if deleted:  # their messages still in an outbox are dropped, not signed and sent
            self.dispatcher.secrets.forget(deleted + [d.split(PART_SEPARATOR)[0] for d in deleted])
        SUBSCRIPTIONS.set(len(self.index))

    def match(self, batch: Batch) -> list[Message]:
        """The messages to deliver of a routed ``batch`` (:mod:`.messages`)."""
        self.backfills.saw(batch.publisher, batch.ids)
        found, matched = self.writer().messages(batch)
        count = len(batch)
        self.publications += count
        self.matches += matched
        PUBLICATIONS.inc(count)
        MATCHES.inc(matched)
        return found

    def message_options(self) -> MessageOptions:
        settings = self.settings
        return MessageOptions(
            most=settings.delivery_batch,
            max_bytes=settings.message_max_bytes,
            subscriptions_max=settings.subscriptions_max,
            explain=settings.explain_matches,
            payload_version=settings.message_version,
        )

    def writer(self) -> MessageWriter:
        """The writer of the index's messages (made anew for a new index: a snapshot loaded)."""
        if self._writer is None or self._writer.index is not self.index:
            self._writer = MessageWriter(self.index, self.message_options())
        return self._writer
