"""Messages as receivers read them: every body a matcher builds is valid against the JSON Schema
of its version (docs/schemas/), with explanations of every kind, and reads the same through
:func:`wordcast.webhooks.payload.matches_of` whatever the version."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from tests.unit.support import held_subscriptions, routed_batch, written
from wordcast.query.analysis import analyse
from wordcast.query.boolean import part_id
from wordcast.webhooks.payload import matches_of

SCHEMAS = Path(__file__).parents[2] / "docs" / "schemas"


def _validator(version: int) -> Draft202012Validator:
    loaded = {
        f"matches-v{v}.json": orjson.loads((SCHEMAS / f"matches-v{v}.json").read_bytes())
        for v in (1, 2)
    }
    registry: Registry[Any] = Registry().with_resources(
        (schema["$id"], Resource.from_contents(schema)) for schema in loaded.values()
    )
    schema = loaded[f"matches-v{version}.json"]
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, registry=registry)


def _messages(version: int, explain: bool, backfill: bool) -> list[dict[str, Any]]:
    held, subscriptions = held_subscriptions(
        '"white house" OR (senate vote -poll) OR lang:en apple'
    )
    texts = ["The White House: senate vote", "apple senate, vote 🦆", "house Senate vote"]
    publications = [
        (f"p{k}", text, (*analyse(text), "lang:en"), True) for k, text in enumerate(texts)
    ]
    pairs = [(part_id("q", 0), 0), (part_id("q", 1), 2), (part_id("q", 2), 1)]
    pairs += [("plain", k) for k in range(3)] + [("wild", 0), ("wild", 2)]
    batch = routed_batch(publications, "acme", "news" if backfill else "", backfill=backfill)
    found = written(
        pairs, batch, subscriptions, held, most=100, explain=explain, payload_version=version
    )
    return [orjson.loads(message.body) for message in found]


@pytest.mark.parametrize("explain", [True, False])
@pytest.mark.parametrize("backfill", [True, False])
def test_every_body_is_valid_against_its_versions_schema(explain: bool, backfill: bool) -> None:
    read: dict[int, list[dict[str, Any]]] = {}
    for version in (1, 2):
        validator = _validator(version)
        bodies = _messages(version, explain, backfill)
        for body in bodies:
            errors = [error.message for error in validator.iter_errors(body)]
            assert errors == [], (version, body)
        read[version] = [
            {k: v for k, v in m.items() if k not in ("query", "pattern", "publication")}
            for body in bodies
            for m in matches_of(body)
        ]
    assert read[1] == read[2]  # the same matches, explained the same, either way
    assert len(read[2]) == 8


def test_the_schema_refuses_what_a_receiver_could_not_read() -> None:
    validator = _validator(2)
    body = _messages(2, True, False)[0]
    assert validator.is_valid(body)
    for broken in (
        {**body, "version": 1},
        {**body, "publications": []},
        {**body, "matches": [{**body["matches"][0], "publication": -1}]},
        {**body, "matches": [{**body["matches"][0], "text": "inline"}]},
    ):
        assert not validator.is_valid(broken)
