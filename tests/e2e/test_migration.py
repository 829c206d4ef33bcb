"""Mapping migrations against a real Redis: moves in batches, and the routers' version reports."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter

import pytest

from tests.e2e.support import DroppingServer, serving
from wordcast.corpus.files import pypi_posts
from wordcast.errors import MappingUnconfirmed, NotFound
from wordcast.ops.migration import BATCH, move_to, retire
from wordcast.ops.scaling import wait_settled
from wordcast.query.analysis import analyse
from wordcast.routing.mapping import HashMapping, LearnedMapping, copy_name
from wordcast.routing.placement import PATTERN_TOLERANCE, Placement, matchers_of, still_valid
from wordcast.services.router.settings import RouterSettings
from wordcast.services.router.state import RouterState
from wordcast.storage import Store
from wordcast.storage.events import EventFollower
from wordcast.storage.mappings import MappingStore
from wordcast.storage.records import Subscription
from wordcast.storage.redis import connect

MATCHERS = 6


def _corpus_terms(count: int) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    for _name, _month, text in pypi_posts():
        terms = sorted(analyse(text))
        if terms:
            found.append(tuple(terms[:4]))
        if len(found) == count:
            return found
    raise AssertionError("the corpus holds too few summaries")


def _learned(version: int, vocabulary: set[str], rng: random.Random) -> LearnedMapping:
    words = sorted(vocabulary)
    hot = set(rng.sample(words, 5))
    mapped = {w: rng.randrange(MATCHERS) for w in words if w not in hot}
    for word in hot:
        for copy in range(3):
            mapped[copy_name(word, copy)] = rng.randrange(MATCHERS)
    return LearnedMapping(version, MATCHERS, mapped, dict.fromkeys(hot, 3), dict.fromkeys(hot, 9))


async def _expected_word_maps(store: Store, ids: list[str]) -> list[Counter[str]]:
    expected = [Counter[str]() for _ in range(MATCHERS)]
    for sub_id in ids:
        sub = await store.subscriptions.get(sub_id)
        for matcher in matchers_of(sub.placements):
            expected[matcher].update(sub.terms)
    return expected


def test_a_migration_moves_every_subscription_in_batches_and_keeps_word_maps_exact(
    redis_url: str, namespace: str
) -> None:
    async def scenario() -> None:
        client = connect(redis_url)
        store, mappings = Store(client, namespace), MappingStore(client, namespace)
        terms = _corpus_terms(3 * BATCH)  # several batches
        old = HashMapping(MATCHERS, 0)
        for k, words in enumerate(terms):
            matcher = old(words[0])
            sub = Subscription(f"s{k}", " ".join(words), words, "http://x/hook", matcher)
            await store.subscriptions.add(sub._replace(placements=(Placement(matcher, 0),)))
        target = _learned(1, {t for words in terms for t in words}, random.Random(3))
        ids = [f"s{k}" for k in range(len(terms))]
        stale = [
            sub_id
            for sub_id, words in zip(ids, terms, strict=True)
            if not still_valid((Placement(old(words[0]), 0),), words, target)
        ]
        assert len(stale) > BATCH  # the scenario exercises more than one batch of real moves

        # Clients delete subscriptions while the migration runs: those moves must lose the race
        # cleanly (nothing moved, nothing counted) and the rest must still be moved.
        deleted = stale[BATCH // 2 :: 7]
        beats = 0

        async def keep_alive() -> None:
            nonlocal beats
            beats += 1
            if beats == 1:
                for sub_id in deleted:
                    await store.subscriptions.delete(sub_id)

        async def sync(_event_id: str) -> None:
            return None

        report = await move_to(store, mappings, target, 0, sync, keep_alive)
        live = [i for i in ids if i not in set(deleted)]
        assert report.scanned == len(ids)
        assert len(stale) - len(deleted) <= report.moved <= len(stale)
        assert beats >= len(ids) // BATCH
        for sub_id in live:
            sub = await store.subscriptions.get(sub_id)
            assert still_valid(sub.placements, sub.terms, target), sub
            assert any(p.until == 1 for p in sub.placements) == (sub_id in stale)
        expected = await _expected_word_maps(store, live)
        for matcher in range(MATCHERS):
            assert Counter(await store.word_maps.word_map(matcher)) == expected[matcher]
        assert (await mappings.state())[1:] == (1, (0, 1))  # v1 active, v0 still served

        retired = await retire(store, mappings, 1, MATCHERS, sync, keep_alive)
        # Exactly the live subscriptions that were moved had a placement for v0 alone to drop.
        assert retired.moved == len(set(live) & set(stale))
        for sub_id in live:
            sub = await store.subscriptions.get(sub_id)
            assert all(p.is_open for p in sub.placements)
            assert still_valid(sub.placements, sub.terms, target)
        expected = await _expected_word_maps(store, live)
        for matcher in range(MATCHERS):
            assert Counter(await store.word_maps.word_map(matcher)) == expected[matcher]
        await client.aclose()

    asyncio.run(scenario())


def test_a_router_that_cannot_report_its_mapping_version_stops_routing(
    redis_url: str, namespace: str
) -> None:
    """A migration retires a version once no live report names it; a router whose report may
    have lapsed must therefore refuse to route rather than use a possibly retired version."""

    async def scenario() -> None:
        settings = RouterSettings(
            redis_url=redis_url,
            namespace=namespace,
            environment="development",
            mapping_poll_s=0.05,
            matcher_timeout_s=0.5,
        )
        client = connect(redis_url)
        state = RouterState(settings, Store(client, namespace))
        versions = state.versions
        batch = [(None, "fast json parser for python")]
        try:
            with pytest.raises(MappingUnconfirmed, match="has not reported its mapping version"):
                await state.publishing.publish(batch, "dev")  # never reported yet

            reporting = asyncio.create_task(versions.report())
            await asyncio.sleep(0.12)
            ids, _ = await state.publishing.publish(
                batch, "dev"
            )  # no subscribed word: nothing is sent
            assert len(ids) == 1
            assert await versions.mappings.oldest_in_use() == 0
            key = f"{namespace}:router:{versions.router_id}"
            assert 0 < await client.pttl(key) <= versions.report_ttl_s * 1000
            # The report outlives the fence by a poll or two and a matcher's timeout: every batch
            # sent before the fence has finished before a migration can see the report gone.
            assert versions.report_ttl_s >= versions.report_fence_s + settings.matcher_timeout_s

            reporting.cancel()  # as if Redis were out of reach from now on
            await asyncio.gather(reporting, return_exceptions=True)
            await asyncio.sleep(versions.report_fence_s + 0.05)
            assert not versions.reported
            with pytest.raises(MappingUnconfirmed):
                await state.publishing.publish(batch, "dev")
        finally:
            await state.close()
            await client.aclose()

    asyncio.run(scenario())


def test_a_migration_to_fewer_matchers_empties_the_removed_ones_patterns_included(
    redis_url: str, namespace: str
) -> None:
    """Scaling 4 -> 2: every keyword subscription and pattern leaves matchers 2 and 3, the word
    maps, anchor maps and pattern loads stay exact throughout, and the anchor owners a router
    keeps from the events alone end where Redis is."""

    async def scenario() -> None:
        client = connect(redis_url)
        store, mappings = Store(client, namespace), MappingStore(client, namespace)
        follower, follower_owners = await _anchor_follower(store)
        anchors = [f"anchor{i}" for i in range(15)]
        terms, patterns = await _seed(store, 4, 600, [anchors[k % 15] for k in range(200)], 9)
        target = LearnedMapping(1, 2, {})  # stable hashing over two matchers
        # Deleted mid-migration: those moved already are held by two matchers at that moment.
        deleted = [p.id for p in patterns[2::10] + patterns[3::10]]
        deleted_while_moving = 0

        async def keep_alive() -> None:
            nonlocal deleted_while_moving
            for sub_id in deleted:
                with contextlib.suppress(NotFound):
                    sub, _ = await store.subscriptions.delete(sub_id)
                    deleted_while_moving += len(sub.matchers) == 2

        async def sync(_event_id: str) -> None:
            return None

        await move_to(store, mappings, target, 0, sync, keep_alive, span=4)
        assert deleted_while_moving > 0
        live_patterns = [p for p in patterns if p.id not in deleted]
        for pattern in live_patterns:
            stored = await store.subscriptions.get(pattern.id)
            if pattern.matcher < 2:  # untouched: its matcher is still there
                assert stored.placements == ()
                assert stored.matcher == pattern.matcher
            else:  # served by its old matcher before v1 and by a remaining one from v1 on
                old_one, new_one = stored.placements
                assert (old_one.matcher, old_one.until) == (pattern.matcher, 1)
                assert new_one.first == 1
                assert new_one.is_open
                assert new_one.matcher < 2
        await retire(store, mappings, 1, 4, sync, keep_alive)
        for matcher in (2, 3):
            assert await store.membership.held_by(matcher) == 0
            assert await store.word_maps.word_map(matcher) == {}
            assert await store.word_maps.anchor_map(matcher) == {}
        held = await _assert_exact(
            store, live_patterns, anchors, len(terms), 2, follower, follower_owners
        )
        assert all(m[0] < 2 for m in held.values())
        await client.aclose()

    asyncio.run(scenario())


def test_a_retirement_stopped_midway_is_finished_by_the_next_router(
    redis_url: str, namespace: str
) -> None:
    """Scaling 4 -> 2, the router retiring v0 stops after its first batch of moves. The window
    is "1 1" already, so only the mark in Redis says that matchers 2 and 3 still hold
    placements; a router's next look at the versions finds it and finishes."""

    async def scenario() -> None:
        client = connect(redis_url)
        store, mappings = Store(client, namespace), MappingStore(client, namespace)
        anchors = [f"anchor{i}" for i in range(15)]
        terms, patterns = await _seed(store, 4, 600, [anchors[k % 15] for k in range(200)], 9)
        version = await mappings.write(2, {})  # stable hashing over two matchers

        async def nothing(_event_id: str | None = None) -> None:
            return None

        await move_to(store, mappings, await mappings.load(version, 4), 0, nothing, nothing, span=4)

        async def stops() -> None:
            raise RuntimeError("the router stopped")

        with pytest.raises(RuntimeError, match="the router stopped"):
            await retire(store, mappings, version, 4, nothing, stops, batch=50)
        assert (await mappings.state())[1:] == (version, (version, version))
        assert await mappings.retiring() == version
        left = [await store.membership.held_by(m) for m in (2, 3)]
        assert sum(left) > 0, "the first batch cannot have dropped every old placement"

        async with serving(DroppingServer()) as matcher_url:  # answers every catch-up
            settings = RouterSettings(
                redis_url=redis_url,
                namespace=namespace,
                environment="development",
                matcher_urls=[matcher_url] * 4,
            )
            state = RouterState(settings, Store(client, namespace))
            try:
                await state.versions.step()
            finally:
                await state.close()
        assert await mappings.retiring() is None
        for matcher in (2, 3):
            assert await store.membership.held_by(matcher) == 0
            assert await store.word_maps.word_map(matcher) == {}
            assert await store.word_maps.anchor_map(matcher) == {}
        for sub_id in [f"s{k}" for k in range(len(terms))] + [p.id for p in patterns]:
            assert all(p.is_open for p in (await store.subscriptions.get(sub_id)).placements)
        await client.aclose()

    asyncio.run(scenario())


def test_wordcast_scale_waits_for_the_old_placements_to_be_dropped(
    redis_url: str, namespace: str
) -> None:
    """`wordcast scale` reports the cluster settled only once step 4 is done, not as soon as
    the window is narrowed (which comes first)."""

    async def scenario() -> None:
        client = connect(redis_url)
        mappings = MappingStore(client, namespace)
        version = await mappings.write(2, {})
        await mappings.activate(version)
        await mappings.narrow_window(version)  # a retirement under way
        said: list[str] = []
        with pytest.raises(TimeoutError, match=f"mapping v{version} did not settle"):
            await wait_settled(mappings, version, 0.5, said.append)
        assert said == [
            f"mapping v{version}: active; the placements older versions needed are being dropped…"
        ]
        await mappings.retired(version)
        await wait_settled(mappings, version, 0.5, said.append)
        await client.aclose()

    asyncio.run(scenario())


async def _anchor_follower(
    store: Store,
) -> tuple[EventFollower, dict[str, Counter[int]]]:
    """A follower keeping, from the events alone, how many patterns of each anchor each matcher
    holds (as a router keeps its anchor owners)."""
    owners_by_anchor: dict[str, Counter[int]] = {}

    def apply(events: object) -> None:
        for event in events:  # type: ignore[attr-defined]
            owners = owners_by_anchor.setdefault(event.subscription.anchor, Counter())
            owners.update(event.anchor_joined)
            owners.subtract(event.anchor_left)

    follower = EventFollower(store.events, _nothing, apply)
    await follower.start()
    return follower, owners_by_anchor


async def _seed(
    store: Store, matchers: int, keywords: int, anchors: list[str], seed: int
) -> tuple[list[tuple[str, ...]], list[Subscription]]:
    """Corpus keyword subscriptions placed by hash over ``matchers``, and a pattern per anchor
    given (shuffled), spread round-robin."""
    old = HashMapping(matchers, 0)
    terms = _corpus_terms(keywords)
    for k, words in enumerate(terms):
        matcher = old(words[0])
        sub = Subscription(f"s{k}", " ".join(words), words, "http://x/hook", matcher)
        await store.subscriptions.add(sub._replace(placements=(Placement(matcher, 0),)))
    shuffled = random.Random(seed).sample(anchors, len(anchors))
    patterns = [
        Subscription(f"p{i}", "", (), "http://x/hook", i % matchers, 0.0, f"x?{a}*", a)
        for i, a in enumerate(shuffled)
    ]
    for pattern in patterns:
        await store.subscriptions.add(pattern)
    return terms, patterns


async def _assert_exact(
    store: Store,
    live_patterns: list[Subscription],
    anchors: list[str],
    keywords: int,
    matchers: int,
    follower: EventFollower,
    follower_owners: dict[str, Counter[int]],
) -> dict[str, list[int]]:
    """After a migration and its retirement: each pattern on one matcher; anchor maps, pattern
    loads and word maps exactly what the records say; the anchor owners a router rebuilds from
    the events alone equal to Redis's (for ``anchors``, those of deleted patterns included).
    Returns where each pattern is."""
    held = {p.id: (await store.subscriptions.get(p.id)).matchers for p in live_patterns}
    assert all(len(m) == 1 for m in held.values())
    for matcher in range(matchers):
        here = [p.anchor for p in live_patterns if held[p.id] == [matcher]]
        assert await store.word_maps.anchor_map(matcher) == dict(Counter(here))
    loads = Counter(held[p.id][0] for p in live_patterns)
    assert await store.word_maps.pattern_loads() == dict(loads)
    assert sum(loads.values()) == len(live_patterns)
    expected = await _expected_word_maps(store, [f"s{k}" for k in range(keywords)])
    for matcher in range(matchers):
        assert Counter(await store.word_maps.word_map(matcher)) == expected[matcher]
    await follower.catch_up()
    owners = {a: {m for m, n in c.items() if n > 0} for a, c in follower_owners.items()}
    for anchor in anchors:
        redis_owners = {m for m in range(matchers) if anchor in await store.word_maps.anchor_map(m)}
        assert owners.get(anchor, set()) == redis_owners, anchor
    return held


def test_a_migration_to_more_matchers_gives_them_whole_anchor_groups_of_patterns(
    redis_url: str, namespace: str
) -> None:
    """Scaling 2 -> 4: the new matchers hold no pattern until the migration moves whole anchor
    groups onto them, with versioned placements, until no matcher holds more than its share."""

    async def scenario() -> None:
        client = connect(redis_url)
        store, mappings = Store(client, namespace), MappingStore(client, namespace)
        follower, follower_owners = await _anchor_follower(store)
        anchors = [f"anchor{k}" for k in range(40)]
        terms, patterns = await _seed(store, 2, 300, anchors * 6, 11)

        async def sync(_event_id: str) -> None:
            return None

        await move_to(store, mappings, LearnedMapping(1, 4, {}), 0, sync, _nothing, span=4)
        moved = {}
        for pattern in patterns:
            stored = await store.subscriptions.get(pattern.id)
            if stored.placements:  # served by its old matcher before v1, a new one from v1 on
                old_one, new_one = stored.placements
                assert (old_one.matcher, old_one.until) == (pattern.matcher, 1)
                assert new_one.first == 1
                assert new_one.is_open
                assert new_one.matcher >= 2
                moved[pattern.id] = new_one.matcher
        # Whole groups: a moved pattern's anchor left its old matcher entirely.
        for pattern in patterns:
            group = [
                p for p in patterns if (p.matcher, p.anchor) == (pattern.matcher, pattern.anchor)
            ]
            assert len({moved.get(p.id) for p in group}) == 1
        await retire(store, mappings, 1, 4, sync, _nothing)
        await _assert_exact(store, patterns, anchors, len(terms), 4, follower, follower_owners)
        loads = await store.word_maps.pattern_loads()
        assert min(loads.get(m, 0) for m in range(4)) > 0
        assert max(loads.values()) <= PATTERN_TOLERANCE * len(patterns) / 4, loads
        await client.aclose()

    asyncio.run(scenario())


async def _nothing() -> None:
    return None
