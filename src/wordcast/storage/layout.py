"""The record layout before packing, migrated on first use (issue 41).

Until packing, a shard kept a hash per record (``{ns}:sub:{id}``) and the ids of each tenant and
of each matcher in sets. The packed layout (:mod:`.records`, :mod:`.keys`) keeps a record as one
value in one of the shard's buckets and counts instead of the sets. Every process that opens a
namespace looks for records of the old layout first and moves each into its bucket with one
script (:data:`~.scripts.MIGRATE_RECORD`) that also counts it, so two processes starting at
once move each record once; the old sets go when no old record is left. Events and word maps are
the same in both layouts and stay as they are. Processes of a version from before packing must
be stopped before one of this version starts: a record they write afterwards is not seen."""

from __future__ import annotations

from typing import Any

from wordcast.storage import scripts
from wordcast.storage.keys import Keys
from wordcast.storage.records import pack_record, subscription_from_fields
from wordcast.storage.redis import queue_script

PAGE = 500
PACKED = "packed"


async def pack_records(client: Any, keys: Keys) -> int:
    """Move the shard's records of the layout before packing into their buckets; how many.

    A shard marked packed is passed over at once, and so is one without an event stream: every
    shard that ever held a record has one (trimming never removes the key)."""
    if await client.get(keys.layout) == PACKED:
        return 0
    if not await client.exists(keys.events):
        await client.set(keys.layout, PACKED)
        return 0
    migrate = client.register_script(scripts.MIGRATE_RECORD)
    head = keys.unpacked_record("")
    found = [key async for key in client.scan_iter(match=f"{head}*", count=1000)]
    moved = 0
    for start in range(0, len(found), PAGE):
        page = found[start : start + PAGE]
        pipe = client.pipeline(transaction=False)
        for key in page:
            pipe.hgetall(key)
        records = await pipe.execute()
        pipe = client.pipeline(transaction=False)
        for key, fields in zip(page, records, strict=True):
            if not fields.get("matcher"):  # gone meanwhile (moved by another process)
                continue
            sub_id = key[len(head) :]
            sub = subscription_from_fields(sub_id, fields)._replace(secret=fields.get("secret", ""))
            packed = pack_record(
                sub, fields.get("previous_secret", ""), float(fields.get("previous_until") or 0)
            )
            touched = [key, keys.record_of(sub_id), keys.tenant_counts, keys.matcher_counts]
            args = scripts.MIGRATE_RECORD.args(
                id=sub_id, record=packed, tenant=sub.tenant, matchers=sub.matchers
            )
            await queue_script(pipe, migrate, touched, args)
        moved += sum(int(n) for n in await pipe.execute())
    if not [key async for key in client.scan_iter(match=f"{head}*", count=1000)]:
        for old_set in (keys.unpacked_matcher_subs("*"), keys.unpacked_tenant_subs("*")):
            async for key in client.scan_iter(match=old_set, count=1000):
                await client.delete(key)
        await client.set(keys.layout, PACKED)
    return moved
