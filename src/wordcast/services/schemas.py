"""Request and response bodies of the public API and of the router -> matcher protocol."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AnyHttpUrl,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    UrlConstraints,
    field_validator,
    model_validator,
)

from wordcast import limits
from wordcast.services.shown_text import shown
from wordcast.storage.records import delivery_address

CallbackUrl = Annotated[
    AnyHttpUrl,
    UrlConstraints(max_length=limits.MAX_CALLBACK_URL_CHARS, allowed_schemes=["http", "https"]),
]
EndpointId = Annotated[
    str, Field(pattern=r"^ep_[0-9a-f]{24}$", description="A webhook endpoint's id (ep_…).")
]


Delivery = Literal["webhook", "stream"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


STREAM_PATTERN = r"^[A-Za-z0-9_.-]+$"
IdempotencyKey = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        pattern=r"^[\x21-\x7e]+$",
        description="Printable ASCII without spaces, at most 200 characters.",
    ),
]
Tag = Annotated[
    str,
    Field(
        min_length=1,
        max_length=limits.MAX_TAG_CHARS,
        description=f"Your label for the subscription, echoed in each of its matches (at most "
        f"{limits.MAX_TAG_CHARS} characters, printable ones: docs/GUIDE.md, Limits).",
        examples=["elections"],
    ),
    AfterValidator(shown),
]
StreamName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        pattern=STREAM_PATTERN,
        description="A shared stream an admin made (letters, digits, _ . -).",
        examples=["news"],
    ),
]


class SubscriptionIn(Strict):
    """Exactly one of ``query`` (keywords) and ``pattern`` (a wildcard string)."""

    query: str | None = Field(
        default=None,
        min_length=1,
        max_length=limits.MAX_QUERY_CHARS,
        description="Keywords that must all occur in a publication (after analysis), or a "
        "boolean query over keywords: OR, NOT (or a leading -) and parentheses, operators in "
        "capitals; at most 16 alternatives once written as ORs of ANDs, each with a word it "
        "requires. A match is delivered once, whichever alternatives hold.",
        examples=["white house", "(obama OR biden) senate -poll"],
    )
    pattern: str | None = Field(
        default=None,
        min_length=1,
        max_length=limits.MAX_PATTERN_CHARS,
        description="A wildcard string: ? is one character, * any run of characters, \\?, "
        "\\* and \\\\ are literal. Matches when a substring of the publication's case-folded, "
        "white-space-collapsed text is an instance of it.",
        examples=["pie*tea"],
    )
    callback_url: CallbackUrl | None = Field(
        default=None,
        description="http(s) URL that receives the matches as POST requests (when delivery "
        "includes webhook).",
        examples=["https://example.com/hooks/wordcast"],
    )
    endpoint_id: EndpointId | None = Field(
        default=None,
        description="One of your webhook endpoints (POST /endpoints) to POST the matches to, "
        "instead of a callback_url (which finds, or makes, your endpoint for that URL).",
    )
    delivery: list[Delivery] | None = Field(
        default=None,
        min_length=1,
        max_length=2,
        description="Where the matches go: 'webhook' (POSTed to callback_url), 'stream' (your "
        "tenant's match stream, GET /matches/stream), or both. By default the webhook when a "
        "callback_url is given, else the stream.",
        examples=[["webhook", "stream"]],
    )
    stream: StreamName | None = Field(
        default=None,
        description="Match the publications of this shared stream (your tenant needs its "
        "subscribe grant) instead of your own tenant's.",
    )
    tag: Tag | None = None
    key: IdempotencyKey | None = Field(
        default=None,
        description="Your idempotency key for this subscription: a request repeated with the "
        "same key (a retry, an import resumed after an interruption) is answered with the "
        "subscription the first one created instead of creating another, until it is deleted. "
        "Unique within your tenant; giving it to a different subscription is a 409.",
        examples=["subs.jsonl:1207"],
    )
    backfill_minutes: StrictInt | None = Field(
        default=None,
        ge=1,
        le=1_440,
        description="Also deliver the matches of the publications of the last this many minutes "
        "(those the routers keep: WORDCAST_ROUTER_BACKFILL_S), marked `backfill: true`, "
        "while live matches flow. One subscription at a time (POST /subscriptions).",
    )

    @field_validator("query", "pattern")
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        # It reaches logs, consoles and receivers as it is (services.shown_text).
        return None if value is None else shown(value, query=True)

    @field_validator("callback_url")
    @classmethod
    def _a_port_one_can_reach(cls, value: AnyHttpUrl | None) -> AnyHttpUrl | None:
        if value is not None and value.port == 0:
            raise ValueError("port 0 cannot be connected to: give the receiver's port")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> SubscriptionIn:
        if (self.query is None) == (self.pattern is None):
            raise ValueError("give exactly one of 'query' (keywords) and 'pattern' (wildcards)")
        return self

    @model_validator(mode="after")
    def _deliverable(self) -> SubscriptionIn:
        delivery = self.delivery
        if delivery is None:
            return self
        if len(set(delivery)) < len(delivery):
            raise ValueError(f"delivery names {delivery[0]!r} twice")
        webhook = self.callback_url is not None or self.endpoint_id is not None
        if "webhook" in delivery and not webhook:
            raise ValueError("delivery 'webhook' needs a callback_url or an endpoint_id")
        if "webhook" not in delivery and webhook:
            raise ValueError(
                "a callback_url or endpoint_id is given but delivery does not include 'webhook'"
            )
        return self

    @model_validator(mode="after")
    def _one_webhook(self) -> SubscriptionIn:
        if self.callback_url is not None and self.endpoint_id is not None:
            raise ValueError("give a callback_url or an endpoint_id, not both")
        return self

    def address(self, endpoint_url: str = "") -> str:
        """Its deliveries as stored (:func:`wordcast.storage.records.delivery_address`), its
        endpoint's URL given when it names one."""
        webhook = str(self.callback_url) if self.callback_url is not None else endpoint_url
        to_stream = "stream" in self.delivery if self.delivery else not webhook
        return delivery_address(webhook, to_stream)


class SubscriptionsIn(Strict):
    subscriptions: list[SubscriptionIn] = Field(
        min_length=1,
        max_length=limits.MAX_BATCH_SUBSCRIPTIONS,
        description="Registered in this order; if one is refused, none is.",
    )


class SubscriptionIdsIn(Strict):
    ids: list[Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]] = (
        Field(
            min_length=1,
            max_length=limits.MAX_BATCH_SUBSCRIPTIONS,
            description="Subscriptions to delete; if one is not yours, none is deleted.",
        )
    )


class SubscriptionsDeleted(BaseModel):
    deleted: list[str] = Field(description="The ids deleted (each once).")


class AlternativeOut(BaseModel):
    clause: str = Field(
        description="The alternative written in analysed terms, as a match's `matched` names it."
    )
    terms: list[str] = Field(description="Analysed terms the publication must contain.")
    without: list[str] = Field(
        description="Analysed terms (and filters, name:value) it must not contain."
    )
    spans: list[str] = Field(description="Phrases and proximity windows that must hold.")
    filters: list[str] = Field(
        description="Filters (name:value) its attributes or language must satisfy."
    )


class SubscriptionOut(BaseModel):
    id: str
    kind: Literal["keywords", "pattern"]
    query: str | None = None
    terms: list[str] = Field(
        description="The analysed terms a keyword subscription matches on (for a boolean "
        "query, those of its first alternative)."
    )
    alternatives: list[AlternativeOut] | None = Field(
        default=None,
        description="How a boolean query was read: it matches when any alternative holds. "
        "Absent for a plain conjunction.",
    )
    pattern: str | None = None
    anchor: str | None = Field(
        default=None, description="The literal run of a pattern that routes publications to it."
    )
    callback_url: str | None = Field(
        description="Where its matches are POSTed; null when they go to the match stream only."
    )
    endpoint_id: str | None = Field(
        default=None, description="The webhook endpoint of its callback_url."
    )
    delivery: list[Delivery]
    stream: str | None = Field(
        default=None,
        description="The shared stream it listens to; null for your own tenant's publications.",
    )
    matcher: int = Field(description="The matcher the subscription was placed on.")
    tag: str | None = Field(default=None, description="Your label for it, echoed in its matches.")
    counters: CountersOut | None = Field(
        default=None,
        description="What became of its matches (in GET answers; counted by the matchers and "
        "added every second or so).",
    )
    backfill: BackfillOut | None = Field(
        default=None, description="The backfill this request started, if it asked for one."
    )
    secret: str | None = Field(
        default=None,
        description="The Standard Webhooks signing secret (whsec_…) of its endpoint; only in "
        "the creation answer.",
    )
    warnings: list[str] = Field(
        default=[],
        description="Each piece of the query that X's rules or Lucene's syntax read otherwise, "
        "with how wordcast reads it (`?strict=true` refuses such a query instead).",
    )
    earlier_readings: list[str] = Field(
        default=[],
        description="How versions before issue 53 read the query otherwise: its stored words, "
        "when the query's words now differ (it matches as stored until subscribed again), or "
        "the pieces read anew under the same words (`wordcast subscriptions --check`).",
    )


class CountersOut(BaseModel):
    matched: int = Field(description="Its matches (a boolean query's once, whichever held).")
    delivered: int = Field(
        description="Matches delivered: to its webhook (a 2xx) or written to the match stream; "
        "one delivered both ways counts twice."
    )
    failed: int = Field(description="Matches given up on (dead letters; a replay may send them).")
    last_match: float | None = Field(description="When it last matched (Unix time); null: never.")


class SubscriptionPreview(BaseModel):
    """What ``POST /subscriptions?dry_run=true`` answers: the subscription as it would be read
    and placed now. Nothing is stored."""

    dry_run: bool = True
    kind: Literal["keywords", "pattern"]
    query: str | None = None
    terms: list[str] = Field(
        description="The analysed terms it would match on (a boolean query's first alternative's)."
    )
    alternatives: list[AlternativeOut] | None = Field(
        default=None, description="How a boolean query is read; absent for a plain conjunction."
    )
    pattern: str | None = None
    anchor: str | None = Field(
        default=None, description="The literal run of a pattern that routes publications to it."
    )
    matchers: list[list[int]] = Field(
        description="For each alternative (or the pattern), the matchers it would be placed on "
        "now (H(i) changes as subscriptions come and go: a later request may place it elsewhere)."
    )
    callback_url: str | None = None
    delivery: list[Delivery]
    stream: str | None = None
    warnings: list[str] = Field(
        default=[],
        description="Each piece of the query that X's rules or Lucene's syntax read otherwise, "
        "with how wordcast reads it (`?strict=true` refuses such a query instead).",
    )


class BackfillOut(BaseModel):
    since: float = Field(description="The window's start (Unix time).")
    until: float = Field(
        description="Its end: when the subscription took effect, plus the time a publication "
        "being routed then may still take. Publications in this window are backfilled; one "
        "routed near its end may be delivered both live and backfilled."
    )
    matchers: list[int] = Field(description="The matchers backfilling (their /stats show it).")


class BackfillRequest(BaseModel):
    records: list[str] = Field(min_length=1, description="The stored records to backfill.")
    since: float
    until: float
    until_event: str = Field(
        pattern=r"^\d{1,20}-\d{1,20}( \d{1,20}-\d{1,20})*$",
        max_length=64 * 42,
        description="Event position that holds the records.",
    )


class SecretOut(BaseModel):
    secret: str = Field(
        description="The new signing secret; the previous one stays valid for a "
        "grace period (WORDCAST_ROUTER_SECRET_GRACE_S)."
    )


class DeadLetterOut(BaseModel):
    id: str
    subscription_ids: list[str]
    webhook_id: str
    callback_url: str
    reason: str
    attempts: int
    failed_at: float
    payload: dict[str, Any] = Field(description="The message as it would have been delivered.")


class DeadLetterPage(BaseModel):
    dead_letters: list[DeadLetterOut]
    next_after: str | None = Field(description="Pass as after for the next page; null when done.")


class SubscriptionsOut(BaseModel):
    subscriptions: list[SubscriptionOut] = Field(description="In the order they were given.")


class SubscriptionPage(BaseModel):
    subscriptions: list[SubscriptionOut]
    next_cursor: int = Field(description="Pass as cursor for the next page; 0 when done.")
    total: int = Field(description="Your subscriptions in all, whatever the filter (an OR once).")


class MatchRequest(BaseModel):
    """A routed batch, by columns: the k-th id, text and terms are the k-th publication's.

    Columns rather than an object per publication: a matcher validates a batch of 1,000 in about
    a third of the time (lists of strings are checked without building a model per row), and the
    body is a quarter smaller. A router and its matchers speak the same version of it: upgrade
    them together (a batch a matcher refuses is refused to its publisher with a 503, to retry)."""

    version: int = Field(default=0, ge=0, description="The mapping version that routed the batch.")
    publisher: str = Field(default="", max_length=64, description="The tenant that published it.")
    stream: str = Field(default="", max_length=64, description="The shared stream, or '' for none.")
    accepted: float = Field(
        default=0.0,
        ge=0,
        description="When the router accepted the publications (Unix seconds; 0: not said): "
        "the start of the publish-to-webhook latency.",
    )
    ids: list[str] = Field(description="Each publication's id.")
    texts: list[str] = Field(description="Each publication's text, as published.")
    terms: list[list[str]] = Field(description="Each publication's analysed terms.")
    languages: list[str] = Field(default_factory=list, description="Each one's language, or ''.")
    patterns: list[int] = Field(
        default_factory=list,
        description="The positions of the publications in which an anchor of this matcher's "
        "patterns occurs.",
    )
    drawn: dict[int, dict[str, int]] = Field(
        default_factory=dict,
        description="By position: the copy the router drew for each hot word in the publication.",
    )
    answer_max_bytes: int = Field(default=0, ge=0, description="A dry run's answer's bound.")

    @model_validator(mode="after")
    def _columns_agree(self) -> MatchRequest:
        count = len(self.ids)
        if {len(self.texts), len(self.terms), len(self.languages) or count} != {count}:
            raise ValueError(
                f"the columns differ in length: {count} ids, {len(self.texts)} texts, "
                f"{len(self.terms)} term lists, {len(self.languages)} languages"
            )
        outside = [k for k in (*self.patterns, *self.drawn) if not 0 <= k < count]
        if outside:
            raise ValueError(f"position {outside[0]} is outside the batch of {count}")
        return self


class MatchResponse(BaseModel):
    matches: int


class SyncRequest(BaseModel):
    until: str = Field(
        pattern=r"^\d{1,20}-\d{1,20}( \d{1,20}-\d{1,20})*$",
        max_length=64 * 42,  # up to 64 shards
        description="Event position (an event id per shard of the subscription records, "
        "space-separated) the matcher must have applied before answering.",
    )


class ErrorOut(BaseModel):
    """Every error answer: a message naming the problem (a list of them for invalid fields)."""

    detail: str | list[dict[str, Any]]


ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": description}
    for code, description in {
        401: "No API key, or an unknown one",
        403: "Your tenant has no grant for this shared stream",
        404: "No such resource (or another tenant's)",
        409: "The name is taken already",
        413: "Request body too large",
        422: "Invalid input; nothing was changed",
        429: "Over the tenant's rate limit; see Retry-After",
        503: "Redis or a matcher is unavailable; retry",
    }.items()
}
