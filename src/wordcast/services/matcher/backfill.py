"""Backfill (issue 13, part 5): the matches a new subscription would have had in the recent
publications the routers keep (:mod:`wordcast.storage.recent`).

The router names, for each record of the subscription (one per alternative of a boolean query),
the one matcher that backfills it, and that matcher runs the backfill in the background: it holds
the records it is given in an index of their own (every placement served: one matcher backfills a
record, so each publication is judged once), reads the recent publications of the window a few
published requests at a time, matches them with the routed terms they were matched with live, and
records the matches in its outbox like any others (``"backfill": true`` in each message), so they
are delivered, signed, retried and dead-lettered under the same guarantees. It waits while the
outbox is full, as routers do.

Live and backfill meet at the window's end. The window ends a router's matcher timeout after the
subscription took effect, so a publication still being routed then is in it (publications are
kept once their routing is done); but a publication routed to this matcher after the backfill was
asked for was matched live here already (a record's words route to the matcher holding it), so
the matcher notes the publications it is sent while a backfill's window is open and the backfill
skips those. A publication matched live in the milliseconds between the subscription taking
effect and the backfill being asked for may still come twice (``(subscription_id,
publication_id)`` tells them apart); none is missed. A matcher that restarts during a backfill
does not resume it (its stats say where it stopped).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from wordcast.routing.placement import Placement, decode, encode
from wordcast.services.matcher.index import Batch, MatcherIndex
from wordcast.services.matcher.messages import MessageWriter
from wordcast.storage.outbox import Message
from wordcast.storage.records import Subscription

log = logging.getLogger(__name__)

MOST_RUNNING = 4  # backfills at once on one matcher; more wait their turn
KEPT_DONE = 100  # finished backfills the stats still show


@dataclass
class BackfillState:
    stored_ids: tuple[str, ...]
    since: float
    until: float
    state: str = "waiting"  # waiting, running, done, failed
    publications: int = 0
    matches: int = 0
    started: float = field(default_factory=time.time)
    live_from: float = field(default_factory=time.monotonic)  # matched live from then on
    finished: float | None = None
    caught_up: float | None = None  # every publication kept when it started was read
    error: str = ""


class Backfills:
    def __init__(
        self,
        state: Any,  # the MatcherState: its index, store, outbox, dispatcher and settings
        new_index: Callable[[], MatcherIndex],
    ) -> None:
        self.state = state
        self._new_index = new_index
        self._slots = asyncio.Semaphore(MOST_RUNNING)
        self.progress: dict[str, BackfillState] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # (when, publisher, ids) of the routed batches received while a window is open.
        self._live: deque[tuple[float, str, list[str]]] = deque()
        self._watching_until = 0.0  # monotonic

    def saw(self, publisher: str, ids: Sequence[str]) -> None:
        """A routed batch of publications ``ids`` was matched live (noted only while a
        backfill's window is open)."""
        now = time.monotonic()
        if now < self._watching_until:
            self._live.append((now, publisher, list(ids)))
        elif self._live and not self._tasks:
            self._live.clear()

    def _matched_live(self, progress: BackfillState) -> set[tuple[str, str]]:
        return {
            (publisher, pub_id)
            for at, publisher, ids in self._live
            if at >= progress.live_from
            for pub_id in ids
        }

    def start(self, stored_ids: Sequence[str], since: float, until: float) -> BackfillState:
        key = stored_ids[0]
        running = self.progress.get(key)
        if running is not None and running.state in ("waiting", "running"):
            return running  # asked again (a router's retry): the one under way answers
        progress = self.progress[key] = BackfillState(tuple(stored_ids), since, until)
        window_left = until - time.time() + 1.0
        self._watching_until = max(self._watching_until, time.monotonic() + window_left)
        task = asyncio.create_task(self._run(progress))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._forget_old()
        return progress

    def _forget_old(self) -> None:
        done = [k for k, p in self.progress.items() if p.finished is not None]
        for key in done[: max(0, len(done) - KEPT_DONE)]:
            del self.progress[key]

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _run(self, progress: BackfillState) -> None:
        async with self._slots:
            progress.state = "running"
            try:
                await self._backfill(progress)
                progress.state = "done"
            except asyncio.CancelledError:
                progress.state = "failed"
                progress.error = "the matcher stopped"
                raise
            except Exception as exc:
                progress.state, progress.error = "failed", str(exc)
                log.exception("backfill of %s failed", progress.stored_ids[0])
            finally:
                progress.finished = time.time()
        log.info(
            "backfill of %s %s: %d publications read, %d matches",
            progress.stored_ids[0],
            progress.state,
            progress.publications,
            progress.matches,
        )

    def _index_of(self, stored_ids: Sequence[str]) -> MatcherIndex:
        """The records to backfill, held alone, each serving every publication."""
        state = self.state
        everywhere = decode(encode((Placement(state.ordinal, 0),)))
        held: list[Subscription] = [
            state.index.subscriptions[s]._replace(placements=everywhere)
            for s in stored_ids
            if s in state.index.subscriptions
        ]
        if not held:
            raise ValueError(f"this matcher holds none of {', '.join(stored_ids)}")
        index = self._new_index()
        index.load(held)
        return index

    async def _backfill(self, progress: BackfillState) -> None:
        writer = MessageWriter(self._index_of(progress.stored_ids), self.state.message_options())
        # What is kept already first; then, once the window has closed, what publications
        # routed while the subscription took effect added.
        last = await self._read(progress, writer, None)
        progress.caught_up = time.time()
        wait = progress.until - time.time()
        if wait > 0:
            await asyncio.sleep(wait)
        await self._read(progress, writer, last)

    async def _read(
        self, progress: BackfillState, writer: MessageWriter, after: str | None
    ) -> str | None:
        """Backfill the window's entries after entry ``after``; the last entry read."""
        state = self.state
        async for batches in state.store.recent.read(progress.since, progress.until, after):
            # Anything appended was routed before: the batches matched live here are noted.
            live = self._matched_live(progress)
            for recent in batches:
                after = recent.entry_id
                publisher = recent.publisher
                kept = [k for k, pub_id in enumerate(recent.ids) if (publisher, pub_id) not in live]
                progress.publications += len(kept)
                # Every record served (one matcher backfills it) and every text read for the
                # patterns: none was routed to this matcher for them.
                batch = Batch(
                    [recent.ids[k] for k in kept],
                    [recent.texts[k] for k in kept],
                    [recent.terms[k] for k in kept],
                    recent.publisher,
                    recent.stream,
                    flagged=frozenset(range(len(kept))),
                    backfill=True,
                )
                found, matched = writer.messages(batch)
                if found:
                    await self._record(found)
                    progress.matches += matched
        return after

    async def _record(self, found: list[Message]) -> None:
        state = self.state
        # The webhooks catch up first, as routers wait on a 503.
        size = sum(len(m.body) for m in found)
        await state.dispatcher.pressure.room_for(state.settings.outbox_max, size)
        state.dispatcher.pressure.recorded(size)
        await state.outbox.put(found)

    def summary(self) -> dict[str, int]:
        """How many backfills are in each state, and what they read and found, all told (no
        subscription named: the matcher's /stats answers anyone who reaches it)."""
        counted = Counter(p.state for p in self.progress.values())
        return {
            **{state: counted[state] for state in sorted(counted)},
            "publications": sum(p.publications for p in self.progress.values()),
            "matches": sum(p.matches for p in self.progress.values()),
        }

    def stats(self) -> list[dict[str, Any]]:
        return [
            {
                "subscription_id": p.stored_ids[0],
                "records": list(p.stored_ids),
                "since": p.since,
                "until": p.until,
                "state": p.state,
                "publications": p.publications,
                "matches": p.matches,
                "started": p.started,
                "caught_up": p.caught_up,
                "finished": p.finished,
                "error": p.error,
            }
            for p in self.progress.values()
        ]
