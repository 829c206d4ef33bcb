"""The outbox against a real Redis: group acknowledgements, batched secrets, and dispatchers
that share every matcher's outbox (delivering to a real receiver process)."""

from __future__ import annotations

import pytest

from wordcast.services.matcher.settings import MatcherSettings
from wordcast.storage.outbox import (
    Backlog,
    redis_memory_limit,
)


def test_redis_memory_limit_is_the_setting_else_most_of_maxmemory_else_half_the_machine() -> None:
    gib = 2**30
    machine = {"maxmemory": 0, "total_system_memory": 24 * gib}
    assert redis_memory_limit(machine, configured=0) == 12 * gib
    assert redis_memory_limit(machine | {"maxmemory": 6 * gib}, configured=0) == 6 * gib * 9 // 10
    assert redis_memory_limit(machine | {"maxmemory": 6 * gib}, configured=gib) == gib
    assert redis_memory_limit({"maxmemory": 0}, configured=0) == 0  # nothing known: no limit
    assert not Backlog(messages=5, redis_used=10 * gib, redis_limit=0).memory_full
    assert not Backlog(messages=5, redis_used=gib - 1, redis_limit=gib).memory_full
    assert Backlog(messages=5, redis_used=gib, redis_limit=gib).memory_full


def test_taking_over_sooner_than_a_delivery_can_last_is_refused() -> None:
    settings = MatcherSettings(ordinal=0)
    assert settings.delivery_take_over_after_s > settings.longest_delivery_s
    with pytest.raises(ValueError, match="longest a delivery can take"):
        MatcherSettings(ordinal=0, delivery_take_over_after_s=settings.longest_delivery_s)


def test_the_delivery_settings_of_endpoints_and_messages_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WORDCAST_MATCHER_MESSAGE_VERSION", "1")
    monkeypatch.setenv("WORDCAST_MATCHER_SUBSCRIPTION_SIGNATURES_UNTIL", "2100-01-01T00:00:00Z")
    monkeypatch.setenv("WORDCAST_MATCHER_FAILING_ENDPOINT_SLOTS", "0.5")
    settings = MatcherSettings(ordinal=0)
    assert settings.message_version == 1
    assert settings.subscription_signatures_end == 4102444800.0
    assert settings.subscriptions_max == 64  # the window is open: messages bound their signers
    assert settings.failing_endpoint_slots == 0.5
    monkeypatch.setenv("WORDCAST_MATCHER_MESSAGE_VERSION", "3")
    with pytest.raises(ValueError, match="less than or equal to 2"):
        MatcherSettings(ordinal=0)
    monkeypatch.delenv("WORDCAST_MATCHER_MESSAGE_VERSION")
    monkeypatch.delenv("WORDCAST_MATCHER_SUBSCRIPTION_SIGNATURES_UNTIL")
    assert MatcherSettings(ordinal=0).subscriptions_max is None  # no window: one secret signs
