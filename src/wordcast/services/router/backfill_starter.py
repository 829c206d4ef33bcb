"""Starting a new subscription's backfill (issue 13, part 5; the work is the matchers',
:mod:`wordcast.services.matcher.backfill`).

Once a subscription is in effect, the router gives each of its records (one per alternative of a
boolean query) to one matcher holding it, the lowest-numbered, with the window: from the minutes
asked for before now to now plus the router's matcher timeout (a publication being routed while
the subscription took effect is appended to the recent publications within that time).
"""

from __future__ import annotations

import asyncio
import time

from wordcast.errors import InvalidInput
from wordcast.query.boolean import part_id
from wordcast.services.router.matchers import MatcherClient
from wordcast.services.router.settings import RouterSettings
from wordcast.services.schemas import BackfillOut
from wordcast.storage import Store
from wordcast.storage.events import EventFollower
from wordcast.storage.records import Subscription


class BackfillStarter:
    def __init__(
        self,
        settings: RouterSettings,
        store: Store,
        matcher_client: MatcherClient,
        follower: EventFollower,
    ) -> None:
        self.settings = settings
        self.store = store
        self.matcher_client = matcher_client
        self.follower = follower

    def check(self, minutes: int) -> None:
        """Refuse a backfill this cluster cannot give (before anything is stored)."""
        kept = self.settings.backfill_s
        if kept == 0:
            raise InvalidInput(
                "backfill_minutes: this cluster keeps no recent publications, so there is "
                "nothing to backfill from (WORDCAST_ROUTER_BACKFILL_S is 0)"
            )
        if minutes * 60 > kept:
            raise InvalidInput(
                f"backfill_minutes: {minutes} minutes asked, but this cluster keeps only the "
                f"last {kept / 60:g} minutes of publications (WORDCAST_ROUTER_BACKFILL_S)"
            )

    async def start(self, sub: Subscription, alternatives: int, minutes: int) -> BackfillOut:
        """Tell the matchers to backfill ``sub`` (its ``alternatives`` records)."""
        now = time.time()
        since, until = now - minutes * 60, now + self.settings.matcher_timeout_s
        records = [sub] + [
            await self.store.subscriptions.get(part_id(sub.id, k)) for k in range(1, alternatives)
        ]
        by_matcher: dict[int, list[str]] = {}
        for record in records:
            by_matcher.setdefault(min(record.matchers), []).append(record.id)
        position = self.follower.position
        await asyncio.gather(
            *(
                self.matcher_client.start_backfill(m, {"records": ids, "since": since, "until": until,
                              "until_event": position})
                for m, ids in by_matcher.items()
            )
        )  # fmt: skip
        return BackfillOut(since=since, until=until, matchers=sorted(by_matcher))
