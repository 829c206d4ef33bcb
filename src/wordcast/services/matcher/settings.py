from __future__ import annotations

import os
import re
import time
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, ByteSize, Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from wordcast.engines.registry import RETIRED_ENGINE_NAMES
from wordcast.limits import MAX_MESSAGE_BYTES
from wordcast.services.common import ServiceSettings
from wordcast.services.matcher.dispatcher import ATTEMPT_TIMEOUTS
from wordcast.storage.outbox import MAX_SIGNERS


class MatcherSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="WORDCAST_MATCHER_", extra="ignore")

    port: int = Field(default=8101, description="The port the matcher listens on.")
    ordinal: int = Field(
        default=-1,
        description="This matcher's index; taken from a StatefulSet host name (matcher-3) if unset.",
    )
    advertise_url: str | None = Field(
        default=None,
        description="The URL routers reach this matcher at, registered in Redis for routers whose "
        "configuration does not name it (a matcher added by scaling); default "
        "http://127.0.0.1:{port}.",
    )
    engine: Literal[
        "compiled-compact-trie", "compiled-querynote", "trie", "compact-trie", "querynote"
    ] = Field(
        default="compiled-compact-trie",
        description="Index for conjunctive subscriptions: the compiled compact trie by default "
        "(`make bench-matcher`, BENCHMARKS.md); `trie`, `compact-trie` and `querynote` are the "
        "Python references. The names before issue 52 (`rust-compact-trie`, `rust-querynote`) "
        "are still taken.",
    )
    term_stats: Path | None = Field(
        default=None,
        description="TermStats JSON from wordcast.spark_jobs.term_stats, for querynote's weights and the "
        "compact trie's rare-first order.",
    )
    pattern_engine: Literal["compiled", "retriever", "aho-corasick", "nfa", "naive"] = Field(
        default="compiled",
        description="Index for wildcard pattern subscriptions; all give identical matches. The "
        "default is the compiled one (`make bench-patterns`, BENCHMARKS.md); the others are "
        "the Python references. `rust`, its name before issue 52, is still taken.",
    )

    @field_validator("engine", "pattern_engine", mode="before")
    @classmethod
    def _renamed_engine(cls, name: object) -> object:
        """An engine's name before issue 52 read as its name now."""
        return RETIRED_ENGINE_NAMES.get(name, name) if isinstance(name, str) else name

    pattern_splitting: Literal["none", "single", "multiple"] = Field(
        default="none",
        validation_alias=AliasChoices(
            "WORDCAST_MATCHER_PATTERN_SPLITTING", "WORDCAST_MATCHER_PATTERN_SPLIT"
        ),
        description="REtriever's phrase splitting (§3.1); retriever engine only.",
    )
    pattern_min_word_len: int = Field(default=2, ge=1, description="REtriever's MIN_WORD_LEN.")
    pattern_min_split_score: int = Field(
        default=2, ge=0, description="REtriever's MIN_SPLIT_SCORE."
    )
    outbox_max: int = Field(
        default=1_000_000,
        ge=1,
        description="Messages the outbox may hold; beyond it routed batches get 503 (back-pressure).",
    )
    checkpoint_dir: Path | None = Field(
        default=None,
        description="A local directory for this matcher's checkpoint (the subscriptions it holds "
        "and the event position they reflect): a restart reads it and replays only the changes "
        "since, instead of reading every record from Redis. Unset: no checkpoint.",
    )
    checkpoint_every_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds between checkpoints while subscriptions change (one is also "
        "written when the matcher stops).",
    )
    redis_memory_max: ByteSize = Field(
        default=ByteSize(0),
        ge=0,
        description="Bytes Redis may hold (every outbox, and everything else) before routed "
        "batches get 503, as 2GB or 512MiB; 0: 90% of Redis's maxmemory, or half of the "
        "machine's memory when Redis has none.",
    )
    delivery_batch: int = Field(default=500, ge=1, description="Matches per webhook POST at most.")
    message_max_bytes: ByteSize = Field(
        default=ByteSize(1 << 20),
        ge=4096,
        le=MAX_MESSAGE_BYTES,
        description="Bytes a message (a webhook POST's body, a match stream event) holds at "
        "most, as 1MiB or 256KiB; a message of one match may be larger (a match is never split). "
        "What a message costs a router streaming it to a consumer that reads slowly.",
    )
    message_version: int = Field(
        default=2,
        ge=1,
        le=2,
        description="The shape of a message's JSON (docs/schemas/matches-v2.json): 2 names each "
        "publication once and its matches refer to it; 1, the shape before, repeats the "
        "publication's text and the subscription's query in every match, for receivers "
        "written against it.",
    )
    explain_matches: bool = Field(
        default=True,
        description="Give each match its `matched` (the alternative, terms and spans that "
        "satisfied it, with offsets into the text); false leaves it out, for smaller messages "
        "and less CPU per match.",
    )
    delivery_concurrency: int = Field(
        default=64,
        ge=1,
        description="Delivery attempts at once (a message backing off holds none).",
    )
    delivery_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Each wait of a delivery attempt for the network (connecting, sending, the "
        "answer); an attempt lasts at most three of them.",
    )
    delivery_attempts: int = Field(
        default=8, ge=1, description="Attempts a message gets before it is a dead letter."
    )
    delivery_backoff_s: float = Field(
        default=0.5, gt=0, description="First retry's backoff ceiling; doubles per attempt."
    )
    delivery_max_backoff_s: float = Field(
        default=60.0, gt=0, description="The longest pause between two attempts."
    )
    endpoint_disable_after_s: float = Field(
        default=5 * 86400.0,
        gt=0,
        description="A webhook endpoint whose attempts have all failed for this long is "
        "disabled, with the reason shown (GET /endpoints); its messages then go to the dead "
        "letters. Enabling it again (PATCH /endpoints/{id}) resumes delivery.",
    )
    failing_endpoint_slots: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description="The share of the delivery slots an endpoint whose last attempt failed may "
        "hold: a failing receiver cannot take the slots the healthy ones need.",
    )
    subscription_signatures_until: datetime | None = Field(
        default=None,
        description="The end of the migration window to one secret per endpoint, as an ISO "
        "date (2027-03-01T00:00:00Z): until then, messages carry the signature of each "
        "subscription's own secret (those created before endpoints have one) besides the "
        "endpoint's, so receivers verifying with a subscription's secret keep verifying. "
        "Unset: the endpoint's secret alone signs, once per message.",
    )
    shutdown_drain_s: float = Field(
        default=5.0,
        ge=0,
        description="On shutdown, how long deliveries in flight may finish before they are cut "
        "short (and left to this matcher's successor).",
    )
    delivery_take_over_after_s: float = Field(
        default=1800.0,
        gt=0,
        description="A message taken by a matcher and not finished for this long (the matcher "
        "was removed for good) is taken over by another; must exceed the longest delivery.",
    )
    stream_retention_s: float = Field(
        default=3600.0,
        gt=0,
        le=7 * 86400,
        description="How long each tenant's match stream keeps a match for consumers that "
        "resume (GET /matches/stream with Last-Event-ID); older positions get a 410.",
    )
    stream_max_messages: int = Field(
        default=100_000,
        ge=1,
        description="The most messages a tenant's match stream keeps, whatever their age: "
        "what bounds its memory when matches come faster than the retention assumes.",
    )

    @property
    def subscription_signatures_end(self) -> float:
        """The migration window's end as Unix time (0: no window)."""
        until = self.subscription_signatures_until
        return until.timestamp() if until is not None else 0.0

    @property
    def subscriptions_max(self) -> int | None:
        """Subscriptions a message may carry matches for: bounded by their signatures while the
        migration window is open, else not at all (one secret signs)."""
        return MAX_SIGNERS if time.time() < self.subscription_signatures_end else None

    @property
    def longest_delivery_s(self) -> float:
        """Every attempt reaching its deadline, with the longest pauses between them: how long
        a live dispatcher may hold a message at most. A retry that is due waits for a slot too,
        counted as one more deadline an attempt (every slot busy with attempts that run out)."""
        attempts = self.delivery_attempts
        deadline = ATTEMPT_TIMEOUTS * self.delivery_timeout_s
        return 2 * attempts * deadline + (attempts - 1) * self.delivery_max_backoff_s

    @model_validator(mode="after")
    def _take_over_after_the_longest_delivery(self) -> MatcherSettings:
        if self.delivery_take_over_after_s <= self.longest_delivery_s:
            raise ValueError(
                f"delivery_take_over_after_s ({self.delivery_take_over_after_s:g}) must exceed the "
                f"longest a delivery can take with these settings ({self.longest_delivery_s:g} s), "
                "or a message still being delivered could be delivered twice"
            )
        return self

    @model_validator(mode="after")
    def _ordinal_from_hostname(self) -> MatcherSettings:
        if self.ordinal < 0:
            found = re.search(r"-(\d+)$", os.environ.get("HOSTNAME", ""))
            if not found:
                raise ValueError(
                    "set WORDCAST_MATCHER_ORDINAL, or run with a StatefulSet host name like matcher-0"
                )
            self.ordinal = int(found.group(1))
        return self
