"""The outbox against a real Redis: group acknowledgements, batched secrets, and dispatchers
that share every matcher's outbox (delivering to a real receiver process)."""

from __future__ import annotations

import asyncio
import contextlib
import time

import httpx
import orjson
import pytest
from prometheus_client import REGISTRY
from standardwebhooks import Webhook

from tests.helpers import Receiver, eventually_async
from wordcast.errors import StoreUnavailable
from wordcast.services.matcher import dispatcher as dispatcher_module
from wordcast.services.matcher import secrets as secrets_module
from wordcast.services.matcher.dispatcher import Dispatcher
from wordcast.services.matcher.secrets import SigningSecrets
from wordcast.services.matcher.settings import MatcherSettings
from wordcast.services.matcher.state import MatcherState
from wordcast.storage import Store
from wordcast.storage.acknowledgements import Acknowledgements
from wordcast.storage.outbox import (
    GROUP,
    Message,
    Outbox,
    redis_memory_limit,
    webhook_id,
)
from wordcast.storage.records import Subscription
from wordcast.storage.redis import connect
from wordcast.webhooks.netguard import AddressPolicy


class CountingOutbox(Outbox):
    """A real outbox that remembers the entries of each acknowledging round trip."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.round_trips: list[list[str]] = []

    async def ack(self, entry_ids: list[str]) -> None:  # type: ignore[override]
        self.round_trips.append(list(entry_ids))
        await super().ack(entry_ids)


def _message(k: int) -> Message:
    return Message((f"s{k}",), "t", "http://x/hook", f"msg_{k}", b"{}", 1, time.time())


def test_concurrent_acknowledgements_share_round_trips_and_leave_nothing_pending(
    redis_url: str, namespace: str
) -> None:
    async def scenario() -> None:
        client = connect(redis_url)
        outbox = CountingOutbox(client, namespace, 0)
        await outbox.ensure_group()
        await outbox.put([_message(k) for k in range(60)])
        entries = await outbox.read(">", 100, None)
        assert len(entries) == 60
        acks = Acknowledgements(outbox)
        # Deliveries finish at different moments; those finishing during a round trip group up.
        await asyncio.gather(*(acks.ack(entry_id) for entry_id, _ in entries))
        acknowledged = [e for trip in outbox.round_trips for e in trip]
        assert sorted(acknowledged) == sorted(e for e, _ in entries)
        assert len(outbox.round_trips) < 60
        assert await outbox.depth() == 0
        pending = await client.xpending(outbox.key, GROUP)
        assert pending["pending"] == 0
        # One entry alone is acknowledged at once, in its own round trip.
        await outbox.put([_message(99)])
        [(last, _)] = await outbox.read(">", 10, None)
        await acks.ack(last)
        assert outbox.round_trips[-1] == [last]
        assert await outbox.depth() == 0
        await client.aclose()

    asyncio.run(scenario())


def test_the_backlog_reads_the_outbox_and_redis_memory_in_one_round_trip(
    redis_url: str, namespace: str
) -> None:
    async def scenario() -> None:
        client = connect(redis_url)
        outbox = Outbox(client, namespace, 0)
        await outbox.ensure_group()
        await outbox.put([_message(k) for k in range(7)])
        memory = await client.info("memory")
        backlog = await outbox.backlog()
        assert backlog.messages == 7
        assert backlog.redis_used > 0
        assert backlog.redis_limit == redis_memory_limit(memory, 0) > 0
        assert (await outbox.backlog(redis_memory_max=12345)).redis_limit == 12345
        await client.aclose()

    asyncio.run(scenario())


def test_pending_entries_deleted_meanwhile_do_not_hide_the_live_ones_after_them(
    redis_url: str, namespace: str
) -> None:
    """Read as the dispatcher reads its pending entries, page by page, until a page is empty:
    a page of entries deleted while pending must not end the pass before the live ones."""

    async def scenario() -> None:
        client = connect(redis_url)
        outbox = Outbox(client, namespace, 0)
        await outbox.ensure_group()
        await outbox.put([_message(k) for k in range(30)])
        taken = [entry_id for entry_id, _ in await outbox.read(">", 100, None)]
        await client.xdel(outbox.key, *taken[5:20])  # more than a page, between live entries
        found: list[str] = []
        after = "0"
        while page := await outbox.read(after, 10, None):
            found += [entry_id for entry_id, _ in page]
            after = page[-1][0]
        assert found == taken[:5] + taken[20:]
        pending = await client.xpending_range(outbox.key, GROUP, "-", "+", 100)
        assert [p["message_id"] for p in pending] == found  # the deleted ones are let go
        await client.aclose()

    asyncio.run(scenario())


def test_a_failed_acknowledgement_reaches_every_waiter_of_its_group(namespace: str) -> None:
    async def scenario() -> None:
        client = connect("redis://127.0.0.1:1")  # nothing listens there
        acks = Acknowledgements(Outbox(client, namespace, 0))
        results = await asyncio.gather(
            *(acks.ack(f"1-{k}") for k in range(5)), return_exceptions=True
        )
        assert all(isinstance(r, StoreUnavailable) for r in results), results
        await client.aclose()

    asyncio.run(scenario())


def test_signing_secrets_of_several_subscriptions_in_one_read(
    redis_url: str, namespace: str
) -> None:
    async def scenario() -> None:
        client = connect(redis_url)
        store = Store(client, namespace)
        for k in range(3):
            sub = Subscription(f"id{k}", "a b", ("a", "b"), "http://x/hook", 0, secret=f"whsec_{k}")
            await store.subscriptions.add(sub)
        await store.subscriptions.rotate_secret("id1", "whsec_new", time.time() + 60)
        await store.subscriptions.rotate_secret(
            "id2", "whsec_newer", time.time() - 1
        )  # grace already over
        found = await store.subscriptions.signing_secrets_of(["id0", "id1", "id2", "gone", "id0"])
        assert found == {
            "id0": ["whsec_0"],
            "id1": ["whsec_new", "whsec_1"],
            "id2": ["whsec_newer"],
            "gone": None,
        }
        assert await store.subscriptions.signing_secrets_of(["id1"]) == {"id1": found["id1"]}
        await client.aclose()

    asyncio.run(scenario())


def _delivery(k: int, hook: str, subs: int) -> Message:
    """A message of matches for publication ``p{k}``, as a matcher records it."""
    pairs = [(f"id{j}", f"p{k}") for j in range(subs)]
    matches = [{"subscription_id": s, "query": "a b", "publication_id": p} for s, p in pairs]
    body = orjson.dumps({"type": "matches", "matches": matches})
    return Message(tuple(s for s, _ in pairs), "", hook, webhook_id(pairs), body, subs, time.time())


def _local_dispatcher(outbox: Outbox, store: Store, **changes: float) -> Dispatcher:
    """A dispatcher with quick retries, allowed to deliver to this machine's receiver."""
    settings: dict[str, float] = {
        "concurrency": 8,
        "attempts": 3,
        "timeout_s": 5,
        "backoff_s": 0.05,
        "max_backoff_s": 0.2,
    }
    return Dispatcher(
        outbox,
        store,
        address_policy=AddressPolicy.from_entries(["127.0.0.0/8"]),
        **(settings | changes),  # type: ignore[arg-type]
    )


async def _deliver_all(
    dispatcher: Dispatcher, outbox: Outbox, messages: list[Message], receiver: Receiver
) -> None:
    """Run ``dispatcher`` until ``outbox`` is empty (20 s at most): every message reached the
    receiver, and nothing is left in the stream or pending."""
    running = asyncio.create_task(dispatcher.run())

    async def idle() -> bool:
        return not (await outbox.depth() or dispatcher.in_flight)

    with contextlib.suppress(AssertionError):  # what is left is checked below
        await eventually_async(idle, 20, what="the outbox empty")
    running.cancel()
    await dispatcher.close()
    assert await outbox.depth() == 0
    assert (await outbox.client.xpending(outbox.key, GROUP))["pending"] == 0
    async with httpx.AsyncClient() as http:
        got = (await http.get(f"{receiver.url}/deliveries", timeout=10)).json()["webhook_ids"]
    assert {m.webhook_id for m in messages} <= set(got)


def test_a_dispatcher_delivers_every_matchers_outbox_its_own_pending_entries_included(
    redis_url: str, namespace: str, receiver: Receiver
) -> None:
    """Matcher 0's dispatcher empties matcher 1's outbox too, where its crashed predecessor
    had taken entries it never acknowledged."""

    async def scenario() -> None:
        client = connect(redis_url)
        store = Store(client, namespace)
        for j in range(3):
            await store.subscriptions.add(
                Subscription(
                    f"id{j}", "a b", ("a", "b"), receiver.hook, 1, secret="whsec_" + "QUJD" * 6
                )
            )
        theirs, ours = Outbox(client, namespace, 1), Outbox(client, namespace, 0)
        await theirs.ensure_group()
        messages = [_delivery(k, receiver.hook, 3) for k in range(40)]
        await theirs.put(messages)
        # A predecessor of dispatcher 0 took ten of matcher 1's entries and died with them.
        taken = await Outbox(client, namespace, 1, reader=0).read(">", 10, None)
        assert len(taken) == 10
        dispatcher = _local_dispatcher(ours, store)
        await _deliver_all(dispatcher, theirs, messages, receiver)
        await client.aclose()

    asyncio.run(scenario())


def test_messages_a_removed_matcher_had_taken_are_taken_over_once_stale(
    redis_url: str, namespace: str, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Matcher 7 took ten entries of matcher 1's outbox and was removed for good: no successor
    reads its pending entries, so matcher 0's dispatcher takes them over once they are stale,
    and not before."""
    monkeypatch.setattr(dispatcher_module, "TAKE_OVER_EVERY_SECONDS", 0.1)

    async def scenario() -> None:
        client = connect(redis_url)
        store = Store(client, namespace)
        await store.subscriptions.add(
            Subscription("id0", "a b", ("a", "b"), receiver.hook, 1, secret="whsec_" + "QUJD" * 6)
        )
        theirs = Outbox(client, namespace, 1)
        await theirs.ensure_group()
        messages = [_delivery(1000 + k, receiver.hook, 1) for k in range(30)]
        await theirs.put(messages)
        removed = Outbox(client, namespace, 1, reader=7)
        taken = await removed.read(">", 10, None)
        assert len(taken) == 10
        # Fresh entries of a consumer that may be alive are left alone.
        assert await Outbox(client, namespace, 1, reader=0).take_over_stale(60, 100) == []
        dispatcher = _local_dispatcher(Outbox(client, namespace, 0), store, take_over_after_s=0.5)
        before = REGISTRY.get_sample_value("wordcast_deliveries_taken_over_total") or 0.0
        await _deliver_all(dispatcher, theirs, messages, receiver)
        assert REGISTRY.get_sample_value("wordcast_deliveries_taken_over_total") == before + 10
        await client.aclose()

    asyncio.run(scenario())


def test_entries_of_a_matcher_gone_for_good_can_be_released_for_take_over_at_once(
    redis_url: str, namespace: str
) -> None:
    """Scaling down stops a matcher for good: what it left pending is made stale at once, so
    the next take-over pass delivers it instead of one half an hour later."""

    async def scenario() -> None:
        client = connect(redis_url)
        outbox = Outbox(client, namespace, 2)
        await outbox.ensure_group()
        await outbox.put([_delivery(2000 + k, "http://x/hook", 1) for k in range(12)])
        gone, alive = Outbox(client, namespace, 2, reader=2), Outbox(client, namespace, 2, reader=5)
        assert len(await gone.read(">", 7, None)) == 7
        assert len(await alive.read(">", 3, None)) == 3
        taker = Outbox(client, namespace, 2, reader=0)
        assert await taker.take_over_stale(1800, 100) == []
        assert await outbox.release("matcher-2", 1800) == 7
        taken = await taker.take_over_stale(1800, 100)
        assert len(taken) == 7  # the live consumer's three stay its own
        assert await outbox.release("matcher-2", 1800) == 0
        await client.aclose()

    asyncio.run(scenario())


def test_a_matcher_removed_by_scaling_down_hands_on_its_unfinished_deliveries_itself(
    redis_url: str, namespace: str
) -> None:
    """On its way out, matcher 2 releases what it left pending in every outbox, but only when
    the cluster wants fewer matchers and it holds nothing: a matcher that merely restarts keeps
    them for its successor (on Kubernetes nobody else would release them for half an hour)."""

    async def scenario() -> None:
        client = connect(redis_url)
        store = Store(client, namespace)
        state = MatcherState(
            MatcherSettings(redis_url=redis_url, namespace=namespace, ordinal=2), store
        )
        for ordinal in (0, 2):
            outbox = Outbox(client, namespace, ordinal)
            await outbox.ensure_group()
            await outbox.put(
                [_delivery(3000 + 10 * ordinal + k, "http://x/h", 1) for k in range(5)]
            )
            assert len(await Outbox(client, namespace, ordinal, reader=2).read(">", 4, None)) == 4
        taker = Outbox(client, namespace, 0, reader=0)

        await store.membership.want_matchers(3)
        assert await state.hand_on_if_removed() == 0  # still wanted: a restart
        await store.membership.want_matchers(2)
        await store.subscriptions.add(Subscription("held", "a b", ("a", "b"), "http://x/h", 2))
        assert await state.hand_on_if_removed() == 0  # not drained yet
        await store.subscriptions.delete("held")
        assert await taker.take_over_stale(1800, 100) == []
        assert await state.hand_on_if_removed() == 8  # four in each outbox
        assert len(await taker.take_over_stale(1800, 100)) == 4
        await state.dispatcher.close()
        await client.aclose()

    asyncio.run(scenario())


def test_an_attempt_ends_at_its_deadline_when_the_receiver_answers_a_byte_at_a_time(
    redis_url: str, namespace: str
) -> None:
    """Each byte comes well within the timeout, so only the attempt's deadline ends it: the
    message is retried and dead-lettered instead of holding its slot for ever."""

    async def dribble(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1000000\r\n\r\n")
        try:
            while True:
                writer.write(b"x")
                await writer.drain()
                await asyncio.sleep(0.05)
        except (ConnectionError, OSError):
            pass

    async def scenario() -> None:
        server = await asyncio.start_server(dribble, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = connect(redis_url)
        store = Store(client, namespace)
        hook = f"http://127.0.0.1:{port}/hook"
        await store.subscriptions.add(
            Subscription("id0", "a b", ("a", "b"), hook, 0, secret="whsec_" + "QUJD" * 6)
        )
        outbox = Outbox(client, namespace, 0)
        await outbox.ensure_group()
        await outbox.put([_delivery(0, hook, 1)])
        # A deadline of 0.6 s; a byte every 0.05 s never trips the 0.2 s timeout.
        dispatcher = _local_dispatcher(outbox, store, attempts=2, timeout_s=0.2)
        running = asyncio.create_task(dispatcher.run())
        started = time.monotonic()

        async def dead_lettered() -> int:
            return int(await client.xlen(outbox.dead_key("")))

        with contextlib.suppress(AssertionError):  # checked below
            await eventually_async(dead_lettered, 10, what="a dead letter")
        running.cancel()
        await dispatcher.close()
        server.close()
        [(_, letter)] = await client.xrange(outbox.dead_key(""))
        assert "the attempt took over 0.6 s" in letter["reason"]
        assert letter["attempts"] == "2"
        assert time.monotonic() - started < 5
        await client.aclose()

    asyncio.run(scenario())


def test_the_dispatchers_secrets_are_kept_until_rotated_deleted_or_lapsed(
    redis_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Secrets are read once and kept: a rotation (the epoch moves) or a deletion (its event)
    makes them read again, and a lapsed entry is pruned once the cache has grown."""
    monkeypatch.setattr(secrets_module, "PRUNE_FROM", 4)
    monkeypatch.setattr(secrets_module, "CHECK_S", 0.0)

    async def scenario() -> None:
        client = connect(redis_url)
        store = Store(client, namespace)
        secret, rotated = "whsec_" + "QUJD" * 6, "whsec_" + "REVG" * 6
        for j in range(12):
            await store.subscriptions.add(
                Subscription(f"id{j}", "a b", ("a", "b"), "http://x/hook", 0, secret=secret)
            )
        secrets = SigningSecrets(store)
        assert await secrets.signers_of(["gone"]) == {"gone": None}
        reads = 0
        counted = store.subscriptions.signing_secrets_until

        async def counting(sub_ids: list[str]) -> dict[str, tuple[list[str], float] | None]:
            nonlocal reads
            reads += 1
            return await counted(sub_ids)

        monkeypatch.setattr(store.subscriptions, "signing_secrets_until", counting)
        for _ in range(2):
            for j in range(9):
                [signer] = (await secrets.signers_of([f"id{j}"]))[f"id{j}"] or ()
                assert signer.key == Webhook(secret)._whsecret
        assert reads == 9  # each read once, then kept
        monkeypatch.setattr(secrets_module, "MAX_AGE_S", 0.1)  # for the entries read from now
        await store.subscriptions.rotate_secret("id1", rotated, time.time() + 60)
        signers = (await secrets.signers_of(["id1"]))["id1"] or ()
        keys = [signer.key for signer in signers]
        assert keys == [Webhook(rotated)._whsecret, Webhook(secret)._whsecret]
        assert reads == 10
        secrets.forget(["id2"])  # as the matcher does when the deletion's event arrives
        await secrets.signers_of(["id2"])
        assert reads == 11
        await secrets.signers_of([f"id{j}" for j in range(9, 12)])  # 5 entries kept
        await asyncio.sleep(0.2)  # every entry lapsed
        await secrets.signers_of(["id11"])
        assert reads == 13
        assert list(secrets._cache) == ["id11"]
        await client.aclose()

    asyncio.run(scenario())
