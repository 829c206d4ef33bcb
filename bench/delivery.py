"""Deliveries behind a dead webhook: ``make bench-delivery``.

One tenant's webhook refuses every connection; another's answers. A local cluster (one matcher,
the default 64 delivery slots and retry settings) records ``--failing`` messages for the dead
webhook, then one for the working webhook, and the benchmark times how long that one match takes to
arrive, and counts how many of the dead webhook's messages had been given up on by then. Each
message for the dead webhook backs off about half a minute over its eight attempts; a dispatcher
in which a message held its slot while it backed off made the working webhook wait for those.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import httpx

from wordcast.defaults import DEVELOPMENT_API_KEY
from wordcast.local.cluster import Cluster
from wordcast.local.supervisor import free_port

from .common import machine, median, write_json

DEVELOPMENT_KEY = {"authorization": f"Bearer {DEVELOPMENT_API_KEY}"}


def one_run(failing: int) -> dict[str, Any]:
    with Cluster(
        matchers=1, port=free_port(), receiver=True, receiver_quiet=True, out=lambda line: None
    ) as cluster:
        assert cluster.receiver_url is not None
        dead = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
        with httpx.Client(base_url=cluster.router_url, timeout=30, headers=DEVELOPMENT_KEY) as api:
            for query, url in (("wallaby", dead), ("platypus", cluster.callback_url)):
                api.post("/subscriptions", json={"query": query, "callback_url": url})
            for n in range(failing):
                post = {"id": f"wallaby-{n}", "text": f"a wallaby hops {n}"}
                api.post("/publications", json=post).raise_for_status()
            started = time.monotonic()
            post = {"id": "platypus", "text": "a platypus swims"}
            api.post("/publications", json=post).raise_for_status()
            while httpx.get(f"{cluster.receiver_url}/stats").json()["matches"] < 1:
                if time.monotonic() - started > 600:
                    raise RuntimeError("the working webhook's match never arrived")
                time.sleep(0.02)
            waited = time.monotonic() - started
            letters = api.get("/deadletters", params={"limit": 1000}).json()["dead_letters"]
    return {"working_match_after_s": waited, "dead_given_up_by_then": len(letters)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--failing", type=int, default=200, help="messages for the dead webhook")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--name", default="delivery", help="results file name")
    args = parser.parse_args()
    runs = []
    for run in range(args.runs):
        result = one_run(args.failing)
        print(
            f"run {run + 1}/{args.runs}: the working webhook's match after "
            f"{result['working_match_after_s']:.2f} s, {result['dead_given_up_by_then']} of "
            f"{args.failing} dead-webhook messages given up on by then",
            flush=True,
        )
        runs.append(result)
    waited = median([r["working_match_after_s"] for r in runs])
    path = write_json(
        args.name,
        {
            "benchmark": "delivery",
            "machine": machine(),
            "parameters": vars(args),
            "runs": runs,
            "median_working_match_after_s": waited,
        },
    )
    print(f"median {waited:.2f} s; results in {path}")


if __name__ == "__main__":
    main()
