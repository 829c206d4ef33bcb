"""A tenant's subscriptions: registered (one, or a batch all or nothing), listed, deleted, their
dead letters replayed (their secrets are their endpoints': :mod:`.endpoints`).

Every item is analysed and every callback checked before anything is stored, so bad input changes
nothing; a change is made effective on the matchers concerned (and this router) before the client
is answered. A subscription to a shared stream needs its subscribe grant, checked before storing
and again after (:meth:`Subscribing._still_granted`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from wordcast.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    LimitExceeded,
    NotFound,
    StoreUnavailable,
    WordcastError,
)
from wordcast.query.analysis import MAX_TOKEN_CHARS, new_analyser, normalised_tokens
from wordcast.query.boolean import BooleanQuery, parse_query
from wordcast.query.filters import FILTER_TOKEN
from wordcast.query.patterns import parse
from wordcast.services.router.batches import (
    BatchItem,
    check_quota,
    existing,
    keyed_id,
    keys_locked,
    store_in_order,
)
from wordcast.services.router.matchers import MatcherClient
from wordcast.services.router.settings import RouterSettings
from wordcast.services.router.subscription_placer import Stored, SubscriptionPlacer
from wordcast.services.router.tenants import Tenants
from wordcast.storage import Store
from wordcast.storage.events import EventFollower
from wordcast.storage.outbox import Message
from wordcast.storage.records import Subscription, delivery_of
from wordcast.storage.shards import latest
from wordcast.webhooks.netguard import resolve

log = logging.getLogger(__name__)


def _fate(stored: int, withdrawn: bool) -> str:
    if withdrawn:
        return f"the {stored} stored before it were withdrawn"
    return f"{stored} were stored before it and could not be withdrawn: list your subscriptions"


class Subscribing:
    def __init__(
        self,
        settings: RouterSettings,
        store: Store,
        tenants: Tenants,
        placer: SubscriptionPlacer,
        follower: EventFollower,
        matcher_client: MatcherClient,
    ) -> None:
        self.settings = settings
        self.store = store
        self.tenants = tenants
        self.placer = placer
        self.follower = follower
        self.matcher_client = matcher_client
        self.analyser = new_analyser()
        self.address_policy = settings.address_policy

    def analyse_query(self, query: str) -> BooleanQuery:
        """The query's alternatives (:mod:`wordcast.query.boolean`); one without operators is a
        single conjunction of its terms. Raises InvalidInput naming the problem."""
        _refuse_long_words(query)
        return parse_query(query, self.analyser)

    async def subscribe(
        self, query: str, callback_url: str, tenant: str, stream: str = "", tag: str = ""
    ) -> Subscription:
        analysed = self.analyse_query(query)
        await self._check_webhook(callback_url)
        await self._may_subscribe(tenant, [stream])
        if not analysed.is_plain:  # several records: the batch path withdraws a partial one
            item = BatchItem("query", query, callback_url, stream, tag=tag)
            return (await self._register([item], [analysed], tenant))[0]
        terms = analysed.clauses[0].words
        sub, event_id = await self.placer.add_keywords(
            query, terms, callback_url, tenant, stream=stream, tag=tag
        )
        await self._still_granted(tenant, [sub])
        await self._announce(event_id, sub.matchers)
        return sub

    async def _check_webhook(self, address: str) -> None:
        """Refuse a webhook URL that is or resolves to a forbidden address; a subscription
        delivered to the match stream only has none."""
        webhook_url, _ = delivery_of(address)
        if webhook_url:
            await resolve(webhook_url, self.address_policy)

    async def _may_subscribe(self, tenant: str, streams: Iterable[str]) -> None:
        """Forbidden unless the tenant may subscribe to each shared stream named."""
        for stream in sorted({stream for stream in streams if stream}):
            await self.tenants.check_grant(tenant, stream, publish=False)

    async def _still_granted(self, tenant: str, stored: Sequence[Subscription]) -> None:
        """Withdraw what was just stored if a subscribe grant it needed was revoked meanwhile.

        Revoking takes the grant away first and then deletes the tenant's subscriptions to the
        stream; storing comes first here and reading the grant (afresh) after. Whichever order
        the two interleave in, one of them sees the other: no subscription outlives its grant.
        """
        for stream in sorted({sub.stream for sub in stored if sub.stream}):
            if not (await self.store.tenants.grant(stream, tenant))[1]:
                await self._withdraw(stored)
                raise Forbidden(
                    f"tenant {tenant!r} lost its grant to subscribe to stream {stream!r} while "
                    "subscribing; nothing was stored"
                )

    async def subscribe_pattern(
        self, source: str, callback_url: str, tenant: str, stream: str = "", tag: str = ""
    ) -> Subscription:
        pattern = parse(source)
        await self._check_webhook(callback_url)
        await self._may_subscribe(tenant, [stream])
        sub, event_id = await self.placer.add_pattern(
            source, pattern.anchor, callback_url, tenant, stream, tag=tag
        )
        await self._still_granted(tenant, [sub])
        await self._announce(event_id, sub.matchers)
        return sub

    async def preview(
        self, kind: str, text: str, callback_url: str, tenant: str, stream: str = ""
    ) -> tuple[BooleanQuery | None, str, list[list[int]]]:
        """What subscribing would do with a query (``kind`` "query") or a pattern, checked as
        :meth:`subscribe` checks it, storing nothing: the query read (None for a pattern), the
        pattern's anchor ("" for a query), and the matchers each alternative (or the pattern)
        would be placed on now. Raises as subscribing would."""
        if kind == "pattern":
            anchor = parse(text).anchor
            await self._check_webhook(callback_url)
            await self._may_subscribe(tenant, [stream])
            return None, anchor, [[await self.placer.would_place_pattern(anchor)]]
        analysed = self.analyse_query(text)
        await self._check_webhook(callback_url)
        await self._may_subscribe(tenant, [stream])
        placed = [await self.placer.would_place(c.words) for c in analysed.clauses]
        return analysed, "", placed

    async def subscribe_batch(self, items: Sequence[BatchItem], tenant: str) -> list[Subscription]:
        """Register a batch of subscriptions, in order.

        Every item is analysed and every callback checked before any is stored, so bad input
        changes nothing. The queries are then placed one after another in memory (LASP sees the
        ones before) and stored in one round trip, and the matchers concerned catch up once, for
        the whole batch: round trips per subscription were most of the cost of registering many.
        An item whose idempotency key made a subscription before is answered with that one;
        requests with a key in common are served one after the other (:func:`keys_locked`).
        """
        terms_or_anchors: list[BooleanQuery | str] = []
        first_use: dict[str, int] = {}
        keys: dict[str, int] = {}
        for index, (kind, text, callback_url, _, key, _) in enumerate(items):
            if key is not None and keys.setdefault(key, index) != index:
                raise InvalidInput(
                    f"subscription {index}: its key {key!r} is subscription {keys[key]}'s too"
                )
            try:
                terms_or_anchors.append(
                    self.analyse_query(text) if kind == "query" else parse(text).anchor
                )
            except InvalidInput as exc:
                raise InvalidInput(f"subscription {index}: {exc}") from exc
            first_use.setdefault(callback_url, index)
        for callback_url, index in first_use.items():
            try:
                await self._check_webhook(callback_url)
            except InvalidInput as exc:
                raise InvalidInput(f"subscription {index}: {exc}") from exc
        await self._may_subscribe(tenant, [item[3] for item in items])
        keyed = [keyed_id(tenant, item.key) for item in items if item.key is not None]
        async with keys_locked(self.store, keyed):
            return await self._register(items, terms_or_anchors, tenant)

    async def _register(
        self,
        items: Sequence[BatchItem],
        terms_or_anchors: Sequence[BooleanQuery | str],
        tenant: str,
    ) -> list[Subscription]:
        """Place, store and announce checked items (:meth:`subscribe_batch`), within the
        tenant's quota; a failure part-way withdraws what was stored."""
        ids = [keyed_id(tenant, item.key) if item.key is not None else None for item in items]
        stored = await existing(self.store, items, ids, terms_or_anchors, tenant)
        records = stored.records_to_store(ids, terms_or_anchors)
        holds = await self.store.subscriptions.tenant_count(tenant)
        check_quota(tenant, holds, len(items), records, self.settings.max_subscriptions_per_tenant)
        added: list[Stored] = []
        try:
            first_ids = await store_in_order(
                self.placer, self.follower, items, terms_or_anchors, ids, stored.ids, tenant, added
            )
        except (StoreUnavailable, LimitExceeded, Conflict) as exc:
            raise await self._withdrawn_after(exc, [sub for sub, _ in added]) from exc
        await self._still_granted(tenant, [sub for sub, _ in added])
        if added:
            await self._announce_stored(added)
        made = {sub.id: sub for sub, _ in added}
        return [stored.first.get(sub_id) or made[sub_id] for sub_id in first_ids if sub_id]

    async def _announce_stored(self, added: Sequence[Stored]) -> None:
        matchers = sorted({m for sub, _ in added for m in sub.matchers})
        last = latest(event_id for _, event_id in added) or "0-0"
        try:
            await self._announce(last, matchers)
        except StoreUnavailable as exc:  # as for one subscription: stored, not yet in effect here
            raise StoreUnavailable(
                f"all {len(added)} subscriptions were stored, but {exc}; they take effect as "
                "the services catch up (list your subscriptions for their ids)"
            ) from exc

    async def _withdrawn_after(
        self, exc: StoreUnavailable | LimitExceeded | Conflict, kept: Sequence[Subscription]
    ) -> WordcastError:
        """Withdraw what a batch stored before ``exc`` stopped it; the error to answer with."""
        failure = type(exc)
        return failure(f"{exc}; {_fate(len(kept), await self._withdraw(kept))}")

    async def _withdraw(self, subs: Sequence[Subscription]) -> bool:
        """Delete what a failed batch stored; False if Redis would not let us."""
        try:
            # Later alternatives first: one never outlives the records before it.
            events = [(await self.store.subscriptions.delete(sub.id))[1] for sub in reversed(subs)]
        except StoreUnavailable as exc:
            log.error("could not withdraw a failed batch's subscriptions: %s", exc)
            return False
        if events:
            await self._announce(events[-1], sorted({m for s in subs for m in s.matchers}))
        return True

    async def unsubscribe(self, sub_id: str, tenant: str) -> Subscription:
        await self.owned(sub_id, tenant)
        sub, event_id, matchers = await self.store.subscriptions.delete_with_alternatives(sub_id)
        await self._announce(event_id, sorted(matchers))
        await forget_counters(self.store, [sub_id])
        return sub

    async def unsubscribe_batch(self, sub_ids: Sequence[str], tenant: str) -> list[str]:
        """Delete several of a tenant's subscriptions; the matchers concerned catch up once.

        Every id is checked first: if the tenant has no subscription with one of them, NotFound
        names them and nothing is deleted. One deleted meanwhile (another request) counts as
        deleted."""
        ids = list(dict.fromkeys(sub_ids))
        mine = await self.store.subscriptions.tenant_holds(tenant, ids)
        unknown = [sub_id for sub_id, is_mine in zip(ids, mine, strict=True) if not is_mine]
        if unknown:
            named = ", ".join(map(repr, unknown[:5])) + (" …" if len(unknown) > 5 else "")
            raise NotFound(
                f"{len(unknown)} of the ids are not subscriptions of yours ({named}); "
                "nothing was deleted"
            )
        await self.delete_subscriptions(ids)
        return ids

    async def delete_subscriptions(self, ids: Sequence[str]) -> None:
        """Delete subscriptions whoever they belong to (one gone already is passed over), and
        make it effective before returning."""
        last_event, matchers = await self.store.subscriptions.delete_many(ids)
        if last_event is not None:
            await self._announce(last_event, sorted(matchers))
        await forget_counters(self.store, ids)

    async def _announce(self, event_id: str, matchers: Sequence[int]) -> None:
        """Make the change effective here and on its matchers before answering the client.

        The change is already durable; if a matcher cannot be told now, it reads the event
        from the stream on its own, so a failure here only delays the change.
        """
        await self.follower.catch_up(until=event_id)
        await self.matcher_client.sync_those_answering(matchers, event_id, "it will catch up")

    async def owned(self, sub_id: str, tenant: str) -> Subscription:
        """A tenant's subscription; another tenant's is NotFound, like one that does not exist."""
        sub = await self.store.subscriptions.get(sub_id)
        if sub.tenant != tenant:
            raise NotFound(f"no subscription with id {sub_id!r}")
        return sub

    async def replay(self, tenant: str, dead_id: str) -> Message:
        """Send a dead letter again: back into the outbox of its subscription's matcher."""
        letter = await self.store.dead_letters.get(tenant, dead_id)
        for sub_id in letter.message.subscription_ids:
            try:
                sub = await self.owned(sub_id, tenant)
            except NotFound:
                continue
            return await self.store.dead_letters.replay(tenant, dead_id, sub.matcher)
        raise NotFound(f"the subscriptions of dead letter {dead_id!r} were deleted")


async def forget_counters(store: Store, ids: Sequence[str]) -> None:
    """Delete the counters of deleted subscriptions. The deletion stands if this fails: a tally
    arriving later adds nothing to a subscription gone, so what is left is only what was counted
    before (logged)."""
    try:
        await store.counters.forget(ids)
    except StoreUnavailable as exc:
        log.warning("could not delete the counters of %d subscriptions: %s", len(ids), exc)


def _refuse_long_words(query: str) -> None:
    """InvalidInput if a word of ``query`` (outside its filters) is longer than analysis keeps:
    dropped silently, it could never match."""
    words = normalised_tokens(FILTER_TOKEN.sub(" ", query))
    long = next((word for word in words if len(word) > MAX_TOKEN_CHARS), None)
    if long is not None:
        raise InvalidInput(
            f"query {query!r}: the word {long[:24]!r}… has {len(long)} characters; words of "
            f"more than {MAX_TOKEN_CHARS} are never indexed, so it could never match"
        )
