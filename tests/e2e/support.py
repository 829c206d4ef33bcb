"""What end-to-end test modules share: publishing, subscribing, the oracles that judge
deliveries, and servers that misbehave on purpose."""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import socket
import struct
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.helpers import (
    AUTH,
    Receiver,
    RunningCluster,
    eventually,
    start_cluster,
    stop_cluster,
)
from wordcast.client import RouterClient
from wordcast.corpus.workload import Post
from wordcast.engines.termstats import TermStats
from wordcast.query.analysis import analyse, term_positions
from wordcast.query.boolean import evaluate, parse_tree
from wordcast.query.patterns import normalise, parse


def subscribe_terms(
    cluster: RunningCluster, queries: list[str], hook: str
) -> dict[str, frozenset[str]]:
    async def run() -> list[dict[str, object]]:
        async with RouterClient(cluster.router_url) as client:
            return await client.subscribe_many(queries, hook, progress=False)

    created = asyncio.run(run())
    # The oracle analyses the queries itself rather than trusting what the router says.
    return {str(c["id"]): analyse(str(c["query"])) for c in created}


def publish_posts(cluster: RunningCluster, posts: list[Post]) -> None:
    async def run() -> None:
        async with RouterClient(cluster.router_url, concurrency=4) as client:
            await client.publish_many([{"id": p.id, "text": p.text} for p in posts], progress=False)

    asyncio.run(run())


def delivered_after(
    cluster: RunningCluster, receiver: Receiver, offset: int, expected: int
) -> list[tuple[str, str]]:
    """The deliveries, once the expected number arrived and the matchers are idle: every
    publication accepted has its messages in an outbox, so an empty outbox is the signal that
    nothing more will come (no sleep past it)."""
    eventually(
        lambda: len(receiver.pairs(offset)) >= expected and cluster.pending_deliveries() == 0,
        120,
        0.2,
        f"{expected} deliveries with the matchers idle",
    )
    return receiver.pairs(offset)


def restart_matcher(cluster: RunningCluster, how: int, ordinal: int = 0) -> dict[str, Any]:
    """Stop a matcher with signal ``how``; its stats once the supervisor's new one is ready."""
    old = cluster.matcher_pid(ordinal)
    os.kill(old, how)

    def restarted() -> bool:
        try:
            return cluster.matcher_pid(ordinal) != old
        except httpx.HTTPError:
            return False

    eventually(restarted, 60, 0.1, f"matcher {ordinal} restarted")
    cluster.wait_ready()
    stats: dict[str, Any] = httpx.get(f"{cluster.matcher_urls[ordinal]}/stats", timeout=5).json()
    return stats


def check_exact(delivered: list[tuple[str, str]], expected: set[tuple[str, str]]) -> None:
    got = set(delivered)
    missing, extra = expected - got, got - expected
    assert not missing, f"{len(missing)} matches never delivered, e.g. {sorted(missing)[:5]}"
    assert not extra, (
        f"{len(extra)} deliveries the oracle does not expect, e.g. {sorted(extra)[:5]}"
    )
    assert len(delivered) == len(got), "a match was delivered twice"


@contextmanager
def engine_cluster(
    redis_url: str, engine: str, sample: list[Post], tmp_path: Path
) -> Iterator[RunningCluster]:
    """A cluster whose matchers run ``engine``, with term statistics of ``sample``."""
    stats = TermStats.from_documents(analyse(p.text) for p in sample)
    stats_file = tmp_path / "stats.json"
    stats.save(stats_file)
    env = {"WORDCAST_MATCHER_ENGINE": engine, "WORDCAST_MATCHER_TERM_STATS": str(stats_file)}
    cluster = start_cluster(redis_url, f"test-{engine}-{uuid.uuid4().hex[:6]}", env=env)
    try:
        engines = {httpx.get(f"{u}/stats").json()["engine"] for u in cluster.matcher_urls}
        assert engines == {engine}
        yield cluster
    finally:
        stop_cluster(cluster)


def boolean_oracle(queries: dict[str, str], posts: list[Post]) -> set[tuple[str, str]]:
    """Each query's tree evaluated as written on each post's terms and their positions."""
    trees = {sid: parse_tree(query) for sid, query in queries.items()}
    return {
        (sid, post.id)
        for post in posts
        for terms, positions in [(analyse(post.text), term_positions(post.text))]
        for sid, tree in trees.items()
        if evaluate(tree, terms, positions)
    }


def subscribe_queries(cluster: RunningCluster, queries: list[str], hook: str) -> dict[str, str]:
    async def run() -> list[dict[str, object]]:
        async with RouterClient(cluster.router_url) as client:
            return await client.subscribe_many(queries, hook, progress=False)

    return {str(c["id"]): str(c["query"]) for c in asyncio.run(run())}


def pattern_oracle(patterns: dict[str, str], posts: list[Post]) -> set[tuple[str, str]]:
    """re.search of each pattern's regular expression on each post's normalised text."""
    compiled = {sid: re.compile(parse(p).regex(), re.DOTALL) for sid, p in patterns.items()}
    return {
        (sid, post.id)
        for post in posts
        for sid, regex in compiled.items()
        if regex.search(normalise(post.text))
    }


def create_subscriptions(router_url: str, bodies: list[dict[str, str]]) -> list[dict[str, object]]:
    async def run() -> list[dict[str, object]]:
        async with httpx.AsyncClient(base_url=router_url, timeout=60, headers=AUTH) as client:
            semaphore = asyncio.Semaphore(16)

            async def one(body: dict[str, str]) -> dict[str, object]:
                async with semaphore:
                    response = await client.post("/subscriptions", json=body)
                    assert response.status_code == 201, response.text
                    created: dict[str, object] = response.json()
                    return created

            return list(await asyncio.gather(*(one(b) for b in bodies)))

    return asyncio.run(run())


class AlternatingPublisher:
    """Publishes posts in batches of 50 alternating routers, paced; the last ten batches wait
    until ``finish`` is set, so that the swaps always happen while publications flow. ``gates``
    hold back more: the batch at each index waits until its event is set, so that a test whose
    changes take long on a loaded machine still has batches left to send during each of them."""

    def __init__(
        self, urls: list[str], posts: list[Post], gates: dict[int, threading.Event] | None = None
    ) -> None:
        self.urls, self.posts = urls, posts
        self.sent = 0
        self.refused: str | None = None  # what a router answered when it refused a batch
        self.finish = threading.Event()
        self.gates = dict(gates or {})
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        batches = [self.posts[i : i + 50] for i in range(0, len(self.posts), 50)]
        self.gates[len(batches) - 10] = self.finish
        with httpx.Client(timeout=60, headers=AUTH) as client:
            for index, batch in enumerate(batches):
                if index in self.gates:
                    self.gates[index].wait(120)
                url = self.urls[index % len(self.urls)]
                body = {"publications": [{"id": p.id, "text": p.text} for p in batch]}
                response = client.post(f"{url}/publications", json=body)
                if response.status_code != 202:
                    self.refused = f"batch {index} to {url}: {response.status_code} {response.text}"
                    return
                self.sent = index + 1
                time.sleep(0.1)

    def end(self) -> None:
        """Let the last batches go and wait for them; a refused batch fails the test here."""
        self.finish.set()
        self.thread.join(120)
        assert self.refused is None, self.refused


ANSWER = (
    b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 13\r\n\r\n{"matches":7}'
)


@dataclass
class DroppingServer:
    """Resets the first ``drops`` connections once it has read a request; answers every request
    on the others (or never, if ``silent``). Keeps every request body it read."""

    drops: int = 0
    silent: bool = False
    bodies: list[bytes] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:  # the client closed the connection
                writer.close()
                return
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            self.bodies.append(await reader.readexactly(length))
            if len(self.bodies) <= self.drops:
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.close()
                return
            if self.silent:
                await asyncio.sleep(60)
            writer.write(ANSWER)
            await writer.drain()


@asynccontextmanager
async def serving(server: DroppingServer) -> AsyncIterator[str]:
    """``server`` listening on a free local port; yields its URL."""
    listening = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}"
    finally:
        listening.close()


def signed_twice(
    publish: Callable[[str], None],
    delivered: Callable[[str], tuple[dict[str, str], str]],
    prefix: str,
    timeout_s: float = 30.0,
) -> tuple[dict[str, str], str]:
    """After a secret changed: publish (ids ``prefix-1``, ``prefix-2``, …) until a delivery is
    signed twice, the dispatchers having read the secrets epoch (every few seconds, on their
    own clock); its headers and body. A positive signal, not a sleep past their period."""
    deadline = time.monotonic() + timeout_s
    for k in itertools.count(1):
        publish(f"{prefix}-{k}")
        headers, body = delivered(f"{prefix}-{k}")
        if len(headers["webhook-signature"].split(" ")) == 2:
            return headers, body
        if time.monotonic() > deadline:
            raise AssertionError(f"no delivery signed twice within {timeout_s} s")
        time.sleep(0.5)
    raise AssertionError("unreachable")
