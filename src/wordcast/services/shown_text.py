"""The one input rule for text a person or a terminal will see again: publication ids, tags,
endpoint descriptions, queries and patterns.

Every character must be printable (``str.isprintable``): no control characters (NUL, ESC, which
a terminal obeys), no format characters (the bidirectional overrides U+202E and U+2066–U+2069,
which reorder what a console or a terminal shows; the zero-width space U+200B, which hides a
difference), no line or paragraph separators (U+2028, U+2029), no unassigned or private-use code
points. Queries and patterns also admit tab and line breaks (white space to the analyser) and the
zero-width joiners U+200C and U+200D, which words of some scripts and emoji sequences need.
"""

from __future__ import annotations

_IN_QUERIES = frozenset("\t\n\r\u200c\u200d")


def shown(value: str, query: bool = False) -> str:
    """``value`` if it obeys the rule (``query``: as queries and patterns do); ValueError naming
    the first character that does not, by its code point."""
    if value.isprintable():  # nearly always, checked in C: ids come a thousand to a request
        return value
    for char in value:
        if not char.isprintable() and not (query and char in _IN_QUERIES):
            raise ValueError(
                f"must hold only printable characters: U+{ord(char):04X} at position "
                f"{value.index(char)} is not (control characters, format characters and "
                "separators are refused)"
            )
    return value


def escaped(value: str) -> str:
    """``value`` as a terminal may print it: any character the rule refuses written as an escape
    (text stored before the rule existed)."""
    if value.isprintable():
        return value
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in value)
