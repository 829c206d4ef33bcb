"""Filters on what a publication says about itself: ``source:rss``, ``author:"ap"``, ``has:url``
and ``lang:de`` (issue 13, parts 2 and 3), as X's filtered-stream rules filter on ``from:``,
``has:links`` and ``lang:``.

A publication may carry a flat object of attributes (``{"source": "rss", "tags": ["a", "b"]}``:
strings, numbers, booleans, lists of strings). A filter in a query reads as a *filter term*,
``name:value`` with the value case-folded and its white space collapsed; an analysed term never
holds a ``:``, so the two never meet. The router adds the filter terms of each publication
(:func:`filter_terms`) to the terms it routes to each matcher, after routing on its words; a
matcher then checks a filter exactly as it checks a word, and routing never sees one. A filter
requires nothing of the words, so an alternative made only of filters is refused (it would match
almost every publication): a filter narrows what a query's words match, never widens it.

Pure: imports only the error types, the limits and :mod:`.languages` (for ``lang:`` codes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from wordcast.errors import InvalidInput
from wordcast.limits import MAX_ATTRIBUTE_NAME_CHARS
from wordcast.query.languages import check_code

Value = str | int | float | bool | Sequence[str]

HAS = "has"  # has:NAME holds where the attribute NAME is present and not empty
LANG = "lang"  # lang:CODE holds where the publication's language is CODE
RESERVED = frozenset({HAS, LANG})
NAME = re.compile(rf"[a-z][a-z0-9_]{{0,{MAX_ATTRIBUTE_NAME_CHARS - 1}}}")
# name:value or name:"a value"; not a URL (http://…), whose words a query means.
FILTER_TOKEN = re.compile(r'(-?)([A-Za-z][A-Za-z0-9_]*):(?!//)("[^"]*"?|[^\s()"]+)')
_SPACE = re.compile(r"\s+")


def is_filter(token: str) -> bool:
    return FILTER_TOKEN.fullmatch(token) is not None


def term(name: str, value: str) -> str:
    """The filter term of ``name:value``."""
    return f"{name}:{_SPACE.sub(' ', value).strip().casefold()}"


def written(filter_term: str) -> str:
    """A filter term as a query writes it (quoted where its value has a space)."""
    name, value = filter_term.split(":", 1)
    return f'{name}:"{value}"' if " " in value else filter_term


def read_filter(token: str, query: str) -> tuple[bool, str]:
    """(negated, filter term) of a filter token of ``query``; raises InvalidInput naming the
    problem."""
    found = FILTER_TOKEN.fullmatch(token)
    if found is None:
        raise InvalidInput(f"query {query!r}: {token!r} is not a filter")
    negated, name, value = found[1] == "-", found[2].lower(), found[3]
    if value.startswith('"'):
        if len(value) < 2 or not value.endswith('"'):
            raise InvalidInput(f"query {query!r}: a quote without its closing quote in {token!r}")
        value = value[1:-1]
    if not NAME.fullmatch(name):
        raise InvalidInput(
            f"query {query!r}: {name!r} in {token!r} is not an attribute name (a letter, then "
            f"letters, digits or _, at most {MAX_ATTRIBUTE_NAME_CHARS} characters)"
        )
    if not value.strip():
        raise InvalidInput(f"query {query!r}: the filter {token!r} has no value")
    if name == HAS:
        if not NAME.fullmatch(value.lower()):
            raise InvalidInput(f"query {query!r}: has:{value} needs an attribute name")
        value = value.lower()
    if name == LANG:
        try:
            value = check_code(value)
        except ValueError as exc:
            raise InvalidInput(f"query {query!r}: {exc}") from None
    return negated, term(name, value)


def filter_terms(attributes: Mapping[str, Value] | None, lang: str | None = None) -> list[str]:
    """The filter terms a publication with these attributes (and language) satisfies."""
    terms = [term(LANG, lang)] if lang else []
    for name, value in (attributes or {}).items():
        if isinstance(value, bool):
            items = ["true" if value else "false"]
        elif isinstance(value, int | float):
            items = [str(value)]
        elif isinstance(value, str):
            items = [value] if value.strip() else []
        else:
            items = [item for item in value if item.strip()]
        if items:
            terms.append(term(HAS, name))
            terms += [term(name, item) for item in items]
    return terms
