"""The outbox's Redis side against a real Redis: group acknowledgements and batched secrets."""

from __future__ import annotations

import asyncio
import time

from wordcast.errors import StoreUnavailable
from wordcast.outbox import GROUP, Acknowledgements, Message, Outbox
from wordcast.store import Subscription, SubscriptionStore, connect


class CountingOutbox(Outbox):
    """A real outbox that remembers the entries of each acknowledging round trip."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.round_trips: list[list[str]] = []

    async def ack(self, entry_ids: list[str]) -> None:  # type: ignore[override]
        self.round_trips.append(list(entry_ids))
        await super().ack(entry_ids)


def _message(k: int) -> Message:
    return Message((f"s{k}",), "t", "http://x/hook", f"msg_{k}", "{}", 1, time.time())


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
        store = SubscriptionStore(client, namespace)
        for k in range(3):
            sub = Subscription(f"id{k}", "a b", ("a", "b"), "http://x/hook", 0, secret=f"whsec_{k}")
            await store.add(sub)
        await store.rotate_secret("id1", "whsec_new", time.time() + 60)
        await store.rotate_secret("id2", "whsec_newer", time.time() - 1)  # grace already over
        found = await store.signing_secrets_of(["id0", "id1", "id2", "gone", "id0"])
        assert found == {
            "id0": ["whsec_0"],
            "id1": ["whsec_new", "whsec_1"],
            "id2": ["whsec_newer"],
            "gone": None,
        }
        assert await store.signing_secrets("id1") == found["id1"]
        await client.aclose()

    asyncio.run(scenario())
