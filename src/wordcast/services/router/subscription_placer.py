"""Placing checked subscriptions and storing them (not yet announced): one, or a batch's queries
placed in memory and stored in one round trip (:meth:`SubscriptionPlacer.add_queries`).

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
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from wordcast import _core
from wordcast.errors import LimitExceeded, StaleMapping, StoreUnavailable
from wordcast.query.boolean import BooleanQuery, part_id
from wordcast.routing.anchors import AnchorIndex
from wordcast.routing.lasp import LinearCost
from wordcast.routing.mapping import eligible_matchers
from wordcast.routing.placement import (
    Placement,
    candidates,
    matchers_of,
    place_pattern,
    plan,
)
from wordcast.services.router.settings import RouterSettings
from wordcast.services.router.versions import MappingVersions, MappingView
from wordcast.storage import Store
from wordcast.storage.records import Subscription

Stored = tuple[Subscription, str]  # the subscription and the event that announces it


@dataclass(frozen=True, slots=True)
class QueryItem:
    """A checked query to store: its alternatives are records of their own (:meth:`add_queries`)."""

    query: str
    analysed: BooleanQuery
    callback_url: str
    stream: str = ""
    sub_id: str | None = None  # None: a fresh one
    index: int = 0  # its place in the request, to name it in an error
    tag: str = ""


@dataclass(frozen=True, slots=True)
class _Record:
    query: str
    terms: tuple[str, ...]
    callback_url: str
    stream: str
    sub_id: str
    secret: str
    item: int  # the QueryItem's index
    tag: str


class SubscriptionPlacer:
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

    async def add_queries(
        self,
        items: Sequence[QueryItem],
        tenant: str,
        added: list[Stored],
        stored_ids: Collection[str] = (),
    ) -> list[str]:
        """Place and store checked queries, every alternative of each, in order, with one read of
        the word maps and one round trip of writes.

        Alternative k of a query is a keyword subscription of its required words under
        ``part_id(id, k)``, with the query's text: the matcher holding it rebuilds the
        alternatives from that text, and delivers under the subscription's id (the first
        alternative's record, which alone carries the signing secret). Earlier alternatives are
        stored first, so that a later one never delivers a match that an earlier one, not yet
        stored, would have had to.

        LASP places them one after another in memory (``_core.PlanningView``, compiled from
        :class:`~wordcast.routing.placement.PlanningView`), each seeing the
        ones before as if they had been stored already; the records are then stored in order,
        each by its own atomic script. What is stored is appended to ``added`` as it would be one
        by one. A record whose id exists already is passed over (a retried request with the
        same idempotency key), as are those in ``stored_ids``, stored already; one refused because
        the mapping window moved is placed again. Returns each item's subscription id.
        """
        firsts, records = _records(items, stored_ids)
        for _ in range(5):
            if not records:
                return firsts
            view = self.versions.view
            subs = await self._plan_many(records, view, tenant)
            try:
                answers = await self.store.subscriptions.add_many(
                    subs, self.settings.max_subscriptions_per_tenant, view.window_text
                )
            except StoreUnavailable as exc:
                raise StoreUnavailable(f"subscription {records[0].item}: {exc}") from exc
            stale: list[_Record] = []
            refused: LimitExceeded | None = None
            for record, sub, answer in zip(records, subs, answers, strict=True):
                if isinstance(answer, str):
                    added.append((sub, answer))
                elif isinstance(answer, StaleMapping):
                    stale.append(record)
                elif isinstance(answer, LimitExceeded) and refused is None:
                    refused = LimitExceeded(f"subscription {record.item}: {answer}")
            if refused is not None:
                raise refused
            if stale:
                await self.versions.refresh()  # the window moved: plan those for the new one
            records = stale
        raise StoreUnavailable("the mapping window kept moving while placing subscriptions")

    async def _plan_many(
        self, records: Sequence[_Record], view: MappingView, tenant: str
    ) -> list[Subscription]:
        # One mapping version in use (as but for a migration): a subscription with a word that
        # is not hot is placed by LASP alone, in the compiled view.
        single = view.planning[0] if len(view.planning) == 1 else None
        direct = [
            eligible_matchers(record.terms, single) if single else set() for record in records
        ]
        eligible = [
            found or candidates(record.terms, view.planning)
            for record, found in zip(records, direct, strict=True)
        ]
        words = {term for record in records for term in record.terms}
        sizes, word_maps = await self.store.word_maps.word_maps_holding(
            view.span, set().union(*eligible), words
        )
        maps = _core.PlanningView(
            sizes, {m: list(w) for m, w in word_maps.items()}, self.cost.slope, self.cost.intercept
        )
        subs: list[Subscription] = []
        now = time.time()
        for record, matchers, found in zip(records, eligible, direct, strict=True):
            if found and single is not None:
                placements: tuple[Placement, ...] = (
                    Placement(maps.place(record.terms, sorted(found)), single.version),
                )
            else:
                placements = plan(
                    record.terms, view.planning, maps.sizes, maps.known(record.terms, sorted(matchers)),
                    self.cost,
                )  # fmt: skip
            maps.hold(record.terms, matchers_of(placements))
            subs.append(
                Subscription(
                    id=record.sub_id,
                    query=record.query,
                    terms=record.terms,
                    callback_url=record.callback_url,
                    matcher=next(p.matcher for p in placements if p.is_open),
                    created=now,
                    tenant=tenant,
                    secret=record.secret,
                    placements=placements,
                    stream=record.stream,
                    tag=record.tag,
                )
            )
        return subs

    async def add_keywords(
        self,
        query: str,
        terms: tuple[str, ...],
        callback_url: str,
        tenant: str,
        sub_id: str | None = None,
        secret: str | None = None,
        stream: str = "",
        tag: str = "",
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
                    tag=tag,
                )
            except StaleMapping:
                await self.versions.refresh()  # the window moved: plan for the new one
        raise StoreUnavailable("the mapping window kept moving while placing a subscription")

    async def _plan(self, terms: Sequence[str], view: MappingView) -> Any:
        """LASP over every version in the window, with H(i) as Redis holds it now."""
        wanted = candidates(terms, view.planning)
        sizes, known = await self.store.word_maps.word_map_view(view.span, wanted, terms)
        return plan(terms, view.planning, sizes, known, self.cost)

    async def would_place(self, terms: Sequence[str]) -> list[int]:
        """The matchers LASP would place a keyword record of ``terms`` on now (a dry run's
        answer: nothing is stored, and H(i) is read as Redis holds it)."""
        return sorted(matchers_of(await self._plan(terms, self.versions.view)))

    async def would_place_pattern(self, anchor: str) -> int:
        """The matcher a pattern of ``anchor`` would be placed on now (a random pick among
        equals, as for a real one)."""
        return place_pattern(
            self._anchors().owners(anchor),
            await self.store.word_maps.pattern_loads(),
            self.versions.view.common,
            self._random.choice,
        )

    async def add_pattern(
        self,
        source: str,
        anchor: str,
        callback_url: str,
        tenant: str,
        stream: str = "",
        sub_id: str | None = None,
        tag: str = "",
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
                    sub_id,
                    window=view.window_text,
                    query="",
                    terms=(),
                    callback_url=callback_url,
                    matcher=matcher,
                    tenant=tenant,
                    pattern=source,
                    anchor=anchor,
                    stream=stream,
                    tag=tag,
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
        """Store a validated, placed subscription (under a fresh id unless given; its secret is
        its endpoint's, and only subscriptions from before endpoints have one of their own);
        the caller announces it (once, for a whole batch)."""
        sub = Subscription(
            id=sub_id or new_subscription_id(),
            created=time.time(),
            secret=secret or "",
            **fields,
        )
        event_id = await self.store.subscriptions.add(
            sub, self.settings.max_subscriptions_per_tenant, window
        )
        return sub, event_id


def new_subscription_id() -> str:
    """A fresh id: 80 random bits in 16 lowercase letters and digits, half a uuid's 32 hex
    digits in every record, event and message that names it (and never a leading dash, which a
    command line would read as an option)."""
    return new_subscription_ids(1)[0]


def new_subscription_ids(count: int) -> list[str]:
    """``count`` fresh ids, their randomness read from the system at once (a read each was a
    fortieth of registering a batch)."""
    text = base64.b32encode(secrets.token_bytes(10 * count)).decode("ascii").lower()
    return [text[16 * k : 16 * k + 16] for k in range(count)]


def _records(
    items: Sequence[QueryItem], stored_ids: Collection[str]
) -> tuple[list[str], list[_Record]]:
    """Each item's id, and the records to store: an item's alternatives, but those stored."""
    firsts: list[str] = []
    records: list[_Record] = []
    fresh = iter(new_subscription_ids(sum(1 for item in items if not item.sub_id)))
    for item in items:
        first = item.sub_id or next(fresh)
        firsts.append(first)
        for part, clause in enumerate(item.analysed.clauses):
            if part_id(first, part) not in stored_ids:
                records.append(
                    _Record(
                        item.query,
                        clause.words,
                        item.callback_url,
                        item.stream,
                        part_id(first, part),
                        "",
                        item.index,
                        item.tag,
                    )
                )
    return firsts, records
