"""The configuration reference (docs/CONFIGURATION.md), generated from the settings classes.

Every setting of every service is an environment variable read by pydantic-settings; this module
writes them out, with their defaults and descriptions, from the classes themselves, so the
reference cannot drift from the code (a unit test compares the committed file with what this
writes). Regenerate with ``python -m wordcast.services.configuration > docs/CONFIGURATION.md``.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import AliasChoices, SecretStr
from pydantic.fields import FieldInfo

from wordcast.services.common import ServiceSettings
from wordcast.services.matcher.settings import MatcherSettings
from wordcast.services.receiver.main import ReceiverSettings
from wordcast.services.router.settings import RouterSettings

SERVICES: list[tuple[str, type[ServiceSettings]]] = [
    ("Router", RouterSettings),
    ("Matcher", MatcherSettings),
    ("Receiver", ReceiverSettings),
]


def variables(settings: type[ServiceSettings], name: str, field: FieldInfo) -> list[str]:
    """The environment variables a setting is read from, as pydantic-settings looks for them."""
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return [choice for choice in alias.choices if isinstance(choice, str)]
    if isinstance(alias, str):
        return [alias]
    prefix = str(settings.model_config.get("env_prefix", ""))
    return [f"{prefix}{name}".upper()]


def _default(field: FieldInfo) -> str:
    default: Any = field.get_default(call_default_factory=True)
    if isinstance(default, SecretStr):
        return "(a development value: set it in production)"
    if isinstance(default, list):
        return ", ".join(str(item) for item in default) or "(none)"
    if default is None:
        return "(unset)"
    return str(default)


def _kind(field: FieldInfo) -> str:
    text = re.sub(
        r"\b(typing|pydantic\.types|pathlib|annotated_types)\.", "", str(field.annotation)
    )
    return text.replace("<class '", "").replace("'>", "").replace("NoneType", "None")


def _table(settings: type[ServiceSettings], names: list[str], service: str = "") -> list[str]:
    rows = ["| variable | type | default | what it does |", "|---|---|---|---|"]
    for name in names:
        field = settings.model_fields[name]
        found = variables(settings, name, field)
        if service and not field.validation_alias:
            found = [f"WORDCAST_<SERVICE>_{name.upper()}"]
        described = (field.description or "").replace("|", "\\|").replace("\n", " ")
        rows.append(
            f"| {' or '.join(f'`{v}`' for v in found)} | `{_kind(field)}` | "
            f"`{_default(field)}` | {described} |"
        )
    return rows


def reference() -> str:
    """The whole reference, as Markdown."""
    lines = [
        "# Configuration reference",
        "",
        "Every setting of every service, read from the environment. Generated from the settings",
        "classes by `python -m wordcast.services.configuration > docs/CONFIGURATION.md`;",
        "`tests/unit/test_configuration.py` fails when this file and the classes disagree.",
        "",
        "## Every service",
        "",
        "Read by the router, the matcher and the receiver alike; `<SERVICE>` is `ROUTER`,",
        "`MATCHER` or `RECEIVER`.",
        "",
        *_table(ServiceSettings, list(ServiceSettings.model_fields), service="any"),
    ]
    common = ServiceSettings.model_fields
    for title, settings in SERVICES:
        own = [
            name
            for name, field in settings.model_fields.items()
            if name not in common or field.default != common[name].default
        ]
        lines += ["", f"## {title}", "", *_table(settings, own)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(reference(), end="")
