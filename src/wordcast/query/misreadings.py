"""What a query's writer may have meant and wordcast reads otherwise (issue 53): the syntax of
X's filtered-stream rules and of Lucene's queries that a query here does not read as they do,
each piece named with how it is read and what to write instead.

A query reads X's operators and Lucene's syntax as :mod:`.boolean` says (``OR``, ``||``, ``-``,
``!``, ``"…"~N``, wildcards, ``#hashtags``, ``has:links``, ``url:``, ranges and comparisons).
What it does not read as its writer meant: a lower-case ``or`` or ``not`` (a word, and a stop
word, dropped), fuzzy ``word~N`` (the word, exactly), a boost ``^N`` (no scores), Lucene's
``+a b`` (``b`` is required too: AND is implicit here), a regular expression ``/…/``, and
wildcards in an attribute's value. Such a query is stored as read; its answer carries one
warning a piece, and a strict request refuses it instead.

Pure: imports only the query package.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from wordcast.errors import InvalidInput
from wordcast.query.analysis import TermAnalyser, default_analyser, word_terms
from wordcast.query.boolean import BooleanQuery, parse_query

# A phrase ("…", with its slop or boost), a parenthesis, or a run of anything else.
_PIECE = re.compile(
    r'[-!+]?[A-Za-z][A-Za-z0-9_]*:"[^"]*"?|"[^"]*"?(?:~\d*)?(?:\^[\d.]*)?|[()]|[^\s()"]+'
)
_FILTER = re.compile(r"[-!+]?([A-Za-z][A-Za-z0-9_]*):(?!//)(.+)")
_FUZZY = re.compile(r"(.+?)~(\d+(?:\.\d+)?)?")
_BOOST = re.compile(r"(.+?)\^\d+(?:\.\d+)?")
_LOWER_OPERATORS = {
    "or": "`or` is a word, and a stop word, so it is dropped and both sides are required: "
    "write `OR` (or `||`) for either",
    "not": "`not` is a word, and a stop word, so it is dropped and nothing is excluded: write "
    "`NOT word` or `-word` to exclude",
}


def misreadings(query: str, analyser: TermAnalyser | None = None) -> list[str]:
    """A warning for each piece of ``query`` that X's rules or Lucene's syntax read otherwise:
    the piece as written, how wordcast reads it, and what to write instead (empty: the query
    reads as it is meant)."""
    if analyser is None:  # not `or`: an analyser that has remembered no word yet is falsy
        analyser = default_analyser()
    found: list[str] = []
    pieces = _PIECE.findall(query)
    for piece in pieces:
        warning = _warning(piece, analyser)
        if warning and warning not in found:
            found.append(warning)
    required = [p for p in pieces if p.startswith("+") and len(p) > 1]
    bare = [p for p in pieces if p[0] not in '+-!()"' and p not in ("OR", "AND", "NOT", "||", "&&")]
    if required and bare:
        found.append(
            f"`{required[0]}` with `{bare[0]}`: every word is required here (AND is implicit, as "
            f"in X's rules), where Lucene would require `{required[0][1:]}` only: write "
            f"`{required[0][1:]} OR …` for words that may be missing"
        )
    return found


def _warning(piece: str, analyser: TermAnalyser) -> str | None:
    if piece.startswith('"'):
        if '"^' in piece:
            return f"`{piece}`: boosts are not read (there are no scores): the phrase matches as is"
        return None
    lowered = piece.lower()
    if lowered in _LOWER_OPERATORS and piece not in ("OR", "NOT"):
        return _LOWER_OPERATORS[lowered]
    if len(piece) > 2 and piece.startswith("/") and piece.endswith("/"):
        return f"`{piece}`: regular expressions are not read: write words, or wildcards (`hous*`)"
    filtered = _FILTER.fullmatch(piece)
    if filtered is not None:
        name, value = filtered[1].lower(), filtered[2].strip('"')
        if ("*" in value or "?" in value) and value[:1] not in "[{<>":
            return (
                f"`{piece}` is read as the attribute `{name}` equal to the text `{value}`: "
                "wildcards are not read in an attribute's value"
            )
        return None
    return _word_warning(piece, analyser)


def _word_warning(piece: str, analyser: TermAnalyser) -> str | None:
    word = piece.lstrip("-!+")
    fuzzy = _FUZZY.fullmatch(word)
    if fuzzy is not None:
        return (
            f"`{piece}`: fuzzy matching is not supported, so it is matched as "
            f"{_as_words(fuzzy[1], analyser)}, exactly"
        )
    boost = _BOOST.fullmatch(word)
    if boost is not None:
        return (
            f"`{piece}`: boosts are not read (there are no scores), so it is matched as "
            f"{_as_words(boost[1], analyser)}"
        )
    return None


def _as_words(written: str, analyser: TermAnalyser) -> str:
    """How a written piece is matched: its words' terms, or nothing."""
    terms = sorted(word_terms(analyser, written))
    if not terms:
        return "nothing (no word is left of it)"
    return " and ".join(f"`{term}`" for term in terms)


# Pieces read otherwise before issue 53 whose alternative's words did not change, so a query
# stored earlier is matched with the new reading: a comparison, range or link part was an
# attribute equal to the text, has:links (and kin) an attribute only, "a b"~N the phrase.
_NOW_CONDITION = re.compile(r"[-!+]?([A-Za-z][A-Za-z0-9_]*):(?!//)(.+)")
_TEXT_FLAGS = frozenset({"has:links", "has:mentions", "has:hashtags", "has:cashtags"})


def earlier_readings(
    query: str, stored_terms: Sequence[str], read: BooleanQuery | InvalidInput | None = None
) -> list[str]:
    """How versions before issue 53 read ``query`` otherwise than it reads now: its stored
    words (``stored_terms``, alternative 0's) when the query's words now differ, and the pieces
    whose reading changed under the same words (empty: it reads as it always did). ``read``:
    the query as it reads now, or why it does not, when the caller has it already."""
    if read is None:
        try:
            read = parse_query(query)
        except InvalidInput as exc:
            read = exc
    if isinstance(read, InvalidInput):
        return [f"stored by an earlier version, and not a valid query now ({read})"]
    now = read
    words = now.clauses[0].words
    if set(words) != set(stored_terms):
        return [
            f"stored by an earlier version as the words `{' '.join(sorted(stored_terms))}` and "
            f"matched so; read now as `{now.clauses[0]}`: subscribe it again for the new reading"
        ]
    found = []
    for piece in _PIECE.findall(query):
        changed = _changed_piece(piece)
        if changed and changed not in found:
            found.append(changed)
    return found


def _changed_piece(piece: str) -> str | None:
    if piece.startswith('"') and re.search(r'"~\d', piece):
        return f"`{piece}`: read as a proximity window since issue 53 (before: the exact phrase)"
    field = _NOW_CONDITION.fullmatch(piece)
    if field is None:
        return None
    name, value = field[1].lower(), field[2].strip('"')
    if f"{name}:{value.lower()}" in _TEXT_FLAGS:
        return f"`{piece}`: read from the text too since issue 53 (before: an attribute only)"
    if name == "url" or value[:1] in "<>[{":
        return (
            f"`{piece}`: read as a condition since issue 53 (before: the attribute `{name}` "
            f"equal to `{value}`)"
        )
    return None
