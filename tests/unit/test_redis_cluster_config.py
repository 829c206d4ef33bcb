"""Choosing a Redis Cluster by URL, the namespace as a hash tag, ports for local cluster nodes, and
what a write waits for (pure logic; the cluster itself is tests/e2e/test_redis_cluster.py's)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from wordcast.errors import StoreUnavailable
from wordcast.local.redis_server import CLUSTER_BUS_OFFSET, free_cluster_ports
from wordcast.services.common import ServiceSettings
from wordcast.storage.keys import Keys
from wordcast.storage.redis import Replication, is_cluster, node_url, slot_namespace


@pytest.mark.parametrize(
    ("url", "cluster", "node"),
    [
        ("redis+cluster://127.0.0.1:7000", True, "redis://127.0.0.1:7000"),
        ("REDISS+CLUSTER://h:7000/0", True, "rediss://h:7000/0"),
        ("redis://127.0.0.1:6379/0", False, "redis://127.0.0.1:6379/0"),
        ("unix:///tmp/redis.sock", False, "unix:///tmp/redis.sock"),
    ],
)
def test_the_url_chooses_a_cluster(url: str, cluster: bool, node: str) -> None:
    assert is_cluster(url) is cluster
    assert node_url(url) == node


def test_every_key_of_a_tagged_namespace_has_the_tag() -> None:
    assert slot_namespace("wordcast") == "{wordcast}"
    assert slot_namespace("{given}") == "{given}"
    keys = Keys(slot_namespace("wc"))
    for key in (keys.events, keys.words, keys.record_of("x"), keys.matcher_words(3), keys.window):
        # Redis Cluster hashes only what the first {...} holds.
        assert key.startswith("{wc}:")


@pytest.mark.parametrize("namespace", ["wordcast", "{wordcast}", "a.b-c_1"])
def test_a_namespace_may_be_given_as_a_hash_tag(namespace: str) -> None:
    assert ServiceSettings(WORDCAST_NAMESPACE=namespace).namespace == namespace


@pytest.mark.parametrize("namespace", ["{open", "a{b}c", "{}", "has space"])
def test_other_braces_are_refused(namespace: str) -> None:
    with pytest.raises(ValidationError):
        ServiceSettings(WORDCAST_NAMESPACE=namespace)


def test_cluster_ports_leave_room_for_their_bus_ports() -> None:
    ports = free_cluster_ports(12)
    assert len(set(ports)) == 12
    buses = {p + CLUSTER_BUS_OFFSET for p in ports}
    assert max(buses) < 65_536
    assert not buses & set(ports)


def test_a_cluster_waits_for_a_replica_and_one_redis_does_not() -> None:
    assert Replication.default_for("redis+cluster://127.0.0.1:7000").replicas == 1
    assert Replication.default_for("redis://127.0.0.1:6379").replicas == 0
    assert Replication.default_for("redis://127.0.0.1:6379", replicas=2).replicas == 2
    assert Replication.default_for("redis+cluster://h:1", replicas=0).replicas == 0
    wanted = Replication(1, 500)
    wanted.check(1, "storing")
    with pytest.raises(StoreUnavailable, match="reached 0 of the 1 Redis replicas"):
        wanted.check(0, "storing")
