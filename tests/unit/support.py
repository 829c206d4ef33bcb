"""What unit test modules share: the matcher's check of one post's alternatives, a matcher's
boolean, plain and pattern subscriptions, and a fake Kubernetes API."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import httpx2
from lightkube.config.kubeconfig import KubeConfig

from wordcast.query.alternatives import HeldAlternatives
from wordcast.query.boolean import BooleanQuery, parse_query, part_id
from wordcast.storage.records import Subscription


def held_subscriptions(query: str) -> tuple[HeldAlternatives, dict[str, Subscription]]:
    """What a matcher holds for a boolean ``query`` (its alternatives ``q~k``), a plain query
    (``plain``: senate, tagged "senate") and a pattern (``wild``: h?use* s*e)."""
    read = parse_query(query)
    held = HeldAlternatives()
    subscriptions = {}
    for part in range(len(read.clauses)):
        stored = part_id("q", part)
        held.add(stored, read)
        subscriptions[stored] = Subscription(stored, query, read.clauses[part].words, "u", 0)
    subscriptions["plain"] = Subscription("plain", "senate", ("senat",), "u", 0, tag="senate")
    subscriptions["wild"] = Subscription("wild", "", (), "u", 0, pattern="h?use* s*e")
    return held, subscriptions


def delivered_by_alternatives(
    read: BooleanQuery,
    terms: AbstractSet[str],
    positions: Mapping[str, Sequence[int]] | None = None,
) -> list[tuple[str, int]]:
    """The matcher's check, for one post: each alternative that matched on its words is a
    candidate, and HeldAlternatives keeps the one that delivers (if any)."""
    held = HeldAlternatives()
    stored = [part_id("q", k) for k in range(len(read.clauses))]
    if not read.is_plain:
        for stored_id in stored:
            held.add(stored_id, read)
    candidates = [
        (stored_id, 0)
        for stored_id, clause in zip(stored, read.clauses, strict=True)
        if set(clause.words) <= terms
    ]
    return held.delivering(candidates, lambda _: terms, lambda _: positions or {})


KUBE_CONFIG = KubeConfig.from_dict(
    {
        "clusters": [{"name": "c", "cluster": {"server": "https://kubernetes.test"}}],
        "users": [{"name": "u", "user": {"token": "account-token"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "wc"}}],
        "current-context": "x",
    }
)


CRONJOB = {
    "kind": "CronJob",
    "apiVersion": "batch/v1",
    "metadata": {"name": "learn-mapping", "namespace": "wc", "uid": "c0ffee-uid"},
    "spec": {
        "schedule": "15 3 * * *",
        "jobTemplate": {
            "metadata": {"labels": {"team": "search"}},
            "spec": {
                "backoffLimit": 1,
                "template": {
                    "metadata": {"labels": {"app": "learn-mapping"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {"name": "learn", "image": "wordcast:0.1.0", "args": ["learn"]}
                        ],
                    },
                },
            },
        },
    },
}


def scale_body(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {"name": "matcher", "namespace": "wc"},
        "spec": spec,
        "status": {"replicas": 4},
    }


def cronjob_api(created: list[dict[str, Any]], create_status: int = 201) -> Any:
    """An API that has the learner's CronJob and records the Jobs created from it."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        if (
            request.method == "GET"
            and path == "/apis/batch/v1/namespaces/wc/cronjobs/learn-mapping"
        ):
            return httpx2.Response(200, json=CRONJOB)
        if request.method == "POST" and path == "/apis/batch/v1/namespaces/wc/jobs":
            body = json.loads(request.content)
            if create_status != 201:
                status = {"kind": "Status", "code": create_status, "message": "refused"}
                return httpx2.Response(create_status, json=status)
            created.append(body)
            return httpx2.Response(201, json=body)
        return httpx2.Response(404, json={"kind": "Status", "code": 404, "message": "no " + path})

    return httpx2.MockTransport(handler)
