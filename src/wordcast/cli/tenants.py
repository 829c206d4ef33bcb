"""``wordcast tenant`` and ``wordcast stream``: tenants' API keys and shared streams' grants,
managed with the admin token."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

from wordcast.cli.common import (
    add_admin_token_option,
    add_router_option,
    admin_token,
    against_router,
    counted,
    fail,
)


def cmd_tenant(args: argparse.Namespace) -> int:
    from wordcast.client import RouterClient
    from wordcast.services.router.settings import RouterSettings

    poll_s = RouterSettings.model_fields["key_revocation_poll_s"].default

    async def run() -> int:
        async with RouterClient(args.router, api_key=admin_token(args)) as client:
            if args.action == "create":
                key = await client.create_tenant_key(args.tenant)
                print(json.dumps(key, indent=2))
                print("the key is shown only now: keep it", file=sys.stderr)
                if not key["new_tenant"]:
                    print(
                        f"{args.tenant} had API keys already: this is another, and they stay "
                        f"valid (wordcast tenant keys {args.tenant}; revoke with wordcast tenant "
                        "revoke)",
                        file=sys.stderr,
                    )
            elif args.action == "list":
                tenants = await client.tenants()
                for found in tenants:
                    print(
                        f"{found['tenant']}  {counted(found['keys'], 'API key')}, "
                        f"{counted(found['subscriptions'], 'subscription')}"
                    )
                print(counted(len(tenants), "tenant"), file=sys.stderr)
            elif args.action == "keys":
                keys = await client.tenant_keys(args.tenant)
                for key in keys:
                    made = datetime.fromtimestamp(key["created"], tz=UTC)
                    print(f"{key['key_id']}  made {made:%Y-%m-%d %H:%M:%S} UTC")
                print(f"{counted(len(keys), 'API key')} for {args.tenant}", file=sys.stderr)
            else:
                await client.revoke_tenant_key(args.tenant, args.key_id)
                print(
                    f"revoked {args.key_id}: the router asked refuses it now, the others at "
                    f"their next look at the revocations (every {poll_s:g} s by default)",
                    file=sys.stderr,
                )
        return 0

    if (args.action == "revoke") != (args.key_id is not None):
        return fail("give KEY_ID with revoke, and only with revoke")
    if (args.action == "list") != (args.tenant is None):
        return fail("give a tenant's NAME with create, keys and revoke, and none with list")
    result, error = against_router(args.router, run())
    if error:
        return fail(error)
    assert result is not None
    return result


def cmd_stream(args: argparse.Namespace) -> int:
    from wordcast.client import RouterClient

    def show(stream: dict[str, Any]) -> None:
        grants = ", ".join(
            f"{g['tenant']} ({'+'.join(r for r in ('publish', 'subscribe') if g[r])})"
            for g in stream["grants"]
        )
        print(f"{stream['stream']}: {grants or 'no grants'}")

    async def run() -> int:
        async with RouterClient(args.router, api_key=admin_token(args)) as client:
            if args.action == "create":
                show(await client.create_stream(args.stream))
            elif args.action == "list":
                for stream in await client.streams():
                    show(stream)
            elif args.action == "grant":
                show(
                    await client.grant(
                        args.stream, args.tenant, publish=args.publish, subscribe=args.subscribe
                    )
                )
            elif args.action == "revoke":
                show(await client.grant(args.stream, args.tenant, publish=False, subscribe=False))
            else:
                await client.delete_stream(args.stream)
                print(f"deleted stream {args.stream} and every subscription to it")
        return 0

    needs_tenant = args.action in ("grant", "revoke")
    if args.action != "list" and not args.stream:
        return fail(f"give the stream's name: wordcast stream {args.action} STREAM")
    if needs_tenant != (args.tenant is not None):
        return fail("give a TENANT with grant and revoke, and only with them")
    if args.action == "grant" and not (args.publish or args.subscribe):
        return fail("grant what: --publish, --subscribe or both")
    result, error = against_router(args.router, run())
    if error:
        return fail(error)
    assert result is not None
    return result


def register(sub: Any) -> None:
    """Add this module's command to the ``wordcast`` parser."""
    tenant = sub.add_parser(
        "tenant",
        help="make, list or revoke a tenant's API keys (admin)",
        description="Admin operations on tenants' API keys. `create` makes a key (and the tenant, "
        "if new) and prints it, the only time it is shown; `keys` lists a tenant's keys by id; "
        "`revoke` makes one stop working.",
    )
    tenant.add_argument(
        "action", choices=("create", "list", "keys", "revoke"), help="what to do (above)"
    )
    tenant.add_argument("tenant", nargs="?", help="the tenant's name (letters, digits, _ . -)")
    tenant.add_argument("key_id", nargs="?", metavar="KEY_ID", help="with revoke: the key's id")
    add_admin_token_option(tenant)
    add_router_option(tenant)
    tenant.set_defaults(func=cmd_tenant)

    stream = sub.add_parser(
        "stream",
        help="make shared streams and grant tenants publish/subscribe rights (admin)",
        description="A tenant's publications meet only its own subscriptions, unless they are "
        "published to a shared stream: `create` makes one, `grant` gives a tenant the right to "
        "publish to it (--publish) and to subscribe to it (--subscribe), `revoke` takes both away "
        "(and deletes the tenant's subscriptions to it), `delete` removes the stream and every "
        "subscription to it.",
    )
    stream.add_argument(
        "action", choices=("create", "list", "grant", "revoke", "delete"), help="what to do (above)"
    )
    stream.add_argument("stream", nargs="?", help="the stream's name (letters, digits, _ . -)")
    stream.add_argument("tenant", nargs="?", help="with grant and revoke: the tenant")
    stream.add_argument("--publish", action="store_true", help="with grant: may publish to it")
    stream.add_argument("--subscribe", action="store_true", help="with grant: may subscribe to it")
    add_admin_token_option(stream)
    add_router_option(stream)
    stream.set_defaults(func=cmd_stream)
