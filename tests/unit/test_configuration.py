"""docs/CONFIGURATION.md is what the settings classes say, so it cannot drift from them."""

from __future__ import annotations

from pathlib import Path

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
