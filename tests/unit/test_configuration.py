"""docs/CONFIGURATION.md is what the settings classes say, so it cannot drift from them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from wordcast.services.configuration import SERVICES, reference, variables

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_reference_is_the_generated_one() -> None:
    committed = (ROOT / "docs" / "CONFIGURATION.md").read_text()
    assert committed == reference(), (
        "docs/CONFIGURATION.md is out of date: python -m wordcast.services.configuration > "
        "docs/CONFIGURATION.md"
    )


def test_every_setting_is_listed_by_its_variable_with_a_description() -> None:
    text = reference()
    for _, settings in SERVICES:
        for name, field in settings.model_fields.items():
            assert field.description, f"{settings.__name__}.{name} has no description"
            named = variables(settings, name, field)
            assert any(f"`{v}`" in text for v in named) or f"_<SERVICE>_{name.upper()}`" in text


@pytest.mark.parametrize(
    ("settings", "field", "old", "new", "value"),
    [
        ("router", "shed_in_flight", "SHED_BUFFER", "SHED_IN_FLIGHT", 123),
        ("router", "shed_max_matchers", "SHED_K", "SHED_MAX_MATCHERS", 3.0),
        ("matcher", "pattern_splitting", "PATTERN_SPLIT", "PATTERN_SPLITTING", "multiple"),
    ],
)
def test_a_renamed_setting_is_read_under_its_old_name_too(
    monkeypatch: pytest.MonkeyPatch, settings: str, field: str, old: str, new: str, value: Any
) -> None:
    from wordcast.services.matcher.settings import MatcherSettings
    from wordcast.services.router.settings import RouterSettings

    kind = {"router": RouterSettings, "matcher": MatcherSettings}[settings]
    monkeypatch.setenv("WORDCAST_ENVIRONMENT", "development")
    monkeypatch.setenv("WORDCAST_MATCHER_ORDINAL", "0")
    for name in (old, new):
        with monkeypatch.context() as env:
            env.setenv(f"WORDCAST_{settings.upper()}_{name}", str(value))
            assert getattr(kind(), field) == value, name
