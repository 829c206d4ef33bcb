"""Routers log a bounded sample of analysed publications for the routing learner."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.helpers import AUTH, start_cluster, stop_cluster
from wordcast.corpus.workload import sample_posts
from wordcast.query.analysis import Analyser
from wordcast.query.languages import analyse_in_languages
from wordcast.storage import Store
from wordcast.storage.redis import connect


def _log(redis_url: str, namespace: str) -> list[tuple[float, tuple[str, ...]]]:
    async def read() -> list[tuple[float, tuple[str, ...]]]:
        client = connect(redis_url)
        try:
            return await Store(client, namespace).publication_log.read()
        finally:
            await client.aclose()

    return asyncio.run(read())


@pytest.mark.parametrize(
    ("rate", "max_length"), [("1.0", "100000"), ("0", "100000"), ("1.0", "50")]
)
def test_sampled_publications_are_logged_with_their_terms(
    redis_url: str, namespace: str, rate: str, max_length: str
) -> None:
    env = {
        "WORDCAST_ROUTER_PUBLICATION_LOG_RATE": rate,
        "WORDCAST_ROUTER_PUBLICATION_LOG_MAX": max_length,
    }
    cluster = start_cluster(redis_url, namespace, matchers=1, env=env)
    try:
        posts = sample_posts(300, seed=31, pool=50_000)
        for start in range(0, 300, 100):
            chunk = [{"id": p.id, "text": p.text} for p in posts[start : start + 100]]
            response = httpx.post(
                f"{cluster.router_url}/publications", json={"publications": chunk}, headers=AUTH
            )
            assert response.status_code == 202
    finally:
        stop_cluster(cluster)
    logged = _log(redis_url, namespace)
    # The terms routed: a post in another Snowball language has its own language's too.
    texts = [p.text for p in posts]
    routed, _ = analyse_in_languages(texts, [None] * len(texts), detect=True, analyser=Analyser())
    expected = [tuple(sorted(terms)) for terms in routed if terms]
    if rate == "0":
        assert logged == []
    elif max_length == "50":
        # Trimming is approximate (whole stream nodes), but the log stays far below 300.
        assert 50 <= len(logged) < 300
        assert [terms for _, terms in logged] == expected[-len(logged) :]
    else:
        assert [terms for _, terms in logged] == expected
        assert all(at > 0 for at, _ in logged)
