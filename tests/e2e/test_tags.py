"""Tags: a subscription may carry the subscriber's label (at most 64 characters), shown with it,
listed by it, and echoed in each of its matches, whichever way they are delivered and whichever
path (compiled or reference) wrote them."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson

from tests.helpers import AUTH, Receiver, RunningCluster, eventually, wordcast_cli
from wordcast.client import RouterClient
from wordcast.webhooks.payload import matches_of

DEV_KEY = AUTH["authorization"].removeprefix("Bearer ")


def _post(router: str, path: str, body: Any) -> httpx.Response:
    return httpx.post(f"{router}/{path}", json=body, headers=AUTH, timeout=30)


def _listed(router: str, **params: str) -> dict[str, str | None]:
    answer = httpx.get(
        f"{router}/subscriptions", params={"limit": 1000, **params}, headers=AUTH, timeout=30
    )
    assert answer.status_code == 200, answer.text
    return {s["id"]: s["tag"] for s in answer.json()["subscriptions"]}


def test_tags_are_stored_listed_and_echoed_in_every_match(
    cluster: RunningCluster, receiver: Receiver
) -> None:
    router = cluster.router_url
    tag = 'élections "2028"'
    made = {
        "keywords": _post(
            router,
            "subscriptions",
            {"query": "ballot count", "tag": tag, "callback_url": receiver.hook},
        ),
        "boolean": _post(
            router,
            "subscriptions",
            {"query": "ballot OR recount", "tag": "either", "callback_url": receiver.hook},
        ),
        "pattern": _post(
            router, "subscriptions", {"pattern": "ball?t*", "tag": "wild", "delivery": ["stream"]}
        ),
        "untagged": _post(
            router, "subscriptions", {"query": "ballot count", "callback_url": receiver.hook}
        ),
    }
    assert all(answer.status_code == 201 for answer in made.values()), made
    ids = {name: answer.json()["id"] for name, answer in made.items()}
    assert made["keywords"].json()["tag"] == tag
    assert made["untagged"].json()["tag"] is None
    batch = _post(
        router,
        "subscriptions/batch",
        {"subscriptions": [{"query": "ballot box", "tag": "batch", "callback_url": receiver.hook}]},
    )
    assert batch.status_code == 201, batch.text
    ids["batch"] = batch.json()["subscriptions"][0]["id"]
    assert batch.json()["subscriptions"][0]["tag"] == "batch"
    shown = httpx.get(f"{router}/subscriptions/{ids['boolean']}", headers=AUTH, timeout=30)
    assert shown.json()["tag"] == "either"
    assert set(_listed(router, tag=tag)) == {ids["keywords"]}
    assert _listed(router)[ids["pattern"]] == "wild"

    received = receiver.count()
    text = "The ballot count and the ballot box wait for a recount"
    published = _post(router, "publications", {"id": "tagged-1", "text": text})
    assert published.status_code == 202, published.text
    webhook = {ids[n]: None for n in ("keywords", "boolean", "untagged", "batch")}
    eventually(lambda: receiver.count() == received + len(webhook), 30, 0.05, "the deliveries")
    for message in httpx.get(f"{receiver.url}/deliveries/raw", timeout=30).json():
        for match in matches_of(orjson.loads(message["body"])):
            if match["publication_id"] == "tagged-1":
                webhook[match["subscription_id"]] = match.get("tag")
    assert webhook == {
        ids["keywords"]: tag,
        ids["boolean"]: "either",
        ids["untagged"]: None,
        ids["batch"]: "batch",
    }

    async def streamed() -> dict[str, Any]:
        async with RouterClient(router, api_key=DEV_KEY) as client:
            stream = client.matches("0")
            async with asyncio.timeout(30):
                while True:
                    message = await anext(stream)
                    for match in message.matches:
                        if match["subscription_id"] == ids["pattern"]:
                            await stream.aclose()
                            return match

    assert asyncio.run(streamed())["tag"] == "wild"

    # The command line sets, shows and filters by tag.
    ran = wordcast_cli("subscribe", "ballot", "paper", "--tag", "cli", router=router)
    assert ran.returncode == 0, ran.stderr
    listed = wordcast_cli("subscriptions", "--tag", "cli", router=router)
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 1
    assert "'ballot paper'  [cli]" in listed.stdout
    assert "are tagged 'cli'" in listed.stderr


def test_a_bad_tag_is_refused_and_a_key_reused_with_another_tag_conflicts(
    cluster: RunningCluster,
) -> None:
    router = cluster.router_url
    for tag, says in (
        ("x" * 65, "at most 64 characters"),
        ("a\nb", "printable characters"),
        ("", "at least 1"),
    ):
        answer = _post(router, "subscriptions", {"query": "ballot", "tag": tag})
        assert answer.status_code == 422, answer.text
        assert says in answer.text
    first = _post(router, "subscriptions", {"query": "turnout", "tag": "a", "key": "tagged-key"})
    assert first.status_code == 201, first.text
    again = _post(router, "subscriptions", {"query": "turnout", "tag": "a", "key": "tagged-key"})
    assert again.json()["id"] == first.json()["id"]
    other = _post(router, "subscriptions", {"query": "turnout", "tag": "b", "key": "tagged-key"})
    assert other.status_code == 409, other.text
