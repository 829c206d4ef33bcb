"""Placing one checked subscription and storing it (not yet announced).

A keyword subscription (or each alternative of a boolean query: :mod:`wordcast.query.boolean`) is
placed with LASP (S³-TM Alg. 2) among the eligible matchers B(S, M) of every mapping version in
use (:mod:`wordcast.routing.placement`), on the word maps H(i) as Redis holds them now; a pattern
goes to a matcher owning its anchor unless that one holds noticeably more patterns than the least
loaded. If the mapping window moves between placing and storing, it is placed again.
"""

from __future__ import annotations

import base64
import random
import secrets
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from wordcast.errors import StaleMapping, StoreUnavailable
from wordcast.query.boolean import BooleanQuery, part_id
from wordcast.routing.anchors import AnchorIndex
from wordcast.routing.lasp import LinearCost
from wordcast.routing.placement import candidates, place_pattern, plan
from wordcast.services.router.settings import RouterSettings
from wordcast.services.router.versions import MappingVersions, MappingView
from wordcast.storage import Store
from wordcast.storage.records import Subscription

Stored = tuple[Subscription, str]  # the subscription and the event that announces it


class Placer:
    def __init__(
        self,
        settings: RouterSettings,
        store: Store,
        versions: MappingVersions,
        cost: LinearCost,
        anchors: Callable[[], AnchorIndex],
    ) -> None:
        self.settings = settings
        self.store = store
        self.versions = versions
        self.cost = cost
        self._anchors = anchors  # the router's current anchor owners (its replica's)
        self._random = random.Random()

    @staticmethod
    def new_secret() -> str:
        """A Standard Webhooks signing secret: whsec_ and 24 random bytes in base64."""
        return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()

    async def add_query(
        self,
        query: str,
        analysed: BooleanQuery,
        callback_url: str,
        tenant: str,
        added: list[Stored],
        stream: str = "",
    ) -> None:
        """Place and store every alternative of a checked query, in order, appending each to
        ``added`` as it is stored (so that a failure part-way leaves what to withdraw).

        Alternative k is a keyword subscription of its required words under ``part_id(id, k)``,
        with the query's text: the matcher holding it rebuilds the alternatives from that text,
        and delivers under the subscription's id (the first alternative's record, which alone
        carries the signing secret). Earlier alternatives are stored first, so that a later one
        never delivers a match that an earlier one, not yet stored, would have had to."""
        if analysed.is_plain:
            terms = analysed.clauses[0].words
            added.append(await self.add_keywords(query, terms, callback_url, tenant, stream=stream))
            return
        first = uuid.uuid4().hex
        secret = self.new_secret()
        for part, clause in enumerate(analysed.clauses):
            stored = await self.add_keywords(
                query,
                clause.words,
                callback_url,
                tenant,
                sub_id=part_id(first, part),
                secret=secret if part == 0 else "",
                stream=stream,
            )
            added.append(stored)

    async def add_keywords(
        self,
        query: str,
        terms: tuple[str, ...],
        callback_url: str,
        tenant: str,
        sub_id: str | None = None,
        secret: str | None = None,
        stream: str = "",
    ) -> Stored:
        """Place a checked keyword subscription with LASP and store it (not yet announced)."""
        for _ in range(5):
            view = self.versions.view
            placements = await self._plan(terms, view)
            opened = [p.matcher for p in placements if p.is_open]
            try:
                return await self._store(
                    sub_id,
                    secret,
                    query=query,
                    terms=terms,
                    callback_url=callback_url,
                    matcher=opened[0],
                    tenant=tenant,
                    placements=placements,
                    window=view.window_text,
                    stream=stream,
                )
            except StaleMapping:
                await self.versions.refresh()  # the window moved: plan for the new one
        raise StoreUnavailable("the mapping window kept moving while placing a subscription")

    async def _plan(self, terms: Sequence[str], view: MappingView) -> Any:
        """LASP over every version in the window, with H(i) as Redis holds it now."""
        wanted = candidates(terms, view.planning)
        sizes, known = await self.store.word_maps.word_map_view(view.span, wanted, terms)
        return plan(terms, view.planning, sizes, known, self.cost)

    async def add_pattern(
        self, source: str, anchor: str, callback_url: str, tenant: str, stream: str = ""
    ) -> Stored:
        """Place a checked pattern on a matcher every version in use routes to, and store it."""
        for _ in range(5):
            view = self.versions.view
            matcher = place_pattern(
                self._anchors().owners(anchor),
                await self.store.word_maps.pattern_loads(),
                view.common,
                self._random.choice,
            )
            try:
                return await self._store(
                    window=view.window_text,
                    query="",
                    terms=(),
                    callback_url=callback_url,
                    matcher=matcher,
                    tenant=tenant,
                    pattern=source,
                    anchor=anchor,
                    stream=stream,
                )
            except StaleMapping:
                await self.versions.refresh()
        raise StoreUnavailable("the mapping window kept moving while placing a subscription")

    async def _store(
        self,
        sub_id: str | None = None,
        secret: str | None = None,
        window: str = "0 0",
        **fields: Any,
    ) -> Stored:
        """Store a validated, placed subscription (under a fresh id and secret unless given);
        the caller announces it (once, for a whole batch)."""
        sub = Subscription(
            id=sub_id or uuid.uuid4().hex,
            created=time.time(),
            secret=self.new_secret() if secret is None else secret,
            **fields,
        )
        event_id = await self.store.subscriptions.add(
            sub, self.settings.max_subscriptions_per_tenant, window
        )
        return sub, event_id
