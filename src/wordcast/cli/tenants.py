"""``wordcast tenant``: tenants' API keys, made, listed and revoked with the admin token."""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from typing import Any

from .common import add_router_option, against_router, counted, fail


def _admin_token(args: argparse.Namespace) -> str:
    """--admin-token, else $WORDCAST_ADMIN_TOKEN, else the token a development cluster accepts."""
    from ..services.router.settings import DEFAULT_ADMIN_TOKEN

    return str(args.admin_token or os.environ.get("WORDCAST_ADMIN_TOKEN") or DEFAULT_ADMIN_TOKEN)


def cmd_tenant(args: argparse.Namespace) -> int:
    from ..client import RouterClient
    from ..services.router.settings import RouterSettings

    poll_s = RouterSettings.model_fields["key_revocation_poll_s"].default

    async def run() -> int:
        async with RouterClient(args.router, api_key=_admin_token(args)) as client:
            if args.action == "create":
                print(json.dumps(await client.create_tenant_key(args.tenant), indent=2))
                print("the key is shown only now: keep it", file=sys.stderr)
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
    tenant.add_argument("action", choices=("create", "keys", "revoke"))
    tenant.add_argument("tenant", help="the tenant's name (letters, digits, _ . -)")
    tenant.add_argument("key_id", nargs="?", metavar="KEY_ID", help="with revoke: the key's id")
    tenant.add_argument(
        "--admin-token",
        help="the routers' admin token (default: $WORDCAST_ADMIN_TOKEN, else a development "
        "cluster's)",
    )
    add_router_option(tenant)
    tenant.set_defaults(func=cmd_tenant)
