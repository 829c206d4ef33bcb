"""Every Redis key of one cluster, named in one place (the table is :mod:`wordcast.storage`'s)."""

from __future__ import annotations

import zlib

# Each shard keeps its records in this many hashes (the packed layout, :mod:`.records`): few
# enough keys that a key's own overhead is shared by a thousand records at a million, and a
# matcher's full load reads them a few dozen buckets to a round trip.
RECORD_BUCKETS = 1024


def bucket_of(sub_id: str) -> int:
    """The bucket a record lives in. Seeded apart from :func:`.shards.shard_of`'s CRC, so the
    records of one shard still spread over every bucket."""
    return zlib.crc32(sub_id.encode("utf-8"), 0x5BD1E995) % RECORD_BUCKETS


class Keys:
    """The keys under namespace ``ns``."""

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self.words = f"{ns}:words"
        self.events = f"{ns}:events"
        self.layout = f"{ns}:layout"  # "packed" once its records are (:mod:`.layout`)
        self.event_readers = f"{ns}:events:readers"  # each follower's progress through events
        self.publications = f"{ns}:publications"
        self.recent = f"{ns}:recent"  # recent publications, for backfill
        self.pattern_load = f"{ns}:pattern_load"
        self.window = f"{ns}:mapping:window"
        self.key_revocations = f"{ns}:apikey-revocations"
        self.streams = f"{ns}:streams"
        self.internal_token = f"{ns}:cluster:internal_token"
        self.matchers_wanted = f"{ns}:cluster:matchers"
        self.follows = f"{ns}:cluster:follows"
        self.secrets_epoch = f"{ns}:secrets-epoch"
        self.endpoints_epoch = f"{ns}:endpoints-epoch"
        # Each subscription's counters (matched, delivered, failed, last match), in its shard.
        self.counters = f"{ns}:counters"

    def records(self, bucket: int) -> str:
        """One of the shard's record buckets: a hash id -> packed record (:mod:`.records`)."""
        return f"{self.ns}:records:{bucket}"

    def record_of(self, sub_id: str) -> str:
        """The bucket that holds ``sub_id``'s record."""
        return self.records(bucket_of(sub_id))

    @property
    def tenant_counts(self) -> str:
        """Hash tenant -> how many records the tenant holds in this shard."""
        return f"{self.ns}:tenant-counts"

    @staticmethod
    def alternatives_field(tenant: str) -> str:
        """The field of :attr:`tenant_counts` that counts the tenant's later alternatives of
        boolean queries, records but not subscriptions (a space is never in a tenant's name)."""
        return f"{tenant} alternatives"

    @staticmethod
    def url_field(tenant: str, url: str) -> str:
        """The field of :attr:`tenant_counts` that counts the tenant's subscriptions delivering
        to webhook ``url`` (neither holds a tab)."""
        return f"{tenant}\t{url}"

    @property
    def matcher_counts(self) -> str:
        """Hash matcher -> how many records are placed on it in this shard."""
        return f"{self.ns}:matcher-counts"

    def unpacked_record(self, sub_id: str) -> str:
        """A record as the layout before packing kept it (a hash per record), migrated on first
        use (:mod:`.layout`)."""
        return f"{self.ns}:sub:{sub_id}"

    def unpacked_matcher_subs(self, matcher: int | str) -> str:
        """The layout before packing's set of the ids placed on a matcher."""
        return f"{self.ns}:matcher:{matcher}:subs"

    def matcher_words(self, matcher: int) -> str:
        return f"{self.ns}:matcher:{matcher}:words"

    def matcher_anchors(self, matcher: int) -> str:
        return f"{self.ns}:matcher:{matcher}:anchors"

    def matcher_url(self, matcher: int) -> str:
        return f"{self.ns}:matcher:{matcher}:url"

    def unpacked_tenant_subs(self, tenant: str) -> str:
        """The layout before packing's set of a tenant's ids."""
        return f"{self.ns}:tenant:{tenant}:subs"

    def tenant_keys(self, tenant: str) -> str:
        return f"{self.ns}:tenant:{tenant}:keys"

    def api_key(self, key_hash: str) -> str:
        return f"{self.ns}:apikey:{key_hash}"

    def stream_grants(self, stream: str) -> str:
        return f"{self.ns}:stream:{stream}:grants"

    def tenant_endpoints(self, tenant: str) -> str:
        return f"{self.ns}:tenant:{tenant}:endpoints"

    def tenant_endpoint_urls(self, tenant: str) -> str:
        return f"{self.ns}:tenant:{tenant}:endpoint-urls"

    def endpoint_health(self, endpoint_id: str) -> str:
        return f"{self.ns}:endpoint:{endpoint_id}:health"
