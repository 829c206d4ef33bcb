"""``wordcast status``: the router's view of routing and of each matcher, for an operator."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from wordcast.cli.common import (
    add_admin_token_option,
    add_router_option,
    admin_token,
    counted,
    fail,
)

if TYPE_CHECKING:
    from wordcast.storage.outbox import Backlog


def _matcher_line(stats: dict[str, Any] | None) -> str:
    if stats is None:
        return ""
    if not stats.get("reachable"):
        return f"; not answering: {stats.get('error', 'no answer')}"
    pending = stats.get("deliveries_pending")
    deliveries = "? deliveries" if pending is None else counted(pending, "delivery", "deliveries")
    return (
        f"; holds {counted(stats['subscriptions'], 'subscription')} "
        f"({counted(stats['pattern_subscriptions'], 'pattern')}), {stats['engine']}, "
        f"{deliveries} pending"
    )


def _redis_memory(matchers: Iterable[dict[str, Any]]) -> Backlog | None:
    """Redis's memory and the matchers' limit, as the first matcher that answered saw them."""
    from wordcast.storage.outbox import Backlog

    for stats in matchers:
        if stats.get("reachable") and stats.get("redis_memory_limit"):
            return Backlog(0, stats["redis_memory_used"], stats["redis_memory_limit"])
    return None


def cmd_status(args: argparse.Namespace) -> int:
    """The router's view of routing: mapping version in use, spread, imbalance, loads."""
    import httpx

    try:
        stats = httpx.get(f"{args.router}/stats", timeout=10).json()
    except (httpx.HTTPError, ValueError) as exc:
        return fail(f"cannot read {args.router}/stats: {exc}")
    mapping = stats["mapping"]
    print(
        f"router {args.router}: {stats['matchers']} matchers, {stats['subscribed_words']:,} "
        f"subscribed words\n"
        f"mapping version {mapping['active']} (latest {mapping['latest']}, versions in use "
        f"{mapping['window'][0]}..{mapping['window'][1]})\n"
        f"since this version: {mapping['publications']:,} publications, spread "
        f"{mapping['spread']:.2f}, imbalance {mapping['imbalance']:.2f} (max/avg), "
        f"CV {mapping['cv']:.2f}"
    )
    held = _matchers_said(args)
    loads = mapping["loads"]
    for matcher in range(max(len(loads), len(held))):
        routed = f"{loads[matcher]:,} publications" if matcher < len(loads) else "not routed to"
        print(f"  matcher-{matcher}: {routed}{_matcher_line(held.get(matcher))}")
    backlog = _redis_memory(held.values())
    if backlog is not None:
        refusing = "; routed batches are refused until deliveries catch up"
        print(backlog.memory_text() + (refusing if backlog.memory_full else ""))
    wanted, awaited = stats.get("matchers_wanted"), stats.get("awaiting_matcher")
    if wanted is not None and wanted != stats["matchers"]:
        waited = stats.get("awaiting_matcher_s", 0)
        step = (
            f"waiting for matcher-{awaited} to be ready (for {waited:.0f} s)"
            if awaited is not None
            else f"moving to mapping version {mapping['latest']}"
            if mapping["latest"] != mapping["active"]
            else "writing a mapping version for them"
        )
        print(f"scaling to {wanted} matchers: {step}")
    print(_shedding_line(stats.get("shedding") or {"strategy": "off"}))
    return 0


def _matchers_said(args: argparse.Namespace) -> dict[int, dict[str, Any]]:
    """Each matcher's own stats by ordinal, as the router asked them (an operator's view: it
    needs the admin token); empty when refused, or from a router of an older version."""
    import httpx

    try:
        answer = httpx.get(
            f"{args.router}/stats/matchers",
            headers={"authorization": f"Bearer {admin_token(args)}"},
            timeout=10,
        )
        if answer.status_code == 401:
            print(
                "(each matcher's subscriptions and deliveries need the admin token: "
                "--admin-token or $WORDCAST_ADMIN_TOKEN)",
                file=sys.stderr,
            )
        answer.raise_for_status()
        return {m["ordinal"]: m for m in answer.json()["matchers"]}
    except (httpx.HTTPError, ValueError, KeyError):
        return {}


def _shedding_line(shedding: dict[str, Any]) -> str:
    if shedding["strategy"] == "off":
        return "load shedding: off"
    limit = shedding["threshold"]
    return (
        f"load shedding ({shedding['strategy']}): level {shedding['level']} of "
        f"{shedding['max_level']} ({'no limit' if limit is None else f'at most {limit:g}'} "
        f"matchers per publication), {shedding['in_flight']:,} of {shedding['buffer']:,} "
        f"publications in flight, {shedding['shed_copies']:,} copies shed"
    )


def register(sub: Any) -> None:
    """Add this module's command to the ``wordcast`` parser."""
    status = sub.add_parser("status", help="mapping version, spread, imbalance, matcher loads")
    add_router_option(status)
    add_admin_token_option(status)
    status.set_defaults(func=cmd_status)
