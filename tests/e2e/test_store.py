"""The Redis layer against a real Redis: atomic word maps, events, and replicas that converge."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter

import pytest

from wordcast.errors import NotFound
from wordcast.routing.mapping import WordHolders
from wordcast.routing.placement import Placement, encode
from wordcast.services.router.routing_table import RoutingTable
from wordcast.storage import Store
from wordcast.storage.events import EventFollower
from wordcast.storage.records import Subscription, SubscriptionEvent
from wordcast.storage.redis import connect


def _sub(i: int, terms: tuple[str, ...], matcher: int) -> Subscription:
    return Subscription(f"id{i}", " ".join(terms), tuple(sorted(terms)), "http://x/hook", matcher)


async def _word_maps(store: Store, matchers: int) -> tuple[dict[str, int], list[dict[str, int]]]:
    words: Counter[str] = Counter()
    for keys in await store.shards.keys():  # s(W) is the sum of the shards' shares
        words.update({w: int(c) for w, c in (await store._client.hgetall(keys.words)).items()})
    return dict(words), [await store.word_maps.word_map(i) for i in range(matchers)]


def test_concurrent_adds_and_deletes_keep_word_counts_exact(redis_url: str, namespace: str) -> None:
    async def scenario() -> None:
        clients = [connect(redis_url) for _ in range(4)]
        stores = [Store(c, namespace) for c in clients]
        rng = random.Random(5)
        vocab = [f"w{i}" for i in range(30)]
        subs = [
            _sub(i, tuple(rng.sample(vocab, rng.randint(1, 4))), rng.randint(0, 2))
            for i in range(400)
        ]
        await asyncio.gather(*(stores[i % 4].subscriptions.add(s) for i, s in enumerate(subs)))
        deleted = subs[::3]
        await asyncio.gather(
            *(stores[i % 4].subscriptions.delete(s.id) for i, s in enumerate(deleted))
        )
        live = [s for s in subs if s not in deleted]

        words, per_matcher = await _word_maps(stores[0], 3)
        assert words == dict(Counter(t for s in live for t in s.terms))
        for m in range(3):
            assert per_matcher[m] == dict(
                Counter(t for s in live if s.matcher == m for t in s.terms)
            )
        assert await stores[0].subscriptions.count() == len(live)
        with pytest.raises(NotFound):
            await stores[0].subscriptions.get(deleted[0].id)
        assert (await stores[0].subscriptions.get(live[0].id)).terms == live[0].terms
        for client in clients:
            await client.aclose()

    asyncio.run(scenario())


def test_batch_deletes_racing_moves_and_single_deletes_leave_exact_counts(
    redis_url: str, namespace: str
) -> None:
    """delete_many takes keyword subscriptions, boolean ones with their alternatives' records and
    patterns, while other clients move and delete some of the same records under it."""

    async def scenario() -> None:
        clients = [connect(redis_url) for _ in range(3)]
        batch, mover, single = (Store(c, namespace) for c in clients)
        rng = random.Random(8)
        vocab = [f"v{i}" for i in range(25)]
        subs: list[Subscription] = []
        for i in range(240):
            there = sorted(rng.sample(range(4), rng.randint(1, 2)))
            placed = tuple(Placement(m, 0) for m in there)
            if i % 6 == 5:
                subs.append(
                    Subscription(f"b{i}", "", (), "http://x/hook", there[0], 0.0, "ab*cd", "abc")
                )
                continue
            boolean = i % 3 == 0  # its alternatives are records too (as its query says)
            for part in range(1 + boolean * rng.randint(1, 3)):
                terms = tuple(sorted(rng.sample(vocab, rng.randint(1, 3))))
                sub_id = f"b{i}" if part == 0 else f"b{i}~{part}"
                sub = _sub(0, terms, there[0])._replace(id=sub_id, placements=placed)
                subs.append(sub._replace(query=f"{sub.query} OR w{i}") if boolean else sub)
        for sub in subs:
            await batch.subscriptions.add(sub)
        parents = [sub.id for sub in subs if "~" not in sub.id]
        doomed, spared = parents[: len(parents) * 2 // 3], parents[len(parents) * 2 // 3 :]
        keyword = [s for s in subs if not s.is_pattern and s.id.split("~")[0] in doomed]

        async def move_some() -> None:
            for sub in rng.sample(keyword, 40):
                try:
                    current = await mover.subscriptions.get(sub.id)
                except NotFound:  # the batch was first
                    continue
                there = sorted(rng.sample(range(4), rng.randint(1, 2)))
                await mover.subscriptions.move(current, [Placement(m, 0) for m in there])

        async def delete_some() -> None:
            for sub_id in doomed[::7]:
                with contextlib.suppress(NotFound):  # the batch was first
                    await single.subscriptions.delete(sub_id)

        (last_event, matchers), _, _ = await asyncio.gather(
            batch.subscriptions.delete_many(doomed + doomed[:5]), move_some(), delete_some()
        )
        live = [s for s in subs if s.id.split("~")[0] in spared]
        assert last_event is not None
        assert matchers <= set(range(4))
        assert matchers
        for sub_id in doomed:
            with pytest.raises(NotFound):
                await batch.subscriptions.get(sub_id)
        left = {s.id for s in await _all_records(batch)}
        assert left == {s.id for s in live}
        stored = [await batch.subscriptions.get(s.id) for s in live]
        assert await batch.subscriptions.count() == sum(
            len(set(s.matchers)) for s in stored
        )  # placements
        words, per_matcher = await _word_maps(batch, 4)
        assert words == dict(Counter(t for s in stored for t in s.terms))
        for m in range(4):
            assert per_matcher[m] == dict(
                Counter(t for s in stored if m in s.matchers for t in s.terms)
            )
        assert await batch.word_maps.pattern_loads() == dict(
            Counter(m for s in stored if s.is_pattern for m in s.matchers)
        )
        assert await batch.subscriptions.delete_many([doomed[0]]) == (None, set())
        for client in clients:
            await client.aclose()

    asyncio.run(scenario())


async def _all_records(store: Store) -> list[Subscription]:
    found = []
    for matcher in range(4):
        async for page in store.word_maps.placed_on(matcher):
            found += page
    return list({s.id: s for s in found}.values())


def test_concurrent_pattern_adds_and_deletes_keep_anchor_maps_exact(
    redis_url: str, namespace: str
) -> None:
    async def scenario() -> None:
        clients = [connect(redis_url) for _ in range(4)]
        stores = [Store(c, namespace) for c in clients]
        rng = random.Random(6)
        anchors = [f"anchor {i}" for i in range(12)]  # anchors may hold spaces
        subs = [
            Subscription(f"p{i}", "", (), "http://x/hook", rng.randint(0, 2), 0.0, f"x?{a}*y", a)
            for i, a in enumerate(rng.choice(anchors) for _ in range(300))
        ]
        await asyncio.gather(*(stores[i % 4].subscriptions.add(s) for i, s in enumerate(subs)))
        deleted = subs[::4]
        await asyncio.gather(
            *(stores[i % 4].subscriptions.delete(s.id) for i, s in enumerate(deleted))
        )
        live = [s for s in subs if s not in deleted]
        for m in range(3):
            assert await stores[0].word_maps.anchor_map(m) == dict(
                Counter(s.anchor for s in live if s.matcher == m)
            )
        assert await stores[0].word_maps.pattern_loads() == dict(Counter(s.matcher for s in live))
        assert await stores[0].word_maps.subscribed_words() == set()  # patterns leave s(W) alone
        stored = await stores[0].subscriptions.get(live[0].id)
        assert (stored.pattern, stored.anchor, stored.is_pattern) == (
            live[0].pattern,
            live[0].anchor,
            True,
        )
        for client in clients:
            await client.aclose()

    asyncio.run(scenario())


def test_duplicate_id_is_refused_and_changes_nothing(redis_url: str, namespace: str) -> None:
    async def scenario() -> None:
        client = connect(redis_url)
        store = Store(client, namespace)
        await store.subscriptions.add(_sub(1, ("a", "b"), 0))
        before = await _word_maps(store, 1), await store.events.last_event_id()
        with pytest.raises(ValueError, match="already exists"):
            await store.subscriptions.add(_sub(1, ("c",), 0))
        assert (await _word_maps(store, 1), await store.events.last_event_id()) == before
        await client.aclose()

    asyncio.run(scenario())


def test_follower_replica_converges_while_changes_race_its_start(
    redis_url: str, namespace: str
) -> None:
    """A replica that starts while writers are busy ends with exactly the committed state."""

    async def scenario() -> None:
        writer_client, reader_client = connect(redis_url), connect(redis_url)
        writer = Store(writer_client, namespace)
        reader = Store(reader_client, namespace)
        replica: dict[str, tuple[str, ...]] = {}
        # Words are born and die in one shard's share of s(W): a shard's events keep its part.
        words: list[set[str]] = []

        async def snapshot() -> None:
            replica.clear()
            async for page in reader.word_maps.placed_on(0):
                replica.update({s.id: s.terms for s in page})
            words[:] = [
                set(await reader_client.hkeys(keys.words)) for keys in await reader.shards.keys()
            ]

        def apply(events: list[SubscriptionEvent]) -> None:
            for e in events:
                if e.op == "add":
                    replica[e.subscription.id] = e.subscription.terms
                    words[e.shard].update(e.words)
                else:
                    replica.pop(e.subscription.id, None)
                    words[e.shard].difference_update(e.words)

        follower = EventFollower(reader.events, snapshot, apply, block_ms=50)
        rng = random.Random(11)

        async def churn() -> None:
            live: list[str] = []
            for i in range(600):
                if live and rng.random() < 0.4:
                    await writer.subscriptions.delete(live.pop(rng.randrange(len(live))))
                else:
                    await writer.subscriptions.add(
                        _sub(i, (f"t{rng.randint(0, 40)}", f"u{rng.randint(0, 5)}"), 0)
                    )
                    live.append(f"id{i}")
                if i % 50 == 0:
                    await asyncio.sleep(0)

        task = asyncio.create_task(follower.run())
        await churn()
        await follower.catch_up(until=await writer.events.last_event_id())
        committed = {}
        async for page in writer.word_maps.placed_on(0):
            committed.update({s.id: s.terms for s in page})
        assert replica == committed
        assert set().union(*words) == await writer.word_maps.subscribed_words()
        task.cancel()
        await writer_client.aclose()
        await reader_client.aclose()

    asyncio.run(scenario())


def test_routers_replica_of_who_holds_each_word_converges_under_adds_deletes_and_moves(
    redis_url: str, namespace: str
) -> None:
    """The held/dropped words that events name keep a WordHolders replica equal to the word maps
    H(i) in Redis, while subscriptions on several matchers come, go and move under it."""

    async def scenario() -> None:
        writer_client, reader_client = connect(redis_url), connect(redis_url)
        writer = Store(writer_client, namespace)
        reader = Store(reader_client, namespace)
        replica = RoutingTable()  # the router's
        matchers = 4

        async def snapshot() -> None:
            await replica.load(reader, matchers)

        follower = EventFollower(reader.events, snapshot, replica.apply, block_ms=50)
        rng = random.Random(17)

        async def churn() -> None:
            live: list[str] = []
            for i in range(500):
                roll = rng.random()
                if live and roll < 0.3:
                    await writer.subscriptions.delete(live.pop(rng.randrange(len(live))))
                elif live and roll < 0.55:
                    sub = await writer.subscriptions.get(rng.choice(live))
                    there = rng.sample(range(matchers), rng.randint(1, 2))
                    placements = [Placement(m, 0) for m in sorted(there)]
                    await writer.subscriptions.move(sub, placements)
                else:
                    terms = tuple(sorted({f"t{rng.randint(0, 30)}" for _ in range(3)}))
                    there = sorted(rng.sample(range(matchers), rng.randint(1, 2)))
                    sub = _sub(i, terms, there[0])._replace(
                        placements=tuple(Placement(m, 0) for m in there)
                    )
                    await writer.subscriptions.add(sub)
                    live.append(sub.id)
                if i % 40 == 0:
                    await asyncio.sleep(0.01)

        task = asyncio.create_task(follower.run())
        await churn()
        await follower.catch_up(until=await writer.events.last_event_id())
        expected = WordHolders()
        for matcher in range(matchers):
            expected.hold(matcher, await writer.word_maps.word_map(matcher))
        assert replica.held == expected
        assert len(expected) > 10
        assert set(replica.held) == await writer.word_maps.subscribed_words()
        task.cancel()
        await writer_client.aclose()
        await reader_client.aclose()

    asyncio.run(scenario())


def test_an_event_written_before_events_named_held_words_counts_every_word_as_held(
    redis_url: str, namespace: str
) -> None:
    """During a rolling upgrade an older router writes events without ``held``: a reader routes
    a little more for them, never less."""

    async def scenario() -> None:
        client = connect(redis_url)
        store = Store(client, namespace)
        placements = encode((Placement(1, 0, 3), Placement(2, 3)))
        old = {"sub": "old", "terms": "a b", "callback_url": "http://x/hook", "query": "a b"}
        old |= {"matcher": "2", "words": "a b", "placements": placements}
        await client.xadd(store.keys.events, old | {"op": "add"})
        await client.xadd(store.keys.events, old | {"op": "move"})
        await client.xadd(store.keys.events, old | {"op": "del"})
        add, move, delete = (await store.events.events_after("0-0"))[0]  # shard 0: the namespace
        assert dict(add.held) == dict(move.held) == {1: ("a", "b"), 2: ("a", "b")}
        assert delete.held == delete.dropped == ()  # stale holders cost spread, not matches
        await client.aclose()

    asyncio.run(scenario())


def test_a_matchers_snapshot_reads_every_record_once_in_pages_and_skips_the_deleted(
    redis_url: str, namespace: str
) -> None:
    """``placed_on`` reads ahead of its caller: every field round-trips (quotes, NUL, any
    script), a record deleted while the pages are read is skipped, and none comes twice."""

    async def scenario() -> None:
        store = Store(connect(redis_url), namespace)
        subs = [
            Subscription(
                f"k{i}",
                f'"q{i}" \x00 Ünïcödé ✓ {i}',
                (f"t{i}", "shared"),
                "http://x/hook",
                0,
                1_700_000_000.5,
                tenant=f"tenant{i % 3}",
                stream="news" if i % 4 == 0 else "",
                tag=f"tag ✓ {i}" if i % 3 == 0 else "",
            )
            for i in range(40)
        ] + [
            Subscription(f"p{i}", "", (), "http://x/hook", 0, 0.0, f"x?y{i}*z", f"y{i}", tag="w")
            for i in range(10)
        ]
        for sub in subs:
            await store.subscriptions.add(sub)
        stored = {s.id: (await store.subscriptions.get(s.id))._replace(secret="") for s in subs}

        read = [s for page in [p async for p in store.word_maps.placed_on(0, page=7)] for s in page]
        assert sorted(s.id for s in read) == sorted(stored)
        assert all(s == stored[s.id] for s in read)

        seen: list[Subscription] = []
        async for page in store.word_maps.placed_on(0, page=7):
            if not seen:  # the rest goes now: the pages not read ahead yet must skip it
                for sub_id in set(stored) - {s.id for s in page}:
                    await store.subscriptions.delete(sub_id)
            seen += page
        assert len({s.id for s in seen}) == len(seen) < len(stored)
        assert all(s == stored[s.id] for s in seen)

    asyncio.run(scenario())


def test_a_batch_is_one_entry_whose_events_a_follower_reads_like_single_adds(
    redis_url: str, namespace: str
) -> None:
    """ADD_MANY stores a batch in one script: one stream entry, each add's event in it (the
    words born and held as one script each would name them), refusing duplicates and what is
    over the tenant's limit one by one."""

    async def scenario() -> None:
        client = connect(redis_url)
        store = Store(client, namespace)
        if len(await store.shards.keys()) > 1:
            pytest.skip("several shards: a batch is an entry in each (the next test covers them)")
        await store.subscriptions.add(_sub(0, ("lion", "zebra"), 1))
        batch = [_sub(1, ("okapi", "zebra"), 0), _sub(0, ("x", "y"), 0)]
        batch += [_sub(k, ("lion", f"w{k}"), 1) for k in range(2, 6)]
        answers = await store.subscriptions.add_many(batch, tenant_limit=5)
        stored = [a for a in answers if isinstance(a, str)]
        assert len(set(stored)) == 1, "one event for the batch"
        assert isinstance(answers[1], ValueError), "id0 exists"
        assert "limit" in str(answers[5]), "the sixth would be over the limit of 5"
        shards = await store.events.events_after("0-0")
        adds = [e for events in shards for e in events if e.id == stored[0]]
        assert [e.subscription.id for e in adds] == ["id1", "id2", "id3", "id4"]
        assert adds[0].words == ("okapi",)  # zebra was born by id0's own add
        assert adds[0].held == ((0, ("okapi", "zebra")),)
        assert adds[1].held == ((1, ("w2",)),)
        assert adds[1].subscription == batch[2]._replace(placements=(Placement(1, 0),))
        await client.aclose()

    asyncio.run(scenario())


def test_a_batch_names_the_words_born_and_held_as_adding_one_by_one_would(
    redis_url: str, namespace: str
) -> None:
    """ADD_MANY changes each count once for the batch; each add's event still names the words
    that its own add would have brought into s(W) and into each H(i), replayed here one by one
    from the counts before the batch, shard by shard."""

    async def scenario() -> None:
        client = connect(redis_url)
        store = Store(client, namespace)
        rng = random.Random(41)
        vocab = [f"v{i}" for i in range(25)]
        for k in range(20):  # some words counted already
            await store.subscriptions.add(_sub(k, tuple(rng.sample(vocab, 2)), k % 2))
        shards = await store.shards.keys()
        counts = []
        for keys in shards:
            words = {w: int(c) for w, c in (await client.hgetall(keys.words)).items()}
            held = [
                {w: int(c) for w, c in (await client.hgetall(keys.matcher_words(m))).items()}
                for m in range(3)
            ]
            counts.append((Counter(words), [Counter(h) for h in held]))
        batch = [
            _sub(k, tuple(sorted(rng.sample(vocab, rng.randint(1, 3)))), rng.randint(0, 1))
            for k in range(20, 220)
        ]
        batch = [  # some on two matchers
            sub._replace(placements=(Placement(sub.matcher, 0, 5), Placement(2, 5)))
            if k % 7 == 0
            else sub
            for k, sub in enumerate(batch)
        ]
        answers = await store.subscriptions.add_many(batch)
        assert all(isinstance(a, str) for a in answers)
        events = {
            e.subscription.id: e
            for shard in await store.events.events_after("0-0")
            for e in shard
            if e.op == "add"
        }
        for sub in batch:
            words, held = counts[await store.shards.of(sub.id)]
            born = tuple(t for t in sub.terms if words[t] == 0)
            words.update(sub.terms)
            new_on = []
            for m in sub.matchers:
                new = tuple(t for t in sub.terms if held[m][t] == 0)
                held[m].update(sub.terms)
                if new:
                    new_on.append((m, new))
            event = events[sub.id]
            assert (event.words, event.held) == (born, tuple(new_on)), sub.id
        assert await _word_maps(store, 3) == (
            dict(sum((w for w, _ in counts), Counter())),
            [dict(sum((h[m] for _, h in counts), Counter())) for m in range(3)],
        )
        await client.aclose()

    asyncio.run(scenario())


def test_the_event_stream_is_trimmed_to_what_every_reader_has_read(
    redis_url: str, namespace: str
) -> None:
    """Each follower's recorded progress holds the stream; one silent for longer than it is
    kept for is forgotten, and the rest is trimmed."""

    async def scenario() -> None:
        client = connect(redis_url)
        store = Store(client, namespace)
        shards = await store.shards.keys()
        if len(shards) > 1:
            pytest.skip("several shards: each is trimmed by the same script as one")
        [keys] = shards
        for k in range(300):
            await store.subscriptions.add(_sub(k, ("w", f"t{k}"), 0))
        ids = [entry_id for entry_id, _ in await client.xrange(keys.events)]
        await store.events.record_progress("slow", ids[99], 60)
        await store.events.record_progress("fast", ids[-1], 60)
        left = await client.xrange(keys.events)
        assert left[0][0] <= ids[99], "the slow reader's unread entries stay"
        assert len(left) >= 200
        await store.events.record_progress("slow", ids[-1], 60)
        await store.events.record_progress("fast", ids[-1], 60)
        assert len(await client.xrange(keys.events)) < 150, "read by both: trimmed"
        for k in range(300, 400):
            await store.subscriptions.add(_sub(k, ("w", f"t{k}"), 0))
        await store.events.record_progress("fast", (await store.events.last_event_id()), 1)
        await asyncio.sleep(2.1)  # the slow reader says nothing for longer than it is kept for
        await store.events.record_progress("fast", (await store.events.last_event_id()), 1)
        assert await client.hkeys(keys.event_readers) == ["fast"]
        assert len(await client.xrange(keys.events)) <= 100, "trimmed past the forgotten reader"
        await client.aclose()

    asyncio.run(scenario())


def test_a_batch_delete_of_a_record_moved_since_it_was_read_deletes_it_where_it_is_now(
    redis_url: str, namespace: str
) -> None:
    """The record moves between delete_many's read and its script: the script leaves it (its
    placements changed), and it is deleted again as it now is, so no count is left behind."""

    async def scenario() -> None:
        reader, mover = connect(redis_url), connect(redis_url)
        store, other = Store(reader, namespace), Store(mover, namespace)
        subs = [_sub(k, ("okapi", f"w{k}"), 0) for k in range(3)]
        for sub in subs:
            await store.subscriptions.add(sub)
        part = (await store.subscriptions.parts())[await store.shards.of("id1")]
        read = part.records_of

        async def read_then_move(ids: list[str]) -> list[dict[str, str]]:
            records = await read(ids)
            if "id1" in ids:
                moved = await other.subscriptions.get("id1")
                await other.subscriptions.move(moved, [Placement(2, 0)])
            return records

        part.records_of = read_then_move  # type: ignore[method-assign]
        await store.subscriptions.delete_many(["id0", "id1", "id2"])
        words, per_matcher = await _word_maps(store, 3)
        assert words == {}
        assert per_matcher == [{}, {}, {}]
        assert await store.subscriptions.count() == 0
        await reader.aclose()
        await mover.aclose()

    asyncio.run(scenario())


def test_every_add_and_move_event_carries_the_subscriptions_tag(
    redis_url: str, namespace: str
) -> None:
    """A matcher learns a subscription from its events: each add and move names its tag."""

    async def scenario() -> None:
        client = connect(redis_url)
        store = Store(client, namespace)
        keywords = Subscription("kt", "white house", ("white", "hous"), "u", 0, tag="ké")
        pattern = Subscription("pt", "", (), "u", 0, pattern="wh?te*", anchor="wh", tag="pé")
        await store.subscriptions.add(keywords)
        await store.subscriptions.add(pattern)
        for sub_id in ("kt", "pt"):
            stored = await store.subscriptions.get(sub_id)
            assert await store.subscriptions.move(stored, [Placement(1, 0)]) is not None
        events = [e for shard in await store.events.events_after("0-0") for e in shard]
        tags = [(e.op, e.subscription.id, e.subscription.tag) for e in events]
        assert sorted(tags) == [
            ("add", "kt", "ké"),
            ("add", "pt", "pé"),
            ("move", "kt", "ké"),
            ("move", "pt", "pé"),
        ]
        await client.aclose()

    asyncio.run(scenario())
