"""Dry runs: ``POST /publications?dry_run=true`` answers the matches a batch would bring the
caller's own subscriptions, and records, delivers and counts nothing; the same batch published
for real delivers exactly those matches, with the same ``matched``."""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from tests.helpers import AUTH, Receiver, RunningCluster, eventually, tenant_key, wordcast_cli
from wordcast.webhooks.payload import matches_of

QUERIES = [
    "white house",
    "senate vote",
    "apple OR (pear NOT banana)",
    '"climate change" policy',
    "NEAR/3(rocket launch)",
    "market lang:de",
]
PATTERN = "astro*"
TEXTS = [
    ("p1", "The White House said the senate vote is close."),
    ("p2", "A pear, and no other fruit, for the apple of my eye."),
    ("p3", "Climate change policy: the senate vote waits."),
    ("p4", "The rocket will launch at dawn; astronauts ready."),
    ("p5", "Nothing of interest here."),
    ("p6", "Der Markt schließt früh, the market says."),
]


def _subscribe(router: str, headers: dict[str, str], hook: str) -> list[str]:
    ids = []
    for body in [{"query": q} for q in QUERIES] + [{"pattern": PATTERN}]:
        answer = httpx.post(
            f"{router}/subscriptions",
            json=body | {"callback_url": hook},
            headers=headers,
            timeout=30,
        )
        assert answer.status_code == 201, answer.text
        ids.append(answer.json()["id"])
    return ids


def _dry_run(router: str, path: str, body: Any, headers: dict[str, str] = AUTH) -> httpx.Response:
    return httpx.post(
        f"{router}/{path}", params={"dry_run": "true"}, json=body, headers=headers, timeout=30
    )


def _matcher_figures(cluster: RunningCluster) -> list[tuple[Any, ...]]:
    figures = []
    for url in cluster.matcher_urls:
        stats = httpx.get(f"{url}/stats", timeout=10).json()
        figures.append((stats["publications"], stats["matches"], stats["deliveries_pending"]))
    return figures


def test_a_dry_run_shows_what_publishing_delivers_and_records_nothing(
    cluster: RunningCluster, receiver: Receiver
) -> None:
    router = cluster.router_url
    mine = _subscribe(router, AUTH, receiver.hook)
    # Another tenant's subscriptions to the same words are not shown to this one.
    other = {"authorization": f"Bearer {tenant_key(cluster, 'dry-run-other')}"}
    theirs = _subscribe(router, other, receiver.hook)
    publications = [{"id": pub_id, "text": text} for pub_id, text in TEXTS]
    before = _matcher_figures(cluster)
    received = receiver.count()

    answer = _dry_run(router, "publications", {"publications": publications})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["dry_run"] is True
    assert body["ids"] == [pub_id for pub_id, _ in TEXTS]
    shown = {(m["subscription_id"], m["publication_id"]): m["matched"] for m in body["matches"]}
    assert not {sub_id for sub_id, _ in shown} & set(theirs)
    # Each query and the pattern match at least once, the text of nothing never.
    assert {sub_id for sub_id, _ in shown} == set(mine)
    assert "p5" not in {pub_id for _, pub_id in shown}
    assert [m["publication_id"] for m in body["matches"]] == sorted(
        (m["publication_id"] for m in body["matches"]), key=lambda p: int(p[1:])
    )
    # The command line shows the same, a match a line.
    ran = wordcast_cli("publish", "--dry-run", TEXTS[0][1], router=router)
    assert ran.returncode == 0, ran.stderr
    lines = [line.split("\t") for line in ran.stdout.splitlines()]
    first = {sub_id for (sub_id, pub_id) in shown if pub_id == "p1"}
    assert {sub_id for _, sub_id, _ in lines} == first
    assert all(orjson.loads(matched) == shown[sub_id, "p1"] for _, sub_id, matched in lines)
    assert f"{len(first)} matches in 1 publication (a dry run: nothing was published)" in ran.stderr
    # The matchers matched and recorded nothing (a batch is in the outbox before its 200).
    assert _matcher_figures(cluster) == before

    published = httpx.post(
        f"{router}/publications", json={"publications": publications}, headers=AUTH, timeout=30
    )
    assert published.status_code == 202, published.text
    # Delivered for real: what the dry run showed, with the same `matched`.
    eventually(lambda: receiver.count() == received + len(shown), 30, 0.05, "the deliveries")
    delivered: dict[tuple[str, str], Any] = {}
    for message in httpx.get(f"{receiver.url}/deliveries/raw", timeout=30).json():
        for match in matches_of(orjson.loads(message["body"])):
            if match["subscription_id"] in mine:
                delivered[match["subscription_id"], match["publication_id"]] = match["matched"]
    assert delivered == shown


def test_a_dry_run_refuses_what_publishing_refuses(cluster: RunningCluster) -> None:
    pair = {"publications": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}
    answer = _dry_run(cluster.router_url, "publications", pair)
    assert answer.status_code == 422
    assert "given more than once" in answer.text
    answer = httpx.post(
        f"{cluster.router_url}/publications",
        params={"dry_run": "maybe"},
        json={"text": "x"},
        headers=AUTH,
        timeout=30,
    )
    assert answer.status_code == 422
    assert "dry_run" in answer.text


def _listed(router: str) -> list[str]:
    answer = httpx.get(f"{router}/subscriptions", params={"limit": 1000}, headers=AUTH, timeout=30)
    assert answer.status_code == 200, answer.text
    return sorted(s["id"] for s in answer.json()["subscriptions"])


def test_a_subscription_dry_run_shows_its_reading_and_placement_and_stores_nothing(
    cluster: RunningCluster,
) -> None:
    router = cluster.router_url
    before = _listed(router)
    query = '"solar panel" OR (wind turbine NOT offshore)'
    answer = _dry_run(router, "subscriptions", {"query": query})
    assert answer.status_code == 200, answer.text
    preview = answer.json()
    assert preview["dry_run"] is True
    assert preview["kind"] == "keywords"
    assert preview["delivery"] == ["stream"]
    assert [sorted(a["terms"]) for a in preview["alternatives"]] == [
        ["panel", "solar"],
        ["turbin", "wind"],
    ]
    assert preview["alternatives"][1]["without"] == ["offshor"]
    assert [len(m) for m in preview["matchers"]] == [1, 1]
    pattern = _dry_run(router, "subscriptions", {"pattern": "photovolt*"}).json()
    assert (pattern["kind"], pattern["anchor"], len(pattern["matchers"])) == (
        "pattern",
        "photovolt",
        1,
    )
    # Refused as subscribing refuses it, and nothing stored either way.
    refused = _dry_run(router, "subscriptions", {"query": "the and of"})
    assert refused.status_code == 422
    assert "no terms left" in refused.text
    assert _listed(router) == before
    # Subscribed for real now, the query goes where the preview said.
    stored = httpx.post(f"{router}/subscriptions", json={"query": query}, headers=AUTH, timeout=30)
    assert stored.status_code == 201, stored.text
    assert stored.json()["matcher"] == preview["matchers"][0][0]
