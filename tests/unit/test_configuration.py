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


@pytest.mark.parametrize(
    ("variable", "old", "new"),
    [
        ("ENGINE", "rust-compact-trie", "compiled-compact-trie"),
        ("ENGINE", "rust-querynote", "compiled-querynote"),
        ("PATTERN_ENGINE", "rust", "compiled"),
    ],
)
def test_an_engine_is_read_under_its_old_name_too(
    monkeypatch: pytest.MonkeyPatch, variable: str, old: str, new: str
) -> None:
    from wordcast.services.matcher.settings import MatcherSettings

    monkeypatch.setenv("WORDCAST_MATCHER_ORDINAL", "0")
    field = variable.lower()
    for given in (old, new):
        monkeypatch.setenv(f"WORDCAST_MATCHER_{variable}", given)
        assert getattr(MatcherSettings(), field) == new, given


@pytest.mark.parametrize("variable", ["WORDCAST_ANALYSER", "WORDCAST_ANALYZER"])
def test_the_python_analyser_is_asked_for_under_either_spelling(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    from wordcast.query.analysis import Analyser, new_analyser, reference_asked

    monkeypatch.delenv("WORDCAST_ANALYSER", raising=False)
    monkeypatch.delenv("WORDCAST_ANALYZER", raising=False)
    assert not reference_asked()
    monkeypatch.setenv(variable, "python")
    assert reference_asked()
    assert isinstance(new_analyser(), Analyser)
