"""The cluster's last 15 minutes (GET /stats/history, admin only): publications, matches and
deliveries per second and the backlog, sampled by the router while traffic flows."""

from __future__ import annotations

from typing import Any

import httpx

from tests.helpers import AUTH, Receiver, RunningCluster, eventually

ADMIN = {"authorization": "Bearer wordcast-development-admin-token"}


def _history(router: str) -> dict[str, Any]:
    answer = httpx.get(f"{router}/stats/history", headers=ADMIN, timeout=30)
    assert answer.status_code == 200, answer.text
    history: dict[str, Any] = answer.json()
    return history


def test_the_history_shows_the_traffic_as_rates(
    cluster: RunningCluster, receiver: Receiver
) -> None:
    router = cluster.router_url
    assert httpx.get(f"{router}/stats/history", headers=AUTH, timeout=30).status_code == 401
    made = httpx.post(
        f"{router}/subscriptions",
        json={"query": "kestrel hovers", "callback_url": receiver.hook},
        headers=AUTH,
        timeout=30,
    )
    assert made.status_code == 201, made.text
    posts = [{"text": f"a kestrel hovers, {n}"} for n in range(50)]
    answer = httpx.post(
        f"{router}/publications", json={"publications": posts}, headers=AUTH, timeout=30
    )
    assert answer.status_code == 202, answer.text

    def seen(field: str) -> bool:
        return any(point[field] > 0 for point in _history(router)["points"])

    for field in ("publications_per_s", "matches_per_s", "deliveries_per_s"):
        eventually(lambda field=field: seen(field), 30, 0.2, f"{field} above 0")
    # Rates, not totals: with the traffic over, the newest point is back to none.
    eventually(
        lambda: _history(router)["points"][-1]["publications_per_s"] == 0, 30, 0.2, "quiet again"
    )
    history = _history(router)
    assert (history["every_s"], history["window_s"]) == (0.5, 900)
    assert history["updated"] == history["points"][-1]["at"]
