"""What unit test modules share: the matcher's check of one post's alternatives, a matcher's
boolean, plain and pattern subscriptions, the messages of decided matches as the writer writes
them (held to the reference), and a fake Kubernetes API."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import httpx2
from lightkube.config.kubeconfig import KubeConfig

from wordcast.engines.registry import pattern_index, term_index
from wordcast.query.alternatives import HeldAlternatives
from wordcast.query.boolean import BooleanQuery, parse_query, part_id
from wordcast.routing.placement import Placement, decode, encode
from wordcast.services.matcher.explanations import Explanations
from wordcast.services.matcher.index import Batch, MatcherIndex
from wordcast.services.matcher.messages import MessageOptions, MessageWriter
from wordcast.storage.outbox import Message
from wordcast.storage.records import Subscription
from wordcast.testing.messages import messages as reference_messages


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


PLACED_WORDS = [f"w{i}" for i in range(12)]


def placed_subscriptions(rng: random.Random) -> list[Subscription]:
    """400 subscriptions of words w0…w11 on matcher 0: placed everywhere, from a mapping
    version on, hot words' copies, elsewhere, and patterns; of tenants a and b."""
    subs = []
    for i in range(400):
        terms = tuple(sorted(rng.sample(PLACED_WORDS, rng.randint(1, 3))))
        kind = rng.choice(["everywhere", "everywhere", "versions", "hot", "elsewhere", "pattern"])
        placements: tuple[Placement, ...]
        if kind == "everywhere":  # as records hold it: decoded, cached and shared
            placements = decode(encode((Placement(0, 0),)))
        elif kind == "versions":
            placements = (Placement(1, 0, 2), Placement(0, 2))
        elif kind == "hot":
            placements = (Placement(0, 0, None, terms[0], frozenset({1, 3})),)
        elif kind == "elsewhere":
            placements = (Placement(0, 0, 1), Placement(1, 1))
        else:
            placements = ()
        query = " ".join(terms) if rng.random() < 0.8 else f"{terms[0]} -{rng.choice(PLACED_WORDS)}"
        subs.append(
            Subscription(
                f"s{i}",
                "" if kind == "pattern" else query,
                () if kind == "pattern" else terms,
                "http://x/hook",
                0,
                pattern=f"{terms[0]}*{terms[-1]}" if kind == "pattern" else "",
                anchor=terms[0] if kind == "pattern" else "",
                tenant=rng.choice(["a", "b"]),
                placements=placements,
                created=1e9 + i,
            )
        )
    return subs


def routed_batch(
    rows: Sequence[tuple[str, str, Sequence[str], bool]],
    publisher: str = "",
    stream: str = "",
    **kw: Any,
) -> Batch:
    """A batch of (id, text, terms, flagged for the patterns) rows, as a matcher takes it."""
    return Batch(
        [row[0] for row in rows],
        [row[1] for row in rows],
        [tuple(row[2]) for row in rows],
        publisher,
        stream,
        flagged=frozenset(k for k, row in enumerate(rows) if row[3]),
        **kw,
    )


def shown(found: Iterable[Message]) -> list[tuple[object, ...]]:
    """What the reference and the writer must agree on, message by message (in no order)."""
    return sorted(
        (
            m.tenant,
            m.callback_url,
            m.webhook_id,
            m.body,
            m.matches,
            m.subscription_ids,
            m.counts,
            m.incarnations,
        )
        for m in found
    )


def written(
    pairs: Sequence[tuple[str, int]],
    batch: Batch,
    subscriptions: Mapping[str, Subscription],
    alternatives: HeldAlternatives,
    most: int = 100,
    *,
    explain: bool = True,
    max_bytes: int = 1 << 20,
    subscriptions_max: int | None = None,
    payload_version: int = 2,
) -> list[Message]:
    """The messages of the matches ``pairs`` (stored id, position) as the matcher's writer
    writes them, checked byte for byte against the reference's."""
    index = MatcherIndex(0, lambda: term_index("compact-trie"), lambda: pattern_index("naive"))
    index.subscriptions = dict(subscriptions)
    index.alternatives = alternatives
    options = MessageOptions(most, max_bytes, subscriptions_max, explain, payload_version)
    found, count = MessageWriter(index, options).write(batch, pairs)
    reference = reference_messages(
        pairs,
        batch,
        subscriptions,
        Explanations(batch, alternatives, explain),
        most,
        explain=explain,
        max_bytes=max_bytes,
        subscriptions_max=subscriptions_max,
        payload_version=payload_version,
    )
    assert shown(found) == shown(reference)
    assert count == len(pairs)
    return found


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
