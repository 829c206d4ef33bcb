"""Partitions (issue 11): Redis, two matchers and a router each on a test host of its own (a
network namespace, :mod:`tests.netns`), and a link between two of them cut while publications
stream in. The cluster refuses what it cannot promise (503s naming the problem), loses nothing it
acknowledged, delivers no match twice under different webhook-ids, and serves again within 10 s
of the link returning; the brute-force oracle judges what was delivered."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.helpers import AUTH, Publisher, eventually
from tests.netns import Host, HostNetwork, unavailable
from wordcast.client import RouterClient
from wordcast.corpus.workload import post_queries, sample_posts
from wordcast.local.redis_server import redis_ready, redis_server_argv
from wordcast.local.supervisor import free_port
from wordcast.query.analysis import analyse
from wordcast.testing.bruteforce import match_pairs

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=f"no test hosts: {unavailable()}")

CUT_S = 12.0  # how long a link stays cut: past the Redis write deadline and the matcher timeout
REFUSED_WITHIN_S = 11.0  # from the cut to the first refusal: no request is held for long
HEAL_WITHIN_S = 10.0
SERVICE_PORT = 8100  # every service on a host of its own, so all on the same port


@dataclass
class Deployment:
    network: HostNetwork
    redis: Host
    matchers: list[Host]
    router: Host
    receiver_url: str
    logs: Path

    @property
    def router_url(self) -> str:
        return f"http://{self.router.address}:{SERVICE_PORT}"

    @property
    def matcher_urls(self) -> list[str]:
        return [f"http://{host.address}:{SERVICE_PORT}" for host in self.matchers]

    def pending_deliveries(self) -> int:
        return sum(
            httpx.get(f"{url}/stats", timeout=5).json()["deliveries_pending"]
            for url in self.matcher_urls
        )

    def deliveries(self, offset: int) -> tuple[list[tuple[str, str]], list[str]]:
        answer = httpx.get(f"{self.receiver_url}/deliveries?offset={offset}", timeout=30).json()
        return [tuple(pair) for pair in answer["pairs"]], answer["webhook_ids"]

    def log_tails(self) -> str:
        return "\n".join(
            f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-30:])
            for log in sorted(self.logs.glob("*.log"))
        )


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    network = HostNetwork()
    logs = tmp_path_factory.mktemp("partitions")
    receiver = None
    try:
        redis_host = network.host("redis")
        matchers = [network.host(f"m{i}") for i in range(2)]
        router = network.host("router")
        data = logs / "redis-data"
        data.mkdir()
        argv = redis_server_argv(6379, str(data), appendfsync="everysec")
        argv[argv.index("--bind") + 1] = redis_host.address
        redis_host.spawn(argv, dict(os.environ), logs / "redis.log")
        redis_url = f"redis://{redis_host.address}:6379/0"
        eventually(redis_ready(redis_url), 30, 0.1, "Redis on its test host")

        common = dict(os.environ) | {
            "REDIS_URL": redis_url,
            "WORDCAST_NAMESPACE": f"partitions-{uuid.uuid4().hex[:6]}",
            "WORDCAST_CALLBACK_ALLOW": f"{network.prefix}.0/24",
            "PYTHONUNBUFFERED": "1",
        }
        deployment = Deployment(network, redis_host, matchers, router, "", logs)
        for ordinal, (host, url) in enumerate(zip(matchers, deployment.matcher_urls, strict=True)):
            env = common | {
                "WORDCAST_MATCHER_ORDINAL": str(ordinal),
                "WORDCAST_MATCHER_HOST": host.address,
                "WORDCAST_MATCHER_PORT": str(SERVICE_PORT),
                "WORDCAST_MATCHER_ADVERTISE_URL": url,
            }
            host.spawn([sys.executable, "-m", "wordcast", "matcher"], env, logs / f"m{ordinal}.log")
        env = common | {
            "WORDCAST_ROUTER_HOST": router.address,
            "WORDCAST_ROUTER_PORT": str(SERVICE_PORT),
            "WORDCAST_ROUTER_MATCHER_URLS": ",".join(deployment.matcher_urls),
            "WORDCAST_ENVIRONMENT": "development",
        }
        router.spawn([sys.executable, "-m", "wordcast", "router"], env, logs / "router.log")

        # The receiver runs here, on the bridge: every host reaches it.
        port = free_port()
        receiver_env = dict(os.environ) | {
            "WORDCAST_RECEIVER_HOST": network.address,
            "WORDCAST_RECEIVER_PORT": str(port),
            "WORDCAST_RECEIVER_QUIET": "true",
        }
        with (logs / "receiver.log").open("wb") as out:
            receiver = subprocess.Popen(
                [sys.executable, "-m", "wordcast", "receiver"], env=receiver_env, stdout=out
            )
        deployment.receiver_url = f"http://{network.address}:{port}"
        for url in [*deployment.matcher_urls, deployment.router_url]:
            eventually(lambda url=url: _ready(url), 60, 0.2, f"{url} ready")  # type: ignore[misc]
        eventually(lambda: _answers(deployment.receiver_url), 30, 0.1, "the receiver")
        yield deployment
    finally:
        if receiver is not None:
            receiver.terminate()
            receiver.wait(10)
        network.close()


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@dataclass
class Outcome:
    refusals: list[tuple[float, str]]  # (seconds after the cut, what the publisher was told)
    back_after_s: float  # from the link's return to the first publication acknowledged after it


def _publish_through_a_cut(
    deployment: Deployment,
    one: Host,
    other: Host,
    seed: int,
    during: Callable[[], None] | None = None,
) -> Outcome:
    """Subscriptions made, then publications streamed while the link between ``one`` and
    ``other`` is cut for CUT_S seconds (``during``, a callable, is run while it is); every match
    of every acknowledged publication must reach the receiver, none under two webhook-ids."""
    posts = sample_posts(2_500, seed=seed)
    queries = post_queries(posts, 300, seed=seed, sizes=(1, 2, 2))

    async def subscribe() -> list[dict[str, object]]:
        async with RouterClient(deployment.router_url) as client:
            hook = f"{deployment.receiver_url}/hook"
            return await client.subscribe_many(queries, hook, progress=False)

    subscribed = {str(c["id"]): analyse(str(c["query"])) for c in asyncio.run(subscribe())}
    offset = len(deployment.deliveries(0)[0])
    publisher = Publisher(deployment.router_url, [(p.id, p.text) for p in posts])
    publisher.start()
    eventually(lambda: len(publisher.acknowledged) >= 500, 60, 0.05, "500 acknowledged")
    deployment.network.cut(one, other)
    cut_at = time.monotonic()
    try:
        if during is not None:
            during()
        time.sleep(max(0.0, cut_at + CUT_S - time.monotonic()))
    finally:
        deployment.network.heal(one, other)
    healed_at = time.monotonic()
    publisher.join(240)
    assert not publisher.is_alive(), "the publications were not all acknowledged in 4 min"
    assert not publisher.unexpected, publisher.unexpected
    after = [t for t in publisher.acknowledged_at if t > healed_at]
    back = (after[0] - healed_at) if after else float("inf")
    refusals = [(t - cut_at, what) for t, what in publisher.refusals if t >= cut_at]
    print(f"cut {one.name}-{other.name}: back {back:.1f} s after healing; refusals:")
    print(*(f"  {t:.1f} s: {what[:160]}" for t, what in refusals), sep="\n")

    acknowledged = set(publisher.acknowledged)
    expected = match_pairs(
        subscribed, {p.id: analyse(p.text) for p in posts if p.id in acknowledged}
    )

    def all_delivered() -> bool:
        pairs, _ = deployment.deliveries(offset)
        return expected <= set(pairs) and deployment.pending_deliveries() == 0

    eventually(all_delivered, 120, 0.5, "every match of every acknowledged publication delivered")
    pairs, webhook_ids = deployment.deliveries(offset)
    ours = [
        (pair, wid) for pair, wid in zip(pairs, webhook_ids, strict=True) if pair[0] in subscribed
    ]
    assert {pair for pair, _ in ours} - expected == set(), "a delivery the oracle does not expect"
    ids_of: dict[tuple[str, str], set[str]] = {}
    for pair, wid in ours:
        ids_of.setdefault(pair, set()).add(wid)
    twice = {pair: ids for pair, ids in ids_of.items() if len(ids) > 1}
    assert not twice, f"delivered twice under different webhook-ids: {list(twice.items())[:3]}"
    return Outcome(refusals, back)


def _refused_as(outcome: Outcome, *reasons: str) -> None:
    """The publisher was refused during the cut, soon, always with a 503 naming one of
    ``reasons``."""
    assert outcome.refusals, "nothing was refused while the link was cut"
    first = outcome.refusals[0][0]
    assert first <= REFUSED_WITHIN_S, f"the first refusal came {first:.1f} s after the cut"
    wrong = [
        what
        for _, what in outcome.refusals
        if not what.startswith("503") or not any(reason in what for reason in reasons)
    ]
    assert not wrong, wrong[:3]
    assert outcome.back_after_s <= HEAL_WITHIN_S, f"back {outcome.back_after_s:.1f} s after healing"


def test_a_matcher_cut_off_from_redis(deployment: Deployment) -> None:
    """The matcher cannot record its matches, so it refuses its batches; the other matcher's
    part of a refused batch is matched again when the publisher retries, under the same
    webhook-ids."""
    outcome = _publish_through_a_cut(deployment, deployment.matchers[0], deployment.redis, 21)
    _refused_as(outcome, "recording matches in the outbox")


def test_a_router_cut_off_from_redis(deployment: Deployment) -> None:
    """The router cannot report the mapping version it routes with, so past its fence it stops
    routing; it cannot store a subscription either, and says so within the write deadline."""
    refused: list[tuple[float, int, str]] = []

    def subscribe_meanwhile() -> None:
        time.sleep(1.0)
        started = time.monotonic()
        answer = httpx.post(
            f"{deployment.router_url}/subscriptions",
            json={"query": "okapi", "callback_url": f"{deployment.receiver_url}/hook"},
            headers=AUTH,
            timeout=30,
        )
        refused.append((time.monotonic() - started, answer.status_code, answer.text))

    outcome = _publish_through_a_cut(
        deployment, deployment.router, deployment.redis, 22, subscribe_meanwhile
    )
    _refused_as(
        outcome,
        "checking the rate limit: Redis did not answer",
        "has not reported its mapping version to Redis",
    )
    ((took, status, text),) = refused
    print(f"subscription refused after {took:.1f} s: {status} {text}")
    assert status == 503, text
    assert "Redis" in text, text
    # At worst a read on a pooled connection (5 s) and then a new connection (3 s) time out.
    assert took <= 9.0, f"the subscription was refused only after {took:.1f} s"


def test_a_router_cut_off_from_one_matcher(deployment: Deployment) -> None:
    outcome = _publish_through_a_cut(deployment, deployment.router, deployment.matchers[1], 23)
    _refused_as(outcome, "matcher 1")
