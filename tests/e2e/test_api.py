"""Bad input gets a clear 4xx naming the problem, and changes nothing in Redis."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.helpers import AUTH, Receiver, RunningCluster, record_shards, tenant_key
from wordcast import limits
from wordcast.storage.redis import connect_sync


@pytest.fixture(scope="module")
def api(cluster: RunningCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster.router_url, timeout=30, headers=AUTH) as client:
        yield client


def _redis_state(redis_url: str, namespace: str) -> dict[str, Any]:
    client = connect_sync(redis_url)
    shards = record_shards(client, namespace)
    prefixes = dict.fromkeys([namespace, *(keys.ns for keys in shards)])
    return {
        "keys": sorted(key for p in prefixes for key in client.scan_iter(match=f"{p}:*")),
        "words": [client.hgetall(keys.words) for keys in shards],
        # The last event written (the stream's length moves as followers' reads trim it).
        "events": [client.xrevrange(keys.events, count=1) for keys in shards],
    }


HOOK = "http://127.0.0.1:9/hook"
NOT_COUNTED = {"matched": 0, "delivered": 0, "failed": 0, "last_match": None}


def _refused_changing_nothing(
    api: httpx.Client, cluster: RunningCluster, redis_url: str, path: str, body: Any, says: str
) -> httpx.Response:
    before = _redis_state(redis_url, cluster.namespace)
    response = api.post(path, json=body)
    assert response.status_code == 422
    assert says in response.text
    assert _redis_state(redis_url, cluster.namespace) == before
    return response


BAD_SUBSCRIPTIONS = [
    ({"query": "the and of", "callback_url": HOOK}, "no terms left"),
    ({"query": '"white house', "callback_url": HOOK}, "a quote without its closing quote"),
    ({"query": '"of the" house', "callback_url": HOOK}, 'the phrase \\"of the\\" has no terms'),
    ({"query": "NEAR/0(senate vote)", "callback_url": HOOK}, "NEAR/0 needs a window of 1 to 100"),
    ({"query": 'NOT "white house"', "callback_url": HOOK}, "requires no word"),
    ({"query": "source:rss", "callback_url": HOOK}, "a filter narrows a query's words"),
    ({"query": "apple OR has:url", "callback_url": HOOK}, "the alternative 'has:url' requires"),
    ({"query": 'apple author:"ap', "callback_url": HOOK}, "a quote without its closing quote"),
    ({"query": "apple has:no-such", "callback_url": HOOK}, "has:no-such needs an attribute"),
    ({"query": f"apple {'x' * 40}:y", "callback_url": HOOK}, "is not an attribute name"),
    ({"query": "NEAR/2(apple source:rss)", "callback_url": HOOK}, "takes words only"),
    ({"query": "house lang:zz", "callback_url": HOOK}, "unknown language 'zz'"),
    ({"query": "Haus lang:de OR house lang:fr", "callback_url": HOOK}, "names 2 languages"),
    ({"query": "😀 !!! ?", "callback_url": HOOK}, "no terms left"),
    ({"query": "x" * (limits.MAX_QUERY_CHARS + 1), "callback_url": HOOK}, "at most 512"),
    (
        {
            "query": " ".join(f"word{i}" for i in range(limits.MAX_TERMS_PER_SUBSCRIPTION + 1)),
            "callback_url": HOOK,
        },
        "the limit is 16",
    ),
    ({"query": "", "callback_url": HOOK}, "at least 1 character"),
    ({"query": "white house", "callback_url": "ftp://example.com/x"}, "http' or 'https"),
    ({"query": "white house", "callback_url": "not a url"}, "callback_url"),
    ({"query": "white house", "delivery": ["webhook"]}, "needs a callback_url"),
    ({"query": "white house", "callback_url": HOOK, "extra": 1}, "extra"),
    ({"query": 42, "callback_url": HOOK}, "query"),
    ({"query": "white house", "pattern": "white*house", "callback_url": HOOK}, "exactly one"),
    ({"callback_url": HOOK}, "exactly one"),
    ({"pattern": "ab?cd*ef", "callback_url": HOOK}, "at least 3 are needed"),
    ({"pattern": "*?*", "callback_url": HOOK}, "no literal characters"),
    ({"pattern": "abc\\", "callback_url": HOOK}, "lone backslash"),
    ({"pattern": "abc\\d", "callback_url": HOOK}, "unknown escape"),
    ({"pattern": "x" * (limits.MAX_PATTERN_CHARS + 1), "callback_url": HOOK}, "at most 256"),
    ({"pattern": "", "callback_url": HOOK}, "at least 1 character"),
]


@pytest.mark.parametrize(("body", "says"), BAD_SUBSCRIPTIONS)
def test_bad_subscriptions_are_refused_and_store_nothing(
    api: httpx.Client, cluster: RunningCluster, redis_url: str, body: dict[str, Any], says: str
) -> None:
    _refused_changing_nothing(api, cluster, redis_url, "/subscriptions", body, says)


@pytest.mark.parametrize("path", ["/subscriptions", "/publications"])  # stdlib json, orjson
@pytest.mark.parametrize("body", [b"{not json", b'{"text": NaN}', b'{"text": "\\ud800"}'])
def test_malformed_json_is_a_clear_422(api: httpx.Client, path: str, body: bytes) -> None:
    response = api.post(path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert "JSON" in response.text or "text" in response.text


BAD_PUBLICATIONS = [
    ({"text": "x " * (limits.MAX_TEXT_CHARS // 2 + 1)}, "at most 16384"),
    ({"publications": [{"text": "ok"}] * (limits.MAX_BATCH_PUBLICATIONS + 1)}, "at most 1000"),
    ({"publications": []}, "at least 1 item"),
    ({"publications": [{"text": "fine"}, {"id": "", "text": "empty id"}]}, "at least 1 character"),
    ({"publications": [{"id": "p1"}]}, "text"),
    (
        {"publications": [{"id": "twice", "text": "fine"}, {"id": "twice", "text": "ok"}]},
        "publication id 'twice' is given more than once in the batch",
    ),
    ({"txt": "typo"}, "publications"),
    ({"text": "x", "attributes": {"Source": "rss"}}, "should match pattern"),
    ({"text": "x", "lang": "klingon"}, "unknown language 'klingon'"),
    ({"text": "x", "attributes": {"has": "x"}}, "'has' is reserved for filters"),
    ({"text": "x", "attributes": {"a": {"b": 1}}}, "a string, a number, a boolean or a list"),
    ({"text": "x", "attributes": {"a": [1]}}, "a string, a number, a boolean or a list"),
    ({"text": "x", "attributes": {"a": ["t"] * 17}}, "lists 17 strings; at most 16"),
    ({"text": "x", "attributes": {"a": "v" * 1025}}, "a string of 1025 characters"),
    ({"text": "x", "attributes": {f"k{i}": 1 for i in range(17)}}, "at most 16 items"),
    ({"text": "x", "attributes": {f"k{i}": "v" * 999 for i in range(5)}}, "at most 4096"),
    ([1, 2, 3], "valid dictionary"),
]


@pytest.mark.parametrize(("body", "says"), BAD_PUBLICATIONS)
def test_bad_publications_are_refused_and_deliver_nothing(
    api: httpx.Client, cluster: RunningCluster, receiver: Receiver, body: Any, says: str
) -> None:
    watcher = api.post("/subscriptions", json={"query": "fine ok", "callback_url": receiver.hook})
    assert watcher.status_code == 201

    def matched_so_far() -> list[int]:
        return [httpx.get(f"{u}/stats").json()["publications"] for u in cluster.matcher_urls]

    before = matched_so_far()
    response = api.post("/publications", json=body)
    assert response.status_code == 422, response.text
    assert says in response.text
    assert matched_so_far() == before
    assert api.delete(f"/subscriptions/{watcher.json()['id']}").status_code == 204


def test_a_refused_long_value_is_not_sent_back_whole(api: httpx.Client) -> None:
    text = "y" * 1_000_000
    response = api.post("/publications", json={"text": text})
    assert response.status_code == 422
    assert len(response.content) < 1_000  # FastAPI's own 422 echoed the whole megabyte
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", "publications", 0, "text"]
    assert error["msg"] == "String should have at most 16384 characters"
    assert error["input"] == "y" * 200 + "… (1,000,000 characters)"
    many = api.post("/publications", json={"publications": [{"text": "ok"}] * 1001})
    assert many.status_code == 422
    assert len(many.content) < 1_000
    assert "input" not in many.json()["detail"][0]  # 1,001 publications: left out
    short = api.post("/publications", json={"text": 5})
    assert short.json()["detail"][0]["input"] == 5  # short values are still shown


def test_unknown_subscription_is_404(api: httpx.Client) -> None:
    for method in ("GET", "DELETE"):
        response = api.request(method, "/subscriptions/0123456789abcdef")
        assert response.status_code == 404
        assert "no subscription" in response.json()["detail"]


def test_a_valid_subscription_round_trips(api: httpx.Client) -> None:
    created = api.post(
        "/subscriptions", json={"query": "Running White-House", "callback_url": HOOK}
    )
    assert created.status_code == 201
    body = created.json()
    assert body["terms"] == ["hous", "run", "white"]
    assert body["secret"].startswith("whsec_")  # shown once, at creation
    fetched = api.get(f"/subscriptions/{body['id']}")
    assert fetched.status_code == 200
    # Counted from now on: a GET shows its counters (none yet).
    assert fetched.json() == body | {"secret": None, "counters": NOT_COUNTED}
    assert api.delete(f"/subscriptions/{body['id']}").status_code == 204


@pytest.mark.parametrize(("body", "says"), BAD_SUBSCRIPTIONS)
def test_a_batch_with_one_bad_subscription_is_refused_whole(
    api: httpx.Client, cluster: RunningCluster, redis_url: str, body: dict[str, Any], says: str
) -> None:
    good = {"query": "white house", "callback_url": HOOK}
    batch = {"subscriptions": [good, body, good]}
    response = _refused_changing_nothing(
        api, cluster, redis_url, "/subscriptions/batch", batch, says
    )
    # The refusal names the item: in wordcast's message, or in the schema error's location.
    assert "subscription 1:" in response.text or '"subscriptions",1' in response.text


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"subscriptions": []}, "at least 1 item"),
        (
            {"subscriptions": [{"query": "a b", "callback_url": HOOK}] * 1_001},
            "at most 1000 items",
        ),
        ({"subscriptions": [{"query": "white house", "callback_url": HOOK}], "x": 1}, "extra"),
        ({}, "subscriptions"),
    ],
)
def test_a_bad_batch_is_refused(
    api: httpx.Client, cluster: RunningCluster, redis_url: str, body: dict[str, Any], says: str
) -> None:
    _refused_changing_nothing(api, cluster, redis_url, "/subscriptions/batch", body, says)


def test_a_batch_registers_every_subscription_in_order(api: httpx.Client) -> None:
    items = [
        {"query": "Running White-House", "callback_url": HOOK},
        {"pattern": "pie*tea", "callback_url": HOOK},
        {"query": "python packages", "callback_url": HOOK},
    ]
    created = api.post("/subscriptions/batch", json={"subscriptions": items})
    assert created.status_code == 201, created.text
    subs = created.json()["subscriptions"]
    assert [s["kind"] for s in subs] == ["keywords", "pattern", "keywords"]
    assert [s["terms"] for s in subs] == [["hous", "run", "white"], [], ["packag", "python"]]
    assert subs[1]["pattern"] == "pie*tea"
    assert subs[1]["anchor"] == "pie"
    assert len({s["id"] for s in subs}) == 3
    for sub in subs:
        assert sub["secret"].startswith("whsec_")
        fetched = api.get(f"/subscriptions/{sub['id']}")
        assert fetched.status_code == 200
        assert fetched.json() == sub | {"secret": None, "counters": NOT_COUNTED}
        assert api.delete(f"/subscriptions/{sub['id']}").status_code == 204


def test_a_batch_delete_deletes_all_or_nothing_and_is_in_effect_when_it_answers(
    api: httpx.Client, cluster: RunningCluster
) -> None:
    def held() -> int:
        return sum(httpx.get(f"{u}/stats").json()["subscriptions"] for u in cluster.matcher_urls)

    before = held()
    items = [{"query": q, "callback_url": HOOK} for q in ("zebra unicorn", "quartz", "opal ruby")]
    created = api.post("/subscriptions/batch", json={"subscriptions": items}).json()
    mine = [sub["id"] for sub in created["subscriptions"]]
    other_key = tenant_key(cluster, "batch-delete-other")
    theirs = httpx.post(
        f"{cluster.router_url}/subscriptions",
        json={"query": "jade onyx", "callback_url": HOOK},
        headers={"authorization": f"Bearer {other_key}"},
    ).json()["id"]
    assert held() == before + 4

    refused = api.post("/subscriptions/batch/delete", json={"ids": [mine[0], theirs, mine[1]]})
    assert refused.status_code == 404
    assert theirs in refused.json()["detail"]
    assert "nothing was deleted" in refused.json()["detail"]
    assert all(api.get(f"/subscriptions/{i}").status_code == 200 for i in mine)

    done = api.post("/subscriptions/batch/delete", json={"ids": [mine[0], mine[1], mine[0]]})
    assert done.status_code == 200
    assert done.json() == {"deleted": mine[:2]}
    assert held() == before + 2  # the matchers dropped them before the router answered
    assert [api.get(f"/subscriptions/{i}").status_code for i in mine] == [404, 404, 200]
    for bad in ({"ids": []}, {"ids": ["no spaces"]}, {"ids": ["a"] * 1001}, {"id": mine[2]}):
        assert api.post("/subscriptions/batch/delete", json=bad).status_code == 422, bad
    assert api.get(f"/subscriptions/{mine[2]}").status_code == 200


def test_oversized_request_body_is_413(api: httpx.Client) -> None:
    response = api.post(
        "/publications",
        content=b" " * (limits.MAX_REQUEST_BYTES + 1),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 413
    assert "larger than" in response.text


def test_openapi_docs_are_served(api: httpx.Client) -> None:
    schema = api.get("/openapi.json").json()
    assert {"/subscriptions", "/publications", "/subscriptions/{sub_id}"} <= set(schema["paths"])
    assert api.get("/docs").status_code == 200
    assert "wordcast_router_publications" in api.get("/metrics").text


# Issue 53's table: each is stored as read, with a warning naming the piece (or refused, strict).
MISREAD = [
    ("obama or biden", "`or` is a word"),
    ("pythn~1", "`pythn~1`: fuzzy matching is not supported"),
    ("python^2 snakes", "`python^2`: boosts are not read"),
    ("+apple pie", "every word is required here"),
]


@pytest.mark.parametrize(("query", "says"), MISREAD)
def test_a_query_read_otherwise_is_stored_with_a_warning_or_refused_when_strict(
    api: httpx.Client, cluster: RunningCluster, redis_url: str, query: str, says: str
) -> None:
    body = {"query": query, "callback_url": HOOK}
    preview = api.post("/subscriptions", params={"dry_run": "true"}, json=body)
    assert preview.status_code == 200, preview.text
    assert any(says in warning for warning in preview.json()["warnings"])
    refused = _refused_changing_nothing(
        api, cluster, redis_url, "/subscriptions?strict=true", body, says
    )
    assert "(strict)" in refused.text
    batch = {"subscriptions": [{"query": "white house", "callback_url": HOOK}, body]}
    refused = _refused_changing_nothing(
        api, cluster, redis_url, "/subscriptions/batch?strict=true", batch, says
    )
    assert "subscription 1:" in refused.text
    created = api.post("/subscriptions", json=body)
    assert created.status_code == 201, created.text
    warnings = created.json()["warnings"]
    assert any(says in warning for warning in warnings)
    fetched = api.get(f"/subscriptions/{created.json()['id']}")
    assert fetched.json()["warnings"] == warnings  # the stored query says so too
    assert api.delete(f"/subscriptions/{created.json()['id']}").status_code == 204


def test_a_query_read_as_meant_has_no_warning_even_when_strict(api: httpx.Client) -> None:
    items = [
        {"query": "(obama OR biden) senate -house", "callback_url": HOOK},
        {"query": '"white house" NEAR/3(vote senate)', "callback_url": HOOK},
        {"pattern": "hous*", "callback_url": HOOK},
    ]
    created = api.post(
        "/subscriptions/batch", params={"strict": "true"}, json={"subscriptions": items}
    )
    assert created.status_code == 201, created.text
    subs = created.json()["subscriptions"]
    assert [s["warnings"] for s in subs] == [[], [], []]
    for sub in subs:
        assert api.delete(f"/subscriptions/{sub['id']}").status_code == 204
