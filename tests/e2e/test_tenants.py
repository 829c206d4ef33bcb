"""Tenants and API keys: every request needs a key, and a tenant sees only its own subscriptions."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import subprocess
import uuid

import httpx
import pydantic
import pytest

from tests.helpers import (
    AUTH,
    RunningCluster,
    eventually,
    extra_router,
    tenant_key,
    wordcast_cli,
)
from wordcast.corpus.workload import post_queries, sample_posts
from wordcast.errors import LimitExceeded
from wordcast.services.router.batches import BatchItem
from wordcast.services.router.settings import DEFAULT_ADMIN_TOKEN, RouterSettings
from wordcast.services.router.state import RouterState
from wordcast.services.router.tenants import KEY_CACHE_SECONDS
from wordcast.storage import Store
from wordcast.storage.records import Subscription
from wordcast.storage.redis import connect, connect_sync

HOOK = "http://127.0.0.1:9/hook"


def _as(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def test_requests_without_a_valid_key_get_401(cluster: RunningCluster) -> None:
    router = httpx.Client(base_url=cluster.router_url, timeout=30)
    for headers in ({}, _as("wck_not-a-key"), {"authorization": "Basic Zm9vOmJhcg=="}):
        for method, path, body in [
            ("POST", "/subscriptions", {"query": "white house", "callback_url": HOOK}),
            ("GET", "/subscriptions", None),
            ("GET", "/subscriptions/0123456789abcdef", None),
            ("DELETE", "/subscriptions/0123456789abcdef", None),
            ("POST", "/publications", {"text": "the white house"}),
        ]:
            response = router.request(method, path, json=body, headers=headers)
            assert response.status_code == 401, (method, path, headers, response.text)
            assert response.headers["www-authenticate"] == "Bearer"


def test_tenants_see_and_delete_only_their_own(cluster: RunningCluster, redis_url: str) -> None:
    alice, bob = tenant_key(cluster, "alice"), tenant_key(cluster, "bob")
    router = httpx.Client(base_url=cluster.router_url, timeout=30)
    created = router.post(
        "/subscriptions",
        json={"query": "tenant isolation", "callback_url": HOOK},
        headers=_as(alice),
    )
    assert created.status_code == 201
    sub_id = created.json()["id"]

    assert router.get(f"/subscriptions/{sub_id}", headers=_as(alice)).status_code == 200
    assert router.get(f"/subscriptions/{sub_id}", headers=_as(bob)).status_code == 404
    assert router.delete(f"/subscriptions/{sub_id}", headers=_as(bob)).status_code == 404
    assert router.get(f"/subscriptions/{sub_id}", headers=_as(alice)).status_code == 200

    def listed(key: str) -> set[str]:
        ids, cursor = set(), 0
        while True:
            page = router.get("/subscriptions", params={"cursor": cursor}, headers=_as(key))
            assert page.status_code == 200
            ids |= {s["id"] for s in page.json()["subscriptions"]}
            cursor = page.json()["next_cursor"]
            if cursor == 0:
                return ids

    assert sub_id in listed(alice)
    assert sub_id not in listed(bob)
    assert router.delete(f"/subscriptions/{sub_id}", headers=_as(alice)).status_code == 204
    assert sub_id not in listed(alice)

    # Only hashes of the keys are stored.
    client = connect_sync(redis_url)
    stored = {k: client.get(k) for k in client.scan_iter(match=f"{cluster.namespace}:apikey:*")}
    assert f"{cluster.namespace}:apikey:{hashlib.sha256(alice.encode()).hexdigest()}" in stored
    assert all(alice not in k and alice != v for k, v in stored.items())


def test_the_cli_lists_and_deletes_a_tenants_own_subscriptions(cluster: RunningCluster) -> None:
    """`wordcast subscriptions` lists every subscription of the key's tenant across pages, and
    only those; `wordcast unsubscribe` deletes by id (an unknown id deletes nothing) or --all."""
    carol, dave = tenant_key(cluster, "carol"), tenant_key(cluster, "dave")
    router = httpx.Client(base_url=cluster.router_url, timeout=60)
    queries = post_queries(sample_posts(3_000, seed=5), 620, seed=5)  # more than a page (500)
    items = [{"query": q, "callback_url": HOOK} for q in queries]
    items += [{"query": "json OR yaml -xml", "callback_url": HOOK}]  # a boolean query: one id
    items += [{"pattern": "pars*json", "callback_url": HOOK}]
    created: set[str] = set()
    for start in range(0, len(items), 500):
        answer = router.post(
            "/subscriptions/batch",
            json={"subscriptions": items[start : start + 500]},
            headers=_as(carol),
        )
        assert answer.status_code == 201, answer.text
        created |= {sub["id"] for sub in answer.json()["subscriptions"]}
    assert len(created) == len(items)
    other = router.post(
        "/subscriptions", json={"query": "not carols", "callback_url": HOOK}, headers=_as(dave)
    ).json()["id"]

    def wordcast(key: str, *args: str) -> subprocess.CompletedProcess[str]:
        return wordcast_cli(
            *args, router=cluster.router_url, env={"WORDCAST_API_KEY": key}, timeout=120
        )

    listed = wordcast(carol, "subscriptions", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert sorted(row["id"] for row in rows) == sorted(created)
    assert {row["kind"] for row in rows} == {"keywords", "pattern"}
    plain = wordcast(carol, "subscriptions")
    assert len(plain.stdout.splitlines()) == len(created)
    assert f"{len(created)} subscriptions" in plain.stderr
    assert any("pattern 'pars*json'" in line for line in plain.stdout.splitlines())

    first, second, *rest = sorted(created)
    refused = wordcast(carol, "unsubscribe", first, "0123456789abcdef0123456789abcdef")
    assert refused.returncode == 2
    assert "'0123456789abcdef0123456789abcdef'" in refused.stderr
    assert "nothing was deleted" in refused.stderr
    assert router.get(f"/subscriptions/{first}", headers=_as(carol)).status_code == 200
    mine_not = wordcast(dave, "unsubscribe", first)  # another tenant's id is unknown to dave
    assert mine_not.returncode == 2
    assert "nothing was deleted" in mine_not.stderr
    assert wordcast(carol, "unsubscribe").returncode == 2  # neither ids nor --all
    invalid = wordcast(carol, "subscribe", "python", "--callback", "ftp://example.com/hook")
    assert invalid.returncode == 2
    assert "HTTP 422: callback_url: URL scheme should be 'http' or 'https'" in invalid.stderr

    deleted = wordcast(carol, "unsubscribe", first, second)
    assert deleted.returncode == 0, deleted.stderr
    assert "2 subscriptions deleted" in deleted.stdout
    for sub_id in (first, second):
        assert router.get(f"/subscriptions/{sub_id}", headers=_as(carol)).status_code == 404

    everything = wordcast(carol, "unsubscribe", "--all")
    assert everything.returncode == 0, everything.stderr
    assert f"{len(rest)} subscriptions deleted" in everything.stdout
    assert wordcast(carol, "subscriptions", "--json").stdout == ""
    assert router.get(f"/subscriptions/{other}", headers=_as(dave)).status_code == 200


def test_totals_count_a_boolean_query_once(cluster: RunningCluster) -> None:
    """The listing's total and the admin's tenant list count subscriptions, not the records a
    boolean query's alternatives take (which still count against the tenant's limit)."""
    tenant = f"tally-{uuid.uuid4().hex[:6]}"
    router = httpx.Client(base_url=cluster.router_url, headers=_as(tenant_key(cluster, tenant)))
    admin = httpx.Client(base_url=cluster.router_url, headers=_as(DEFAULT_ADMIN_TOKEN))

    def totals() -> tuple[int, int]:
        listed = router.get("/subscriptions", params={"q": "no such text"}).json()
        tenants = admin.get("/admin/tenants").json()["tenants"]
        return listed["total"], next(t["subscriptions"] for t in tenants if t["tenant"] == tenant)

    either = router.post("/subscriptions", json={"query": "(red OR blue OR green) fish"})
    assert either.status_code == 201, either.text
    made = router.post(
        "/subscriptions/batch",
        json={"subscriptions": [{"query": "salmon OR trout"}, {"pattern": "pike*"}]},
    )
    assert made.status_code == 201, made.text
    assert totals() == (3, 3)
    assert router.delete(f"/subscriptions/{either.json()['id']}").status_code == 204
    assert totals() == (2, 2)


def test_the_tenant_list_names_the_development_tenant_with_its_subscriptions(
    cluster: RunningCluster,
) -> None:
    """The development key's tenant has no key stored, yet holds subscriptions: the admin's
    list (and ``wordcast tenant list``) names it, with no key counted (issue 57)."""
    dev = httpx.Client(base_url=cluster.router_url, headers=AUTH)
    made = dev.post("/subscriptions", json={"query": "listed tenants"})
    assert made.status_code == 201, made.text
    admin = httpx.Client(base_url=cluster.router_url, headers=_as(DEFAULT_ADMIN_TOKEN))
    tenants = {t["tenant"]: t for t in admin.get("/admin/tenants").json()["tenants"]}
    assert tenants["dev"]["keys"] == 0
    assert tenants["dev"]["subscriptions"] >= 1
    assert dev.delete(f"/subscriptions/{made.json()['id']}").status_code == 204


def test_admin_operations_need_the_admin_token(cluster: RunningCluster) -> None:
    body = {"tenant": "mallory"}
    url = f"{cluster.router_url}/admin/tenants"
    assert httpx.post(url, json=body).status_code == 401
    assert httpx.post(url, json=body, headers=_as(tenant_key(cluster, "carol"))).status_code == 401
    assert (
        httpx.post(url, json={"tenant": "no spaces"}, headers=_as(DEFAULT_ADMIN_TOKEN)).status_code
        == 422
    )


def test_an_admin_lists_and_revokes_a_tenants_keys(cluster: RunningCluster) -> None:
    tenant = f"erin-{uuid.uuid4().hex[:6]}"
    admin = httpx.Client(base_url=cluster.router_url, headers=_as(DEFAULT_ADMIN_TOKEN), timeout=30)
    made = [admin.post("/admin/tenants", json={"tenant": tenant}).json() for _ in range(2)]
    for key in made:
        assert key["key_id"] == hashlib.sha256(key["api_key"].encode()).hexdigest()[:16]
    listed = admin.get(f"/admin/tenants/{tenant}/keys").json()
    assert sorted(k["key_id"] for k in listed["keys"]) == sorted(k["key_id"] for k in made)
    revoked, kept = made
    mine = f"{cluster.router_url}/subscriptions"
    assert httpx.get(mine, headers=_as(revoked["api_key"])).status_code == 200
    # Only the admin token lists or revokes, even the tenant's own keys.
    gone = f"/admin/tenants/{tenant}/keys/{revoked['key_id']}"
    as_tenant = httpx.delete(cluster.router_url + gone, headers=_as(kept["api_key"]))
    assert as_tenant.status_code == 401
    assert admin.delete(gone).status_code == 204
    # This router forgets the key at once, though it had just cached it.
    assert httpx.get(mine, headers=_as(revoked["api_key"])).status_code == 401
    assert httpx.get(mine, headers=_as(kept["api_key"])).status_code == 200
    assert [k["key_id"] for k in admin.get(f"/admin/tenants/{tenant}/keys").json()["keys"]] == [
        kept["key_id"]
    ]
    again = admin.delete(gone)
    assert again.status_code == 404
    assert "nothing was revoked" in again.json()["detail"]
    assert admin.delete(f"/admin/tenants/{tenant}/keys/not-an-id").status_code == 422
    assert admin.get("/admin/tenants/no%20spaces/keys").status_code == 422


def test_a_key_revoked_on_one_router_stops_working_on_the_others(
    cluster: RunningCluster, redis_url: str
) -> None:
    key = httpx.post(
        f"{cluster.router_url}/admin/tenants",
        json={"tenant": f"gail-{uuid.uuid4().hex[:6]}"},
        headers=_as(DEFAULT_ADMIN_TOKEN),
        timeout=30,
    ).json()
    with extra_router(cluster, redis_url) as other:
        # The other router checks the key, and so remembers it for KEY_CACHE_SECONDS.
        assert httpx.get(f"{other}/subscriptions", headers=_as(key["api_key"])).status_code == 200
        revoked = httpx.delete(
            f"{cluster.router_url}/admin/tenants/{key['tenant']}/keys/{key['key_id']}",
            headers=_as(DEFAULT_ADMIN_TOKEN),
        )
        assert revoked.status_code == 204
        # Well before its memory of the key runs out, the other router has seen the revocation.
        eventually(
            lambda: (
                httpx.get(f"{other}/subscriptions", headers=_as(key["api_key"])).status_code == 401
            ),
            KEY_CACHE_SECONDS / 2,
            what="the other router refusing the revoked key",
        )


def test_the_cli_makes_lists_and_revokes_keys(cluster: RunningCluster) -> None:
    tenant = f"frank-{uuid.uuid4().hex[:6]}"
    made = wordcast_cli("tenant", "create", tenant, router=cluster.router_url)
    assert made.returncode == 0, made.stderr
    key = json.loads(made.stdout)
    assert key["tenant"] == tenant
    assert key["api_key"].startswith("wck_")
    listed = wordcast_cli("tenant", "keys", tenant, router=cluster.router_url)
    assert listed.stdout.split()[0] == key["key_id"]
    assert "1 API key for" in listed.stderr
    refused = wordcast_cli(
        "tenant", "keys", tenant, "--admin-token", "wrong", router=cluster.router_url
    )
    assert refused.returncode == 2
    assert "admin token" in refused.stderr
    revoked = wordcast_cli("tenant", "revoke", tenant, key["key_id"], router=cluster.router_url)
    assert revoked.returncode == 0, revoked.stderr
    unknown = wordcast_cli(
        "subscriptions", router=cluster.router_url, env={"WORDCAST_API_KEY": key["api_key"]}
    )
    assert unknown.returncode == 2
    assert "HTTP 401: unknown API key" in unknown.stderr


def test_the_cli_lists_tenants_and_says_when_a_tenant_had_keys(cluster: RunningCluster) -> None:
    tenant = f"grace-{uuid.uuid4().hex[:6]}"
    first = wordcast_cli("tenant", "create", tenant, router=cluster.router_url)
    assert json.loads(first.stdout)["new_tenant"] is True
    assert "had API keys already" not in first.stderr
    second = wordcast_cli("tenant", "create", tenant, router=cluster.router_url)
    key = json.loads(second.stdout)
    assert key["new_tenant"] is False
    assert f"{tenant} had API keys already: this is another, and they stay valid" in second.stderr
    made = httpx.post(
        f"{cluster.router_url}/subscriptions",
        json={"query": "grace hopper"},
        headers={"authorization": f"Bearer {key['api_key']}"},
        timeout=30,
    )
    assert made.status_code == 201, made.text
    listed = wordcast_cli("tenant", "list", router=cluster.router_url)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert f"{tenant}  2 API keys, 1 subscription" in lines
    assert lines == sorted(lines)
    assert re.fullmatch(r"\d+ tenants?", listed.stderr.strip())
    refused = wordcast_cli("tenant", "list", tenant, router=cluster.router_url)
    assert refused.returncode == 2
    assert "none with list" in refused.stderr


def test_production_refuses_the_default_admin_token() -> None:
    with pytest.raises(pydantic.ValidationError, match="default admin token"):
        RouterSettings(environment="production")
    assert (
        RouterSettings(environment="production", admin_token="s3cret").environment == "production"
    )
    assert RouterSettings(environment="development").admin_token.get_secret_value()


def test_subscriptions_per_tenant_are_limited(redis_url: str, namespace: str) -> None:
    async def scenario() -> None:
        client = connect(redis_url)
        store = Store(client, namespace)

        def sub(n: int, tenant: str) -> Subscription:
            return Subscription(f"q{n}", "x y", ("x", "y"), HOOK, 0, tenant=tenant)

        await store.subscriptions.add(sub(1, "t1"), tenant_limit=2)
        await store.subscriptions.add(sub(2, "t1"), tenant_limit=2)
        before = await store.events.last_event_id()
        with pytest.raises(LimitExceeded, match="holds 2 subscriptions"):
            await store.subscriptions.add(sub(3, "t1"), tenant_limit=2)
        assert await store.events.last_event_id() == before  # nothing stored, nothing announced
        await store.subscriptions.add(
            sub(4, "t2"), tenant_limit=2
        )  # another tenant has its own quota
        await store.subscriptions.delete("q1")
        await store.subscriptions.add(sub(3, "t1"), tenant_limit=2)
        await client.aclose()

    asyncio.run(scenario())


def test_a_batch_over_the_quota_stores_nothing(
    cluster: RunningCluster, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORDCAST_CALLBACK_ALLOW", "127.0.0.0/8")  # the hook is on this machine
    with extra_router(cluster, redis_url, max_subscriptions_per_tenant="3") as url:
        headers = {"authorization": f"Bearer {tenant_key(cluster, 'batcher')}"}

        def batch(*queries: str) -> httpx.Response:
            body = {"subscriptions": [{"query": q, "callback_url": HOOK} for q in queries]}
            return httpx.post(f"{url}/subscriptions/batch", json=body, headers=headers, timeout=30)

        assert batch("alpha beta", "gamma delta").status_code == 201
        refused = batch("epsilon zeta", "eta theta")
        assert refused.status_code == 422
        assert "holds 2 subscriptions and the limit is 3" in refused.text
        assert "nothing was stored" in refused.text
        listed = httpx.get(f"{url}/subscriptions", headers=headers, timeout=30).json()
        assert sorted(s["query"] for s in listed["subscriptions"]) == ["alpha beta", "gamma delta"]

        # A boolean query's alternatives each count; the listing shows the query once.
        boolean = {"query": "iota OR kappa", "callback_url": HOOK}
        refused = httpx.post(f"{url}/subscriptions", json=boolean, headers=headers, timeout=30)
        assert refused.status_code == 422
        assert "2 more records do not fit" in refused.text
        first = listed["subscriptions"][0]["id"]
        assert httpx.delete(f"{url}/subscriptions/{first}", headers=headers).status_code == 204
        created = httpx.post(f"{url}/subscriptions", json=boolean, headers=headers, timeout=30)
        assert created.status_code == 201, created.text
        assert len(created.json()["alternatives"]) == 2
        listed = httpx.get(f"{url}/subscriptions", headers=headers, timeout=30).json()
        assert len(listed["subscriptions"]) == 2
        assert "iota OR kappa" in {s["query"] for s in listed["subscriptions"]}
        assert batch("lambda mu").status_code == 422  # three records held


@pytest.mark.parametrize(
    ("items", "refused"),
    [
        (
            [
                ("query", "alpha beta", HOOK, ""),
                ("pattern", "abc*def", HOOK, ""),
                ("query", "gamma", HOOK, ""),
            ],
            r"subscription 1: .*the 1 stored before it were withdrawn",
        ),
        # The second alternative of the first query does not fit: its first is withdrawn.
        (
            [("query", "alpha OR beta", HOOK, ""), ("query", "gamma", HOOK, "")],
            r"subscription 0: .*the 1 stored before it were withdrawn",
        ),
    ],
)
def test_a_batch_that_fails_halfway_withdraws_what_it_stored(
    items: list[tuple[str, str, str, str]],
    refused: str,
    redis_url: str,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The quota can fill between the batch's check and its last item (another router, another
    request): what the batch stored before is deleted again, and the error says so."""

    async def scenario() -> None:
        client = connect(redis_url)
        store = Store(client, namespace)
        settings = RouterSettings(
            environment="development",
            matcher_urls=["http://127.0.0.1:9", "http://127.0.0.1:9"],  # nobody: syncs fail, logged
            sync_timeout_s=0.2,
            max_subscriptions_per_tenant=3,
            callback_allow=["127.0.0.0/8"],
        )
        state = RouterState(settings, store)

        real_count = store.subscriptions.tenant_count

        async def count_then_race(tenant: str) -> int:
            held = await real_count(tenant)
            for n in range(2):  # another request fills the quota right after the batch's check
                await store.subscriptions.add(
                    Subscription(f"other{n}", "x y", ("x", "y"), HOOK, 0, tenant=tenant), 3
                )
            return held

        monkeypatch.setattr(store.subscriptions, "tenant_count", count_then_race)
        with pytest.raises(LimitExceeded, match=refused):
            await state.subscribing.subscribe_batch([BatchItem(*item) for item in items], "t1")
        assert await real_count("t1") == 2  # the other request's two, none of the batch
        assert await store.word_maps.subscribed_words() == {"x", "y"}
        assert sum((await store.word_maps.pattern_loads()).values()) == 0
        await state.close()
        await client.aclose()

    asyncio.run(scenario())
