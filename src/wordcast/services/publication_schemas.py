"""What a publisher sends: publications, with their attributes and language (issue 13), and what
the router answers."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, Field, field_validator, model_validator

from wordcast import limits
from wordcast.query.filters import NAME, RESERVED
from wordcast.query.languages import check_code
from wordcast.services.schemas import StreamName, Strict
from wordcast.services.shown_text import shown

AttributeName = Annotated[str, Field(pattern=f"^{NAME.pattern}$")]


def _attribute_chars(name: str, value: Any) -> int:
    """The characters of one attribute's value; raises ValueError naming what is wrong."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and (not math.isfinite(value) or not -(2**63) <= value < 2**63):
        raise ValueError(
            f"attribute {name!r} is a number beyond 64 bits, which a filter never matches "
            "as written: send it as a string"
        )
    if isinstance(value, bool | int | float):
        return len(str(value))
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(item, str) for item in items):
        raise ValueError(
            f"attribute {name!r} must be a string, a number, a boolean or a list of strings"
        )
    if len(items) > limits.MAX_ATTRIBUTE_ITEMS:
        raise ValueError(
            f"attribute {name!r} lists {len(items)} strings; at most {limits.MAX_ATTRIBUTE_ITEMS}"
        )
    longest = max(map(len, items), default=0)
    if longest > limits.MAX_ATTRIBUTE_VALUE_CHARS:
        raise ValueError(
            f"attribute {name!r} holds a string of {longest} characters; at most "
            f"{limits.MAX_ATTRIBUTE_VALUE_CHARS}"
        )
    return sum(map(len, items))


class PublicationIn(Strict):
    id: str | None = Field(
        default=None,
        min_length=1,
        max_length=limits.MAX_PUBLICATION_ID_CHARS,
        description="Your id for the publication (printable characters; one is generated when "
        "omitted). It is yours: another tenant's publication with the same id is another "
        "publication.",
    )
    text: str = Field(max_length=limits.MAX_TEXT_CHARS)
    attributes: dict[AttributeName, Any] | None = Field(
        default=None,
        max_length=limits.MAX_ATTRIBUTES,
        description="What the publication says about itself, for filters (`source:rss`, "
        "`has:url`): a flat object of strings, numbers, booleans and lists of strings, "
        f"at most {limits.MAX_ATTRIBUTES} names of at most "
        f"{limits.MAX_ATTRIBUTE_NAME_CHARS} characters (a lower-case letter, then lower-case "
        f"letters, digits or _), {limits.MAX_ATTRIBUTE_ITEMS} strings to a list, "
        f"{limits.MAX_ATTRIBUTE_VALUE_CHARS} characters to a string and "
        f"{limits.MAX_ATTRIBUTES_CHARS} in all.",
    )

    lang: str | None = Field(
        default=None,
        max_length=16,
        description="The publication's language, an ISO 639 code (`de`, `pt`, `zh`); "
        "without it the router detects it. `lang:de` in a query filters on it, and a language "
        "a Snowball stemmer covers is analysed in that language too.",
    )

    @field_validator("lang")
    @classmethod
    def _known_language(cls, value: str | None) -> str | None:
        return None if value is None else check_code(value)

    @field_validator("attributes")
    @classmethod
    def _attributes_bounded(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if not value:
            return None
        reserved = sorted(RESERVED & value.keys())
        if reserved:
            raise ValueError(
                f"attribute name {reserved[0]!r} is reserved for filters (has:NAME, lang:CODE)"
            )
        total = sum(len(name) + _attribute_chars(name, item) for name, item in value.items())
        if total > limits.MAX_ATTRIBUTES_CHARS:
            raise ValueError(
                f"the attributes hold {total} characters; at most {limits.MAX_ATTRIBUTES_CHARS}"
            )
        return value

    @field_validator("id")
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        # It goes into logs, and into headers a receiver may print (services.shown_text).
        return None if value is None else shown(value)


class PublicationsIn(Strict):
    """A batch of publications. A single ``{"id": …, "text": …}`` object is accepted too."""

    publications: list[PublicationIn] = Field(
        min_length=1, max_length=limits.MAX_BATCH_PUBLICATIONS
    )
    stream: StreamName | None = Field(
        default=None,
        description="Publish to this shared stream (your tenant needs its publish grant); "
        "without it, the publications meet only your own tenant's subscriptions.",
    )

    @model_validator(mode="before")
    @classmethod
    def _single_publication(cls, data: Any) -> Any:
        if isinstance(data, dict) and "publications" not in data and "text" in data:
            single = {k: v for k, v in data.items() if k != "stream"}
            return {"publications": [single]} | (
                {"stream": data["stream"]} if "stream" in data else {}
            )
        return data

    @field_validator("publications")
    @classmethod
    def _ids_unique(cls, publications: list[PublicationIn]) -> list[PublicationIn]:
        # A match names its publication by id: two texts under one id could not be told apart.
        seen: set[str] = set()
        for publication in publications:
            if publication.id in seen:
                raise ValueError(
                    f"publication id {publication.id!r} is given more than once in the batch; "
                    "ids must be unique within a batch"
                )
            if publication.id is not None:
                seen.add(publication.id)
        return publications


class PublicationsAccepted(BaseModel):
    accepted: int
    ids: list[str]
    routed: int = Field(description="Batches sent to matchers (one per matcher reached).")


class DryRunMatch(BaseModel):
    publication_id: str
    subscription_id: str
    matched: dict[str, Any] = Field(
        description="Why it matched, as a delivered match's `matched` says."
    )


class PublicationsDryRun(BaseModel):
    dry_run: bool = True
    ids: list[str] = Field(description="Each publication's id (given or generated).")
    matches: list[DryRunMatch] = Field(
        description="The matches your own subscriptions would get, in publication order."
    )
