"""Delivers the outbox's messages to webhooks: signed, retried, dead-lettered, never lost.

The matcher records every message in its Redis outbox (:mod:`wordcast.storage.outbox`) before it
answers the router; this dispatcher reads every matcher's outbox through their consumer groups, its own
pending entries first (those a crashed predecessor did not finish), takes over the entries any
consumer has left pending for longer than a delivery can take (a matcher removed for good), and
acknowledges an entry only after a 2xx. Sharing the outboxes keeps every matcher delivering while
any of them has a backlog: the matches of a matcher's subscriptions are not its share of the
delivery work.

Each attempt (signing, the address check, the POST) is :mod:`.webhook`'s; messages for tenants'
match streams are :mod:`.match_stream_delivery`'s, moved there a read at a time. Failed
attempts are retried with exponential backoff and full jitter, honouring ``Retry-After``; a 410
deletes the subscription (the receiver said it is gone for good); a forbidden callback address
(:mod:`wordcast.webhooks.netguard`) is not retried; after the last attempt the message goes to its
tenant's dead letters. A delivery slot holds one attempt: between attempts only the message's entry id and
due time wait in memory (the message stays in the outbox, and is read again when due), and other
messages take the slot meanwhile. The outbox bounds memory: at most ``concurrency`` messages are
in this process at once, and no new message is read while ``WAITING_MAX`` wait for a retry.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time

from prometheus_client import Counter, Gauge, Histogram

from wordcast.backoff import Backoff
from wordcast.errors import StoreUnavailable
from wordcast.services.matcher.back_pressure import BackPressure
from wordcast.services.matcher.counting import Counting
from wordcast.services.matcher.endpoints import DeliveryEndpoints
from wordcast.services.matcher.match_stream_delivery import MatchStreamDelivery
from wordcast.services.matcher.retries import Retries
from wordcast.services.matcher.webhook import Attempt, Outcome, Webhooks, counted
from wordcast.storage import Store
from wordcast.storage.acknowledgements import Acknowledgements
from wordcast.storage.outbox import Backlog, Message, Outbox
from wordcast.webhooks.netguard import AddressPolicy

log = logging.getLogger(__name__)

DELIVERED = Counter("wordcast_matches_delivered", "Matches a webhook acknowledged with a 2xx")
FAILED = Counter("wordcast_deliveries_failed", "Messages given up on", ["reason"])
TAKEN_OVER = Counter(
    "wordcast_deliveries_taken_over", "Messages taken over from a consumer that left them pending"
)
WAITING = Gauge("wordcast_deliveries_waiting", "Messages backing off until their next attempt")
LAG = Histogram(
    "wordcast_delivery_lag_seconds",
    "From a match being recorded to its 2xx",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800),
)
PUBLISH_TO_WEBHOOK = Histogram(
    "wordcast_publish_to_webhook_seconds",
    "From the router accepting a publication to the 2xx of the webhook message carrying its "
    "match (clocks of router and matcher hosts assumed in step)",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
OUTBOXES_EVERY_SECONDS = 5.0  # how soon a new matcher's outbox is read by the others
TAKE_OVER_EVERY_SECONDS = 30.0  # how often entries a vanished consumer left are looked for
ATTEMPT_TIMEOUTS = 3  # an attempt's deadline, in delivery timeouts (resolve, connect, exchange)
# Messages backing off between attempts wait as their entry ids (about 200 bytes each), not in a
# delivery slot; past this many no new message is read until some of them are done.
WAITING_MAX = 100_000
FAILING_ENDPOINT_WAIT_S = 1.0  # a message whose failing endpoint has its share of slots waits


def _observe_latency(message: Message) -> None:
    now = time.time()
    LAG.observe(max(0.0, now - message.created))
    if message.published:
        PUBLISH_TO_WEBHOOK.observe(max(0.0, now - message.published))


class Dispatcher:
    def __init__(
        self,
        outbox: Outbox,
        store: Store,
        *,
        concurrency: int,
        attempts: int,
        timeout_s: float,
        backoff_s: float,
        max_backoff_s: float,
        address_policy: AddressPolicy,
        take_over_after_s: float = 1800.0,
        redis_memory_max: int = 0,
        stream_retention_s: float = 3600.0,
        stream_max_messages: int = 100_000,
        endpoints: DeliveryEndpoints | None = None,
        counting: Counting | None = None,
    ) -> None:
        self._outbox = outbox
        self._counting = counting or Counting(store)
        self._redis_memory_max = redis_memory_max
        self._concurrency = concurrency
        self._attempts = attempts
        self._take_over_after_s = take_over_after_s
        self.endpoints = endpoints or DeliveryEndpoints(store, slots=concurrency)
        self._webhooks = Webhooks(store, address_policy, concurrency, timeout_s, self.endpoints)
        self.match_streams = MatchStreamDelivery(
            store.match_streams, stream_retention_s, stream_max_messages, self._counting
        )
        self.secrets = self._webhooks.secrets
        # httpx's timeout bounds each wait for the network, not the exchange: a receiver that
        # answers a byte at a time could hold a slot for ever, and outlast the take-over bound.
        self._attempt_deadline_s = ATTEMPT_TIMEOUTS * timeout_s
        self._acks: dict[str, Acknowledgements] = {}  # per outbox read
        self._tasks: set[asyncio.Task[None]] = set()  # one attempt each: the delivery slots
        # (outbox, entry) we deliver: in an attempt or waiting for the next one.
        self._active: set[tuple[str, str]] = set()
        self._waiting = Retries(backoff_s, max_backoff_s)
        self.delivered = 0
        self.failed = 0
        self.pressure = BackPressure()

    @property
    def backlog(self) -> Backlog:
        return self.pressure.backlog

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    @property
    def waiting(self) -> int:
        """Messages backing off until their next attempt."""
        return len(self._waiting)

    async def close(self, drain_s: float = 0.0) -> None:
        """Stop delivering, after letting the deliveries in flight finish for up to ``drain_s``:
        one cut short stays pending for this matcher's successor (a matcher removed by scaling
        down has none: ``MatcherState.hand_on_if_removed`` hands its entries to the others)."""
        if self._tasks and drain_s > 0:
            await asyncio.wait(self._tasks, timeout=drain_s)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._waiting.clear()  # still pending in Redis, as every message not yet delivered
        await self.endpoints.flush(force=True)
        for acks in self._acks.values():
            await acks.close()
        await self._webhooks.aclose()

    async def run(self) -> None:
        """Read and deliver until cancelled; survives Redis outages by waiting and retrying.

        Every matcher's outbox is read, new entries from all of them at once (at most a share of
        the free slots from each): a matcher whose subscriptions match more than the others' would
        otherwise deliver alone while they idle. Our own pending entries in each outbox (a
        predecessor's unfinished work) come before new ones, ours first.

        A slot holds one attempt. A message whose attempt failed waits for its next one outside
        the slots, and goes before new messages once due: a webhook that fails, or answers
        slowly, then takes slots only for its attempts, and the other webhooks' messages are
        delivered meanwhile instead of queueing behind its backoff.
        """
        measuring = asyncio.create_task(
            self.pressure.measure_forever(self._outbox, self._redis_memory_max, self._tally)
        )
        try:
            await self._deliver_forever()
        finally:
            measuring.cancel()

    async def _tally(self) -> None:
        """What is recorded alongside each measure of the back-pressure."""
        WAITING.set(len(self._waiting))
        await self.endpoints.flush()

    async def _deliver_forever(self) -> None:
        backoff = Backoff()
        # Refill in groups: a read per finished message would cost a round trip a message when
        # the webhooks keep up.
        refill = max(1, self._concurrency // 4)
        while True:
            try:
                # Per outbox, ours first: the last pending entry of ours read, or ">" once they
                # are all read.
                cursors: dict[Outbox, str] = {}
                looked = -math.inf
                took_over = time.monotonic()  # at start, our own pending entries come first
                while True:
                    free = self._concurrency - len(self._tasks)
                    free -= await self._start_due(free)
                    if free < refill or len(self._waiting) >= WAITING_MAX:
                        await self._wait_for_slot_or_retry()
                        continue
                    if time.monotonic() - looked >= OUTBOXES_EVERY_SECONDS:
                        await _discover(self._outbox, cursors)
                        looked = time.monotonic()
                    entries = await self._read(cursors, free, self._waiting.block_ms())
                    if time.monotonic() - took_over >= TAKE_OVER_EVERY_SECONDS:
                        entries += await _take_over(
                            cursors, free - len(entries), self._take_over_after_s
                        )
                        took_over = time.monotonic()
                    for outbox, entry_id, message in await self.match_streams.deliver(entries):
                        if (outbox.key, entry_id) in self._active:
                            continue
                        self._start(outbox, entry_id, message)
                    backoff.succeeded()
            except StoreUnavailable as exc:
                log.warning("outbox unavailable, retrying in %.1fs: %s", backoff.delay_s, exc)
                await backoff.wait()
                # Whatever we read and did not finish is still pending: the cursors start over.

    async def _start_due(self, free: int) -> int:
        """Start the retries that are due, as many as ``free`` slots allow, their messages read
        again from the outboxes (a round trip for each outbox); returns how many took a slot."""
        due = self._waiting.due(free, self.endpoints.may_start, FAILING_ENDPOINT_WAIT_S)
        started = 0
        for outbox, retries in due.items():
            try:
                messages = await outbox.fetch([retry.entry_id for retry in retries])
            except StoreUnavailable:
                # These and the next outboxes' wait for next time round: still pending in Redis.
                self._waiting.put_back(itertools.chain.from_iterable(due.values()))
                raise
            due[outbox] = []  # each is started below, or gone
            for retry in retries:
                message = messages.get(retry.entry_id)
                if message is None:  # gone from the outbox: nothing left to deliver
                    self._active.discard((outbox.key, retry.entry_id))
                    continue
                started += self._start(outbox, retry.entry_id, message, retry.attempts)
        return started

    async def _wait_for_slot_or_retry(self) -> None:
        """Until an attempt ends, or the next retry is due. A retry already due is waiting for a
        slot (``_start_due`` gave it any there was), so then only an attempt's end will do."""
        until = self._waiting.until_due()
        if self._tasks:
            timeout = until or None
            await asyncio.wait(self._tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        else:
            await asyncio.sleep(until or 0.1)

    async def _read(
        self, cursors: dict[Outbox, str], free: int, block_ms: int | None
    ) -> list[tuple[Outbox, str, Message]]:
        pending_in = next((outbox for outbox, after in cursors.items() if after != ">"), None)
        if pending_in is not None:
            pending = await pending_in.read(cursors[pending_in], free, None)
            cursors[pending_in] = pending[-1][0] if pending else ">"
            return [(pending_in, entry_id, message) for entry_id, message in pending]
        per_outbox = -(-free // len(cursors))
        return await Outbox.read_new(list(cursors), per_outbox, block_ms)

    def _start(self, outbox: Outbox, entry_id: str, message: Message, attempts: int = 0) -> bool:
        """Start an attempt in a slot (True), or leave it waiting, not counted as an attempt,
        while its endpoint holds its share of the slots (False)."""
        self._active.add((outbox.key, entry_id))
        endpoint, waits = (message.tenant, message.callback_url), FAILING_ENDPOINT_WAIT_S
        if not self.endpoints.may_start(*endpoint):
            self._waiting.wait(outbox, entry_id, max(1, attempts), waits, endpoint)
            return False
        self.endpoints.take_slot(*endpoint)
        task = asyncio.create_task(self._deliver(outbox, entry_id, message, attempts))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _deliver(self, outbox: Outbox, entry_id: str, message: Message, made: int) -> None:
        """One attempt (after ``made`` others); a failure leaves the message waiting for the next
        one, unless that was the last."""
        retrying = False
        try:
            retrying = await self._attempt_and_record(outbox, entry_id, message, made + 1)
        finally:
            self.endpoints.free_slot(message.tenant, message.callback_url)
            if not retrying:
                self._active.discard((outbox.key, entry_id))

    async def _attempt_and_record(
        self, outbox: Outbox, entry_id: str, message: Message, attempt: int
    ) -> bool:
        """Returns whether the message is to be tried again."""
        acks = self._acks.get(outbox.key)
        if acks is None:
            acks = self._acks[outbox.key] = Acknowledgements(outbox)
        try:
            async with asyncio.timeout(self._attempt_deadline_s):
                made = await self._webhooks.attempt(message)
        except StoreUnavailable as exc:
            made = Attempt(Outcome.RETRY, str(exc))
        except TimeoutError:
            deadline = f"the attempt took over {self._attempt_deadline_s:g} s"
            made = counted(Outcome.RETRY, "deadline", deadline)
        try:
            if made.outcome is Outcome.DELIVERED:
                await acks.ack(entry_id)
                DELIVERED.inc(message.matches)
                _observe_latency(message)
                self.delivered += message.matches
                self._counting.delivered(message)
                return False
            if made.outcome in (Outcome.GONE, Outcome.DELETED):
                await acks.ack(entry_id)
                FAILED.labels(made.outcome.value).inc()
                return False
            if made.outcome in (Outcome.REFUSED, Outcome.DISABLED) or attempt >= self._attempts:
                dead_id = await outbox.dead_letter(entry_id, message, made.reason, attempt)
                FAILED.labels("dead_letter").inc()
                self.failed += message.matches
                self._counting.failed(message)
                self._webhooks.gave_up(message)
                log.warning(  # by the id `wordcast replay` and GET /deadletters take
                    "gave up after %d attempts: dead letter %s of tenant %r (wordcast replay %s): %s",
                    attempt,
                    dead_id,
                    message.tenant,
                    dead_id,
                    made.reason,
                )
                return False
        except StoreUnavailable as exc:
            # Not acknowledged: the entry stays pending and is delivered again later.
            log.warning("could not record the outcome of %s: %s", entry_id, exc)
            return False
        endpoint = (message.tenant, message.callback_url)  # whose share of the slots it waits in
        self._waiting.wait(outbox, entry_id, attempt, made.wait_s, endpoint)
        return True


async def _discover(ours: Outbox, cursors: dict[Outbox, str]) -> None:
    """Start reading the outboxes not read yet: all of them at first, later a matcher's added
    since, each from our own pending entries there."""
    known = {outbox.key for outbox in cursors}
    for outbox in await ours.every_outbox():
        if outbox.key not in known:
            await outbox.ensure_group()
            cursors[outbox] = "0"


async def _take_over(
    cursors: dict[Outbox, str], free: int, idle_s: float
) -> list[tuple[Outbox, str, Message]]:
    """Entries any consumer left pending for longer than ``idle_s`` (longer than a delivery can
    take), from every outbox: those of a matcher removed for good, which no successor reads."""
    taken: list[tuple[Outbox, str, Message]] = []
    for outbox in cursors:
        if free - len(taken) <= 0:
            break
        stale = await outbox.take_over_stale(idle_s, free - len(taken))
        taken += [(outbox, entry_id, message) for entry_id, message in stale]
    if taken:
        TAKEN_OVER.inc(len(taken))
        log.warning("took over %d entries left pending by another consumer", len(taken))
    return taken
