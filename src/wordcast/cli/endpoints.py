"""``wordcast endpoint``: a tenant's webhook endpoints, each signing its messages with one secret."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

from wordcast.cli.common import add_router_option, against_router, counted, fail
from wordcast.services.shown_text import escaped


def describe(endpoint: dict[str, Any]) -> str:
    """One line: id, state, URL, and what its health says."""
    state = "enabled" if endpoint["enabled"] else "DISABLED"
    line = f"{endpoint['id']}  {state}  {endpoint['url']}"
    if endpoint.get("description"):
        line += f"  ({escaped(endpoint['description'])})"
    health = endpoint.get("health")
    if health:
        line += (
            f"\n    delivered {_matches(health['delivered'])}, failed {health['failed']:,}; "
            f"{health['attempts_ok']:,} attempts ok ({health['latency_ms']:.1f} ms on average), "
            f"{health['attempts_failed']:,} failed"
        )
        if health["failing_since"]:
            since = datetime.fromtimestamp(health["failing_since"], tz=UTC)
            line += f"\n    failing since {since:%Y-%m-%d %H:%M:%S} UTC: {health['last_error']}"
    if endpoint.get("disabled_reason"):
        line += f"\n    disabled: {endpoint['disabled_reason']}"
    if endpoint.get("subscriptions") is not None:
        line += f"\n    {counted(endpoint['subscriptions'], 'subscription')} deliver here"
    return line


async def _act(client: Any, args: argparse.Namespace) -> dict[str, Any] | None:
    """The endpoint the action leaves (None for list and delete, which print themselves)."""
    action = args.action
    if action == "list":
        found = await client.endpoints()
        if args.json:
            for endpoint in found:
                print(json.dumps(endpoint))
        else:
            for endpoint in found:
                print(describe(endpoint))
            print(counted(len(found), "endpoint"), file=sys.stderr)
        return None
    if action == "create":
        return dict(
            await client.create_endpoint(args.url, args.description or "", not args.disabled)
        )
    if action == "show":
        return dict(await client.endpoint(args.id))
    if action == "secret":
        return dict(await client.endpoint(args.id, secret=True))
    if action == "rotate":
        return dict(await client.rotate_endpoint_secret(args.id))
    if action == "update":
        changes: dict[str, Any] = {}
        if args.url is not None:
            changes["url"] = args.url
        if args.description is not None:
            changes["description"] = args.description
        if args.enable or args.disable:
            changes["enabled"] = bool(args.enable)
        if not changes:
            raise ValueError("nothing to change: give --url, --description, --enable or --disable")
        return dict(await client.update_endpoint(args.id, **changes))
    await client.delete_endpoint(args.id, cascade=args.cascade)
    print(f"deleted {args.id}", file=sys.stderr)
    return None


def cmd_endpoint(args: argparse.Namespace) -> int:
    from wordcast.client import RouterClient

    async def run() -> dict[str, Any] | None:
        async with RouterClient(args.router) as client:
            return await _act(client, args)

    try:
        endpoint, error = against_router(args.router, run())
    except ValueError as exc:
        return fail(str(exc))
    if error:
        return fail(error)
    if endpoint is not None:
        print(json.dumps(endpoint, indent=2) if args.json else describe(endpoint))
        if endpoint.get("secret"):
            print(f"signing secret: {endpoint['secret']}")
    if args.action == "rotate":
        print("the previous secret stays valid for the router's grace period", file=sys.stderr)
    return 0


def register(sub: Any) -> None:
    """Add ``wordcast endpoint`` to the ``wordcast`` parser."""
    endpoint = sub.add_parser(
        "endpoint", help="your webhook endpoints: list, create, show, update, rotate, delete"
    )
    actions = endpoint.add_subparsers(dest="action", required=True, help="what to do")

    def action(name: str, summary: str, with_id: bool = True) -> Any:
        parser = actions.add_parser(name, help=summary)
        if with_id:
            parser.add_argument("id", help="the endpoint's id (ep_…)")
        parser.add_argument("--json", action="store_true", help="JSON instead of text")
        add_router_option(parser)
        parser.set_defaults(func=cmd_endpoint)
        return parser

    action("list", "every endpoint of yours, with its health", with_id=False)
    create = action("create", "register an endpoint and print its secret", with_id=False)
    create.add_argument("url", help="the http(s) URL its matches are POSTed to")
    create.add_argument("--description", help="a note for you")
    create.add_argument("--disabled", action="store_true", help="send it nothing until enabled")
    action("show", "one endpoint: health, subscriptions delivering there")
    action("secret", "print an endpoint's signing secret")
    action("rotate", "a new signing secret; the old one signs too for the grace period")
    update = action("update", "change an endpoint's URL or description, enable or disable it")
    update.add_argument("--url", help="a new URL (only while no subscription delivers there)")
    update.add_argument("--description", help="a new note for you")
    switch = update.add_mutually_exclusive_group()
    switch.add_argument("--enable", action="store_true", help="resume delivery")
    switch.add_argument("--disable", action="store_true", help="stop delivery")
    delete = action("delete", "delete an endpoint")
    delete.add_argument(
        "--cascade", action="store_true", help="delete the subscriptions delivering there too"
    )


def _matches(n: int) -> str:
    return f"{n:,} match{'' if n == 1 else 'es'}"
