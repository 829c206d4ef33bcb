"""Following `kubectl scale`: the rule routers re-map by, reading a StatefulSet's replicas, and
starting the learner's CronJob once a router has re-mapped by hashing.

No cluster runs here: the Kubernetes API is answered by an in-process transport, which checks
what wordcast asks for (the scale subresource of the named StatefulSet, in the configured
namespace, with the account's token) and how it reads the answers, errors included. That the
manifests give the routers and matchers the right to ask is checked in test_deploy.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.support import CRONJOB, KUBE_CONFIG, cronjob_api, scale_body
from wordcast.errors import KubernetesUnavailable
from wordcast.ops.kube import CronJobRun, StatefulSetReplicas
from wordcast.ops.scaling import version_for


def _read(name: str, respond: Any) -> tuple[int | str, list[httpx2.Request]]:
    asked: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        asked.append(request)
        return respond(request)  # type: ignore[no-any-return]

    async def read() -> int | str:
        replicas = StatefulSetReplicas(name, KUBE_CONFIG, transport=httpx2.MockTransport(handler))
        try:
            return await replicas.get()
        except KubernetesUnavailable as exc:
            return str(exc)
        finally:
            await replicas.aclose()

    return asyncio.run(read()), asked


def test_reads_the_scale_subresource_of_the_named_statefulset() -> None:
    replicas, asked = _read(
        "matcher", lambda _: httpx2.Response(200, json=scale_body({"replicas": 6}))
    )
    assert replicas == 6, "spec (asked for), not status (running now)"
    [request] = asked
    assert request.method == "GET"
    assert request.url.path == "/apis/apps/v1/namespaces/wc/statefulsets/matcher/scale"
    assert request.headers["authorization"] == "Bearer account-token"


def test_a_statefulset_scaled_to_zero_has_no_replicas_field() -> None:
    replicas, _ = _read("matcher", lambda _: httpx2.Response(200, json=scale_body({})))
    assert replicas == 0


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (403, 'cannot get resource "statefulsets/scale"'),
        (404, 'statefulsets.apps "matcher" not found'),
    ],
)
def test_api_refusals_name_the_statefulset_and_the_reason(status: int, message: str) -> None:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message}
    result, _ = _read("matcher", lambda _: httpx2.Response(status, json=body | {"code": status}))
    assert result == (
        f"reading the replicas of statefulset/matcher from the Kubernetes API: {status} {message}"
    )


def test_an_unreachable_api_is_a_wordcast_error() -> None:
    def unreachable(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused", request=request)

    result, _ = _read("matcher", unreachable)
    assert isinstance(result, str)
    assert result.endswith("connection refused")


def test_outside_a_pod_without_a_kubeconfig_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", "/nonexistent")

    async def read() -> None:
        await StatefulSetReplicas("matcher").get()

    with pytest.raises(KubernetesUnavailable, match="not in a pod"):
        asyncio.run(read())


def _start(job: str, transport: Any, cronjob: str = "learn-mapping") -> bool | str:
    async def start() -> bool | str:
        run = CronJobRun(cronjob, KUBE_CONFIG, transport=transport)
        try:
            return await run.start(job)
        except KubernetesUnavailable as exc:
            return str(exc)
        finally:
            await run.aclose()

    return asyncio.run(start())


def test_starting_the_learner_creates_a_job_from_the_cronjob_template() -> None:
    created: list[dict[str, Any]] = []
    assert _start("learn-mapping-scale-v3", cronjob_api(created)) is True
    [job] = created
    metadata = job["metadata"]
    assert metadata["name"] == "learn-mapping-scale-v3"
    assert metadata["annotations"] == {"cronjob.kubernetes.io/instantiate": "manual"}
    assert metadata["labels"] == {"team": "search"}
    assert metadata["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "name": "learn-mapping",
            "uid": "c0ffee-uid",
            "controller": True,
        }
    ]
    assert job["spec"] == CRONJOB["spec"]["jobTemplate"]["spec"]  # type: ignore[index]


def test_a_job_of_that_name_already_started_is_not_an_error() -> None:
    assert _start("learn-mapping-scale-v3", cronjob_api([], create_status=409)) is False


def test_refusals_to_start_the_learner_name_what_failed() -> None:
    refused = _start("learn-mapping-scale-v3", cronjob_api([], create_status=403))
    assert refused == (
        "creating job/learn-mapping-scale-v3 from cronjob/learn-mapping: 403 refused"
    )
    missing = _start("x-scale-v1", cronjob_api([]), cronjob="no-such-cronjob")
    assert isinstance(missing, str)
    assert missing.startswith("reading cronjob/no-such-cronjob from the Kubernetes API: 404")


@given(
    wanted=st.none() | st.integers(1, 300),
    routed=st.integers(1, 300),
    settled=st.booleans(),
    first_missing=st.none() | st.integers(0, 300),
)
def test_a_version_is_written_only_for_a_new_number_the_cluster_can_take(
    wanted: int | None, routed: int, settled: bool, first_missing: int | None
) -> None:
    writes = version_for(wanted, routed, settled, first_missing)
    if writes:
        assert wanted is not None, "only a new number"
        assert wanted != routed, "only a new number"
        assert settled, "never in the middle of a migration"
        assert wanted < routed or first_missing is None, "growing waits for the new matchers"
    else:
        assert (
            wanted is None
            or wanted == routed
            or not settled
            or (wanted > routed and first_missing is not None)
        )
