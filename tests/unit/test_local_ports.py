"""A local cluster hands each of its services a port of its own: a port is free until its
service binds it, so the router's (given, not yet bound) can come back from the OS again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from wordcast.local import cluster as local_cluster


def test_no_service_is_given_the_routers_port_or_another_services(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # What the OS might answer: the router's port first, then one port twice.
    offered: Iterator[int] = iter([8100, 8100, 9001, 9001, 9002, 9003, 9004])
    monkeypatch.setattr(local_cluster, "free_port", lambda: next(offered))
    made = local_cluster.Cluster(matchers=2, port=8100, data_dir=tmp_path, receiver=True)
    redis_port = int(made.redis_url.rsplit(":", 1)[1].split("/")[0])
    matcher_ports = [int(url.rsplit(":", 1)[1]) for url in made.matcher_urls]
    receiver_port = int(str(made.receiver_url).rsplit(":", 1)[1])
    given = [8100, redis_port, *matcher_ports, receiver_port]
    assert len(set(given)) == len(given), given
