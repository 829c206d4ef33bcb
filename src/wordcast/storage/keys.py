"""Every Redis key of one cluster, named in one place (the table is :mod:`wordcast.storage`'s)."""

from __future__ import annotations


class Keys:
    """The keys under namespace ``ns``."""

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self.words = f"{ns}:words"
        self.events = f"{ns}:events"
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

    def sub(self, sub_id: str) -> str:
        return f"{self.ns}:sub:{sub_id}"

    def matcher_subs(self, matcher: int | str) -> str:
        return f"{self.ns}:matcher:{matcher}:subs"

    def matcher_words(self, matcher: int) -> str:
        return f"{self.ns}:matcher:{matcher}:words"

    def matcher_anchors(self, matcher: int) -> str:
        return f"{self.ns}:matcher:{matcher}:anchors"

    def matcher_url(self, matcher: int) -> str:
        return f"{self.ns}:matcher:{matcher}:url"

    def tenant_subs(self, tenant: str) -> str:
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
