"""Backfill (issue 13, part 5): a new subscription asks for the matches of the last minutes of
publications, which a router keeps when told to; they arrive marked as backfill beside the live
ones, and together they are exactly the oracle's matches, judged on every post of both."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import httpx

from tests.e2e.support import check_exact, delivered_after
from tests.helpers import (
    AUTH,
    Receiver,
    RunningCluster,
    eventually,
    extra_router,
    internal_token,
    wordcast_cli,
)
from wordcast.client import RouterClient
from wordcast.corpus.workload import Post, post_queries, sample_posts
from wordcast.query.analysis import analyse, term_positions
from wordcast.query.boolean import evaluate, parse_tree


def _publish(router: str, posts: list[Post]) -> None:
    async def run() -> None:
        async with RouterClient(router, concurrency=4) as client:
            await client.publish_many([{"id": p.id, "text": p.text} for p in posts], progress=False)

    asyncio.run(run())


def _backfills(cluster: RunningCluster, redis_url: str, ids: set[str]) -> list[dict[str, Any]]:
    """The matchers' backfills of ``ids``, as they show them to routers alone; their public
    /stats counts them without naming a subscription."""
    found = []
    token = internal_token(cluster, redis_url)
    for url in cluster.matcher_urls:
        backfills = httpx.get(
            f"{url}/internal/backfills", headers={"authorization": f"Bearer {token}"}, timeout=10
        ).json()
        found += [b for b in backfills if b["subscription_id"].split("~")[0] in ids]
        public = httpx.get(f"{url}/stats", timeout=10).json()["backfills"]
        assert "subscription_id" not in str(public)
        assert not set(ids) & set(str(public).split())
    return found


def test_a_new_subscription_gets_the_recent_matches_and_then_the_live_ones(
    cluster: RunningCluster, receiver: Receiver, redis_url: str
) -> None:
    rng = random.Random(1616)
    posts = [Post(f"back:{p.id}", p.text) for p in sample_posts(3_000, seed=1616)]
    before, after = posts[:2_000], posts[2_000:]
    words = post_queries(before, 40, seed=161, sizes=(1, 1, 2))
    written = [q if k % 4 else f"{q} OR ({rng.choice(words)} -python)" for k, q in enumerate(words)]
    # A short matcher timeout: the backfill window closes that long after each subscription.
    with extra_router(cluster, redis_url, backfill_s="600", matcher_timeout_s="3") as router:
        api = httpx.Client(base_url=router, headers=AUTH, timeout=30)
        _publish(router, before)
        offset = receiver.count()
        queries: dict[str, str] = {}
        for query in written:
            created = api.post(
                "/subscriptions",
                json={"query": query, "callback_url": receiver.hook, "backfill_minutes": 5},
            )
            assert created.status_code == 201, created.text
            answer = created.json()
            assert answer["backfill"]["until"] > answer["backfill"]["since"]
            queries[answer["id"]] = query
        # The command line asks as the API does.
        cli = wordcast_cli(
            "subscribe", "--backfill", "5", "--callback", receiver.hook, words[0], router=router
        )
        assert cli.returncode == 0, cli.stderr
        made = json.loads(cli.stdout)
        assert made["backfill"]["matchers"]
        queries[made["id"]] = words[0]
        _publish(router, after)

        trees = {sid: parse_tree(query) for sid, query in queries.items()}

        def oracle(of: list[Post]) -> set[tuple[str, str]]:
            return {
                (sid, post.id)
                for post in of
                for terms in [analyse(post.text)]
                for sid, tree in trees.items()
                if evaluate(tree, terms, term_positions(post.text))
            }

        backfilled, live = oracle(before), oracle(after)
        assert len(backfilled) > 100, len(backfilled)
        eventually(
            lambda: (
                all(b["state"] == "done" for b in _backfills(cluster, redis_url, set(queries)))
                and len(_backfills(cluster, redis_url, set(queries))) >= len(queries)
            ),
            60,
            0.5,
            "every backfill done",
        )
        delivered = delivered_after(cluster, receiver, offset, len(backfilled | live))
        check_exact([pair for pair in delivered if pair[0] in queries], backfilled | live)
        # The backfills found exactly the matches in the publications before.
        assert sum(b["matches"] for b in _backfills(cluster, redis_url, set(queries))) == len(
            backfilled
        )
        raw = httpx.get(f"{receiver.url}/deliveries/raw", timeout=10).json()
        assert any('"backfill":true' in r["body"] for r in raw) or len(raw) == 100

        # What cannot be backfilled is refused before anything is stored.
        too_far = api.post(
            "/subscriptions",
            json={"query": "apple", "callback_url": receiver.hook, "backfill_minutes": 11},
        )
        assert too_far.status_code == 422
        assert "keeps only the last 10 minutes" in too_far.text
        batch = api.post(
            "/subscriptions/batch",
            json={"subscriptions": [{"query": "apple", "backfill_minutes": 1}]},
        )
        assert batch.status_code == 422
        assert "backfill_minutes is for one subscription at a time" in batch.text
    off = httpx.post(
        f"{cluster.router_url}/subscriptions",
        json={"query": "apple", "callback_url": receiver.hook, "backfill_minutes": 1},
        headers=AUTH,
        timeout=10,
    )
    assert off.status_code == 422
    assert "keeps no recent publications" in off.text
