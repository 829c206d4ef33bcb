"""Webhook endpoints through real processes: one secret per endpoint, one signature per message,
rotation, the migration window for subscriptions' own secrets, health, disabling, deletion."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from functools import partial

import httpx
import orjson
import pytest
from standardwebhooks import Webhook

from tests.e2e.support import signed_twice
from tests.helpers import (
    AUTH,
    Receiver,
    RunningCluster,
    eventually,
    rewrite_record,
    start_cluster,
    stop_cluster,
    stored_record,
    wordcast_cli,
)
from wordcast.local.supervisor import free_port
from wordcast.storage.redis import connect_sync

ENV = {
    # Some 5–8 s of attempts: an endpoint failing for 2 s is disabled before they run out (20,
    # 2–4 s, ran out first on a busy Redis Cluster).
    "WORDCAST_MATCHER_DELIVERY_ATTEMPTS": "40",
    "WORDCAST_MATCHER_DELIVERY_TAKE_OVER_AFTER_S": "3600",  # longer than 40 attempts can take
    "WORDCAST_MATCHER_DELIVERY_BACKOFF_S": "0.05",
    "WORDCAST_MATCHER_DELIVERY_MAX_BACKOFF_S": "0.2",
    "WORDCAST_MATCHER_ENDPOINT_DISABLE_AFTER_S": "2",
    # The migration window is open: subscriptions with a secret of their own sign too.
    "WORDCAST_MATCHER_SUBSCRIPTION_SIGNATURES_UNTIL": "2100-01-01T00:00:00Z",
}


@pytest.fixture(scope="module")
def endpoint_cluster(redis_url: str) -> Iterator[RunningCluster]:
    running = start_cluster(redis_url, f"test-endpoints-{os.getpid()}", env=ENV)
    yield running
    stop_cluster(running)


@pytest.fixture
def api(endpoint_cluster: RunningCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=endpoint_cluster.router_url, timeout=30, headers=AUTH) as client:
        yield client


def _raws_for(receiver: Receiver, publication: str) -> list[tuple[dict[str, str], str]]:
    """The requests (headers, body) received so far carrying matches of ``publication``."""
    return [
        (dict(raw["headers"]), str(raw["body"]))
        for raw in httpx.get(f"{receiver.url}/deliveries/raw", timeout=10).json()
        if publication in raw["body"]
    ]


def _raw_for(receiver: Receiver, publication: str) -> tuple[dict[str, str], str]:
    found = eventually(lambda: _raws_for(receiver, publication), what=publication)
    return found[0]


def _publisher(api: httpx.Client, text: str) -> Callable[[str], None]:
    def publish(publication: str) -> None:
        api.post("/publications", json={"id": publication, "text": text}).raise_for_status()

    return publish


def _signatures(headers: dict[str, str]) -> list[str]:
    return headers["webhook-signature"].split(" ")


def test_endpoints_are_managed_and_subscriptions_deliver_to_them(
    api: httpx.Client, receiver: Receiver, endpoint_cluster: RunningCluster
) -> None:
    url = receiver.hook + "?managed"
    made = api.post("/endpoints", json={"url": url, "description": "ours"})
    assert made.status_code == 201, made.text
    endpoint = made.json()
    assert endpoint["id"].startswith("ep_")
    assert endpoint["secret"].startswith("whsec_")
    assert endpoint["enabled"]
    assert endpoint["description"] == "ours"
    again = api.post("/endpoints", json={"url": url})
    assert again.status_code == 409
    assert endpoint["id"] in again.text

    # By id, or by URL: the same endpoint, whose secret a creation answer shows.
    by_id = api.post("/subscriptions", json={"query": "pangolin", "endpoint_id": endpoint["id"]})
    by_url = api.post("/subscriptions", json={"query": "armadillo", "callback_url": url})
    for created in (by_id, by_url):
        assert created.status_code == 201, created.text
        assert created.json()["endpoint_id"] == endpoint["id"]
        assert created.json()["callback_url"] == url
        assert created.json()["secret"] == endpoint["secret"]
    listed = api.get(f"/subscriptions/{by_id.json()['id']}").json()
    assert (listed["endpoint_id"], listed["secret"]) == (endpoint["id"], None)
    unknown = api.post("/subscriptions", json={"query": "x y", "endpoint_id": "ep_" + "0" * 24})
    assert unknown.status_code == 404
    both = api.post(
        "/subscriptions", json={"query": "x y", "endpoint_id": endpoint["id"], "callback_url": url}
    )
    assert both.status_code == 422
    assert "not both" in both.text

    shown = api.get(f"/endpoints/{endpoint['id']}").json()
    assert shown["subscriptions"] == 2
    assert shown["secret"] is None
    assert api.get(f"/endpoints/{endpoint['id']}/secret").json()["secret"] == endpoint["secret"]
    assert endpoint["id"] in [e["id"] for e in api.get("/endpoints").json()["endpoints"]]
    changed = api.patch(f"/endpoints/{endpoint['id']}", json={"description": "renamed"})
    assert changed.json()["description"] == "renamed"
    moved = api.patch(f"/endpoints/{endpoint['id']}", json={"url": receiver.hook + "?elsewhere"})
    assert moved.status_code == 409
    assert "2 subscriptions" in moved.text

    # Not deleted while subscriptions deliver there, unless they go too.
    refused = api.delete(f"/endpoints/{endpoint['id']}")
    assert refused.status_code == 409
    assert "cascade" in refused.text
    assert api.get(f"/subscriptions/{by_url.json()['id']}").status_code == 200
    cli = wordcast_cli(
        "endpoint", "delete", endpoint["id"], "--cascade", router=endpoint_cluster.router_url
    )
    assert cli.returncode == 0, cli.stderr
    assert api.get(f"/endpoints/{endpoint['id']}").status_code == 404
    for created in (by_id, by_url):
        assert api.get(f"/subscriptions/{created.json()['id']}").status_code == 404


def test_a_message_is_signed_once_with_its_endpoints_secret_and_rotation_adds_one(
    api: httpx.Client, receiver: Receiver, endpoint_cluster: RunningCluster
) -> None:
    url = receiver.hook + "?signed"
    made = wordcast_cli("endpoint", "create", url, "--json", router=endpoint_cluster.router_url)
    assert made.returncode == 0, made.stderr
    secret = made.stdout.rsplit("signing secret: ", 1)[1].strip()
    subs = [
        api.post("/subscriptions", json={"query": f"koala {word}", "callback_url": url}).json()
        for word in ("tree", "leaf", "nap", "gum", "sleep")
    ]
    api.post(
        "/publications", json={"id": "k-1", "text": "koala tree leaf nap gum sleep"}
    ).raise_for_status()
    expected = sorted(s["id"] for s in subs)

    def every_match() -> list[tuple[dict[str, str], str]] | None:
        raws = _raws_for(receiver, "k-1")
        ids = sorted(
            m["subscription_id"] for _, body in raws for m in orjson.loads(body)["matches"]
        )
        return raws if ids == expected else None

    # Five subscriptions, one endpoint: a message of each matcher holding some, one HMAC each.
    raws = eventually(every_match, 30, what="the five matches")
    assert len(raws) <= 2
    for headers, body in raws:
        assert len(_signatures(headers)) == 1
        Webhook(secret).verify(body, headers)

    endpoint_id = subs[0]["endpoint_id"]
    rotated = api.post(f"/endpoints/{endpoint_id}/secret").json()["secret"]
    assert rotated != secret
    headers, body = signed_twice(_publisher(api, "koala nap"), partial(_raw_for, receiver), "k-2")
    Webhook(rotated).verify(body, headers)
    Webhook(secret).verify(body, headers)  # during the grace period


def test_a_subscriptions_own_secret_signs_too_while_the_migration_window_is_open(
    api: httpx.Client, receiver: Receiver, endpoint_cluster: RunningCluster, redis_url: str
) -> None:
    """A subscription stored before endpoints has a secret of its own, which its receiver
    verifies with: it keeps doing so until the window closes."""
    url = receiver.hook + "?legacy"
    created = api.post("/subscriptions", json={"query": "wallaby", "callback_url": url}).json()
    own = "whsec_" + "T2xkU2VjcmV0T2ZNaW5lMTIzNDU2"
    client = connect_sync(redis_url)
    namespace = endpoint_cluster.namespace
    stored = stored_record(client, namespace, created["id"])
    assert stored is not None
    rewrite_record(client, namespace, stored._replace(secret=own))  # as stored before endpoints
    client.incr(f"{namespace}:secrets-epoch")
    headers, body = signed_twice(_publisher(api, "a wallaby"), partial(_raw_for, receiver), "w-1")
    Webhook(own).verify(body, headers)
    Webhook(created["secret"]).verify(body, headers)


def test_a_failing_endpoint_shows_it_and_is_disabled_then_enabled_again(
    api: httpx.Client, endpoint_cluster: RunningCluster
) -> None:
    url = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
    created = api.post("/subscriptions", json={"query": "echidna", "callback_url": url}).json()
    endpoint_id = created["endpoint_id"]
    api.post("/publications", json={"id": "e-1", "text": "an echidna"}).raise_for_status()

    def disabled() -> dict[str, object] | None:
        shown: dict[str, object] = api.get(f"/endpoints/{endpoint_id}").json()
        return shown if not shown["enabled"] else None

    shown = eventually(disabled, 30, what="the failing endpoint disabled")
    assert "ConnectError" in str(shown["disabled_reason"])
    health: Callable[[], dict[str, object]] = lambda: api.get(  # noqa: E731
        f"/endpoints/{endpoint_id}"
    ).json()["health"]
    assert int(health()["attempts_failed"]) >= 2  # type: ignore[call-overload]
    assert "ConnectError" in str(health()["last_error"])

    # Its message is a dead letter, saying why; enabled again, the replay is delivered.
    def dead() -> list[dict[str, object]]:
        letters = api.get("/deadletters").json()["dead_letters"]
        return [d for d in letters if created["id"] in d["subscription_ids"]]

    eventually(dead, 30, what="the message dead-lettered")
    assert f"endpoint {endpoint_id} is disabled" in str(dead()[0]["reason"])
    listed = wordcast_cli("endpoint", "list", router=endpoint_cluster.router_url)
    assert "DISABLED" in listed.stdout
    assert "disabled: failing since" in listed.stdout
    enabled = api.patch(f"/endpoints/{endpoint_id}", json={"enabled": True}).json()
    assert enabled["enabled"]
    assert enabled["disabled_reason"] is None
