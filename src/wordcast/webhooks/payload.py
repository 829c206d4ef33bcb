"""The payload of a message of matches, as a receiver reads it (``docs/schemas/matches-v2.json``).

Version 2 (the default) names each publication once, in ``publications`` (``{"id", "text"}``),
and each match refers to its publication by its place there (``"publication": 0``), with its
``subscription_id`` and, when explanations are on, ``matched`` (offsets into the text). Version 1
(``WORDCAST_MATCHER_MESSAGE_VERSION=1``, for receivers written against it) repeats the
publication's id and text, and the subscription's query or pattern, in every match.

:func:`matches_of` reads either into one shape, for code that handles both.

Pure: imports nothing of wordcast.
"""

from __future__ import annotations

from typing import Any


def matches_of(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Each match of a payload of either version with its ``publication_id`` and ``text`` (and,
    from a version 1 payload, its ``query`` or ``pattern``)."""
    matches: list[dict[str, Any]] = payload.get("matches", [])
    if payload.get("version", 1) < 2:
        return matches
    publications = payload["publications"]
    return [
        {
            **match,
            "publication_id": publications[match["publication"]]["id"],
            "text": publications[match["publication"]]["text"],
        }
        for match in matches
    ]
