from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AliasChoices, BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from wordcast import limits
from wordcast.defaults import DEFAULT_ADMIN_TOKEN, DEVELOPMENT_API_KEY
from wordcast.services.common import ServiceSettings

__all__ = ["DEFAULT_ADMIN_TOKEN", "DEVELOPMENT_API_KEY", "RouterSettings"]


class MatchStreamLimits(BaseModel):
    """What a router's match streams may cost it (:mod:`wordcast.services.router.match_stream`)."""

    stream_heartbeat_s: float = Field(
        default=15.0,
        gt=0,
        le=300,
        description="An idle match stream (GET /matches/stream) sends a comment this often, so "
        "proxies do not close it.",
    )
    streams_max: int = Field(
        default=256,
        ge=1,
        le=100_000,
        description="Match streams this router serves at once; more get a 429. A waiting stream "
        "holds no Redis connection (one task polls every followed tenant's newest position), "
        "and streams read on a few connections of their own (at most 8), so "
        "this bounds sockets and memory (up to about 1.2 MB each for a consumer that stops "
        "reading), not Redis connections.",
    )
    stream_poll_s: float = Field(
        default=0.05,
        gt=0,
        le=5,
        description="How often the router reads the newest position of each tenant it serves "
        "match streams to (one pipelined read for all): what a match waits at most, beyond its "
        "delivery, before a waiting stream reads it.",
    )
    stream_drain_timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="A match stream whose consumer has not taken what was written to it within "
        "this is dropped (its connection reset, its buffer freed); the consumer resumes with "
        "Last-Event-ID.",
    )
    streams_per_tenant: int = Field(
        default=16, ge=1, description="Match streams one tenant may hold open on this router."
    )


class RequestLimits(BaseModel):
    """What one request or tenant may cost a router, besides the match stream's limits."""

    dry_run_max_bytes: int = Field(
        default=4 * 1024 * 1024,
        ge=64 * 1024,
        description="The largest answer a dry run (`POST /publications?dry_run=true`) may give, "
        "in bytes of its matches' JSON: past it the dry run is refused with 413, naming this "
        "limit, and the matchers stop explaining as soon as they pass it. It bounds what a dry "
        "run costs a router and a matcher in memory.",
    )
    max_endpoints_per_tenant: int = Field(
        default=1_000,
        ge=1,
        description="Webhook endpoints one tenant may hold (422 past it), whether made by POST "
        "/endpoints or by subscribing to a new URL.",
    )
    endpoint_creations_per_second: float = Field(
        default=10.0,
        gt=0,
        description="Endpoints one tenant may make a second, over a burst of ten times that "
        "(429 past it).",
    )


class RouterSettings(ServiceSettings, MatchStreamLimits, RequestLimits):
    model_config = SettingsConfigDict(
        env_prefix="WORDCAST_ROUTER_", extra="ignore", populate_by_name=True
    )

    port: int = Field(default=8000, description="The port the router listens on.")
    history_every_s: float = Field(
        default=10.0,
        ge=0.1,
        le=300,
        description="How often the router samples the cluster's rates for the console's charts "
        "of the last 15 minutes (GET /stats/history).",
    )
    workers: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Router processes sharing the port (uvicorn's workers), each with its own "
        "replica of the word maps and connections; /metrics adds their counters up. One is "
        "enough on a machine whose cores the matchers keep busy; more where a router's core "
        "is the limit.",
    )
    matcher_urls: Annotated[list[str], NoDecode] = Field(
        default=["http://127.0.0.1:8101", "http://127.0.0.1:8102"],
        description="Base URL of every matcher, in ordinal order (comma-separated in the env), or "
        "one template with {ordinal} (http://matcher-{ordinal}.matcher:8101). A matcher beyond "
        "the list is reached at the URL it registered in Redis.",
    )
    matchers: int | None = Field(
        default=None,
        ge=1,
        description="Matchers of mapping version 0 (hash routing, before any mapping is learned "
        "or the cluster is scaled); default: as many as matcher_urls lists.",
    )
    matcher_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="A matcher that has not answered a routed batch within this is taken as "
        "unavailable: the publications are refused with 503 (retrying is safe). A matcher answers "
        "in milliseconds, and within its Redis write deadline (5 s) when Redis is slow.",
    )
    detect_languages: bool = Field(
        default=True,
        description="Detect the language of each publication that does not give one (fastText "
        "lid.176 run in the compiled core, about 3 µs a short post on one core), for `lang:` "
        "filters and analysis in that language. Off: a publication without `lang` has no "
        "language and is analysed in English only, as before languages existed.",
    )
    backfill_s: int = Field(
        default=0,
        ge=0,
        le=86_400,
        description="Keep the publications of the last this many seconds in Redis, so that a new "
        "subscription may ask for their matches (`backfill_minutes`); 0 (the default) keeps "
        "none. Every router of a cluster should say the same.",
    )
    backfill_max_entries: int = Field(
        default=100_000,
        ge=1,
        description="The recent publications kept hold at most this many published requests "
        "(each up to 1,000 publications), whatever their age: the bound on their memory.",
    )
    tenant_chars_in_flight_max: int = Field(
        default=16 * 1024 * 1024,
        ge=limits.MAX_BATCH_PUBLICATIONS * limits.MAX_TEXT_CHARS,
        description="Characters of publications one tenant may have in flight on this router "
        "(analysed, routed, not yet answered by the matchers) at once; a request past it gets a "
        "429 (one request is always let through), so one tenant's large requests cannot stall "
        "the others'.",
    )
    publication_log_rate: float = Field(
        default=0.01,
        ge=0.0,
        le=1.0,
        description="Fraction of publications whose terms go to the log the routing learner reads.",
    )
    publication_log_max: int = Field(
        default=1_000_000, ge=1, description="The log keeps about this many newest entries."
    )
    sync_timeout_s: float = Field(
        default=5.0,
        gt=0,
        description="How long the router waits for a matcher to take a subscription change "
        "(or start a backfill) before it answers without it.",
    )
    mapping_poll_s: float = Field(
        default=2.0,
        gt=0,
        description="How often the router checks for a new mapping version even without an "
        "announcement, and refreshes the report of the versions it still uses.",
    )
    key_revocation_poll_s: float = Field(
        default=1.0,
        gt=0,
        description="How often the router checks whether an API key was revoked (on any router), "
        "and then forgets the keys it remembers: a revoked key stops working within about this "
        "time everywhere.",
    )
    follow_statefulset: str | None = Field(
        default=None,
        description="On Kubernetes: the matchers' StatefulSet (matcher), whose replicas this "
        "router copies into the number of matchers wanted, so that `kubectl scale` alone "
        "re-maps the cluster (the pod's service account may get its scale). Unset: that "
        "number changes only with `wordcast scale`.",
    )
    follow_poll_s: float = Field(
        default=5.0, gt=0, description="How often the followed StatefulSet's replicas are read."
    )
    learn_cronjob: str | None = Field(
        default=None,
        description="On Kubernetes: the learner's CronJob (learn-mapping). A router that writes a "
        "stable-hashing version for a new number of matchers starts a run of it at once, so "
        "that a learned mapping replaces hashing within minutes rather than at the nightly "
        "run (the pod's service account may get that CronJob and create Jobs).",
    )
    mapping_lock_ttl_s: float = Field(
        default=60.0, gt=0, description="A migrating router that stops renewing loses the lock."
    )
    # LASP's f(x) = slope·x + intercept: trie lookups per publication against a trie of x unique
    # words, fitted by `make bench-routing` (S³-TM Fig. 4.1; BENCHMARKS.md) on tweet-based
    # subscriptions over pypi summaries. The scale cancels out of LASP's choice; the ratio stays.
    lasp_cost_slope: float = Field(
        default=0.00037, gt=0, description="LASP's f(x) slope: trie lookups per unique word."
    )
    lasp_cost_intercept: float = Field(
        default=16.1, ge=0, description="LASP's f(x) intercept: lookups of an empty trie."
    )
    environment: Literal["development", "production"] = Field(
        default="production",
        validation_alias="WORDCAST_ENVIRONMENT",
        description="development registers the well-known development API key and accepts the "
        "default admin token; production refuses to start with a default secret.",
    )
    admin_token: SecretStr = Field(
        default=SecretStr(DEFAULT_ADMIN_TOKEN),
        description="Bearer token of the admin operations (creating tenants' API keys).",
    )
    max_subscriptions_per_tenant: int = Field(
        default=100_000, ge=1, description="Subscriptions one tenant may hold (422 past it)."
    )
    publications_per_second: float = Field(
        default=50_000.0, gt=0, description="Each tenant's sustained publication rate limit."
    )
    publication_burst: float = Field(
        default=100_000.0,
        ge=1_000,
        description="Publications a tenant may send at once above the rate (at least one batch).",
    )
    shedding: Literal["off", "consensus", "subscription"] = Field(
        default="off",
        description="Load shedding under overload (S³-TM §5.2): off, or which of a publication's "
        "matchers an overloaded router keeps, those most of its words map to (consensus) or those "
        "with the most subscriptions on its words (subscription). Shedding loses matches.",
    )
    shed_in_flight: int = Field(
        default=20_000,
        ge=1,
        validation_alias=AliasChoices(
            "WORDCAST_ROUTER_SHED_IN_FLIGHT", "WORDCAST_ROUTER_SHED_BUFFER"
        ),
        description="b: publications in flight in this router (routed, not yet accepted by the "
        "matchers) from which it counts as overloaded and sheds more.",
    )
    shed_max_matchers: float = Field(
        default=7.0,
        ge=1,
        validation_alias=AliasChoices(
            "WORDCAST_ROUTER_SHED_MAX_MATCHERS", "WORDCAST_ROUTER_SHED_K"
        ),
        description="k: most matchers per publication at shedding level 1.",
    )
    shed_step: float = Field(
        default=1.0,
        gt=0,
        description="Δ: how much that limit falls per further level (below 1, the last matcher "
        "is kept with a probability).",
    )
    shed_period_s: float = Field(default=1.0, gt=0, description="How often the level adapts.")
    shed_word_maps_s: float = Field(
        default=10.0, gt=0, description="How often subscription shedding re-reads the word maps."
    )
    secret_grace_s: float = Field(
        default=24 * 3600.0,
        ge=0,
        description="How long a rotated-out signing secret still signs deliveries.",
    )
    console_learning: bool = Field(
        default=True,
        description="Whether the console's admin may start a learning run (wordcast learn, a "
        "Spark job) as a child process of this router; turn off where the CronJob learns.",
    )

    @field_validator("matcher_urls", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            return [url.strip() for url in value.split(",") if url.strip()]
        return value

    @model_validator(mode="after")
    def _no_default_secrets_in_production(self) -> RouterSettings:
        if (
            self.environment != "development"
            and self.admin_token.get_secret_value() == DEFAULT_ADMIN_TOKEN
        ):
            raise ValueError(
                "refusing to start in production with the default admin token: set "
                "WORDCAST_ROUTER_ADMIN_TOKEN (or WORDCAST_ENVIRONMENT=development)"
            )
        return self

    @field_validator("matcher_urls")
    @classmethod
    def _not_empty(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("at least one matcher URL is needed")
        if any("{ordinal}" in url for url in value) and len(value) > 1:
            raise ValueError("a matcher URL template with {ordinal} must be the only URL")
        return [url.rstrip("/") for url in value]

    @property
    def url_template(self) -> str | None:
        return self.matcher_urls[0] if "{ordinal}" in self.matcher_urls[0] else None

    @property
    def initial_matchers(self) -> int:
        return self.matchers if self.matchers is not None else len(self.matcher_urls)

    @model_validator(mode="after")
    def _knows_its_matchers(self) -> RouterSettings:
        if self.matchers is None and self.url_template is not None:
            raise ValueError("with a matcher URL template, set WORDCAST_ROUTER_MATCHERS")
        return self
