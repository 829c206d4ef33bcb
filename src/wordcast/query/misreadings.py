"""What a query's writer may have meant and wordcast reads otherwise (issue 53): the syntax of
X's filtered-stream rules and of Lucene's queries that a query here does not read as they do,
each piece named with how it is read and what to write instead.

A query is read as :mod:`.boolean` says: operators in capitals, words analysed, ``name:value``
a filter on the publication's attributes (:mod:`.filters`). Everything else is a word, so
``obama or biden`` requires both (``or`` a stop word, dropped), ``hous*`` is the word ``hou``,
``pythn~1`` the word ``pythn``, ``score:>3`` the attribute ``score`` equal to ``>3``, and
``#python`` the word ``python``. Such a query is stored as read; its answer carries one warning
a piece, and a strict request refuses it instead.

Pure: imports only the query package.
"""

from __future__ import annotations

import re

from wordcast.query.analysis import TermAnalyser, default_analyser

# A phrase ("…", possibly followed by ~N), a parenthesis, or a run of anything else.
_PIECE = re.compile(r'"[^"]*"?(?:~\d+)?|[()]|[^\s()"]+')
_FILTER = re.compile(r"-?([A-Za-z][A-Za-z0-9_]*):(?!//)(.+)")
_FUZZY = re.compile(r"(.+?)~(\d+(?:\.\d+)?)?")
_BOOST = re.compile(r"(.+?)\^\d+(?:\.\d+)?")
_LOWER_OPERATORS = {
    "or": "`or` is a word, and a stop word, so it is dropped and both sides are required: "
    "write `OR` for either",
    "not": "`not` is a word, and a stop word, so it is dropped and nothing is excluded: write "
    "`NOT word` or `-word` to exclude",
    "||": "`||` is not an operator here: write `OR` for either",
    "&&": "`&&` is not an operator here: every word is required already (or write `AND`)",
}
# X's operators whose meaning comes from the text or the post, not from attributes given.
_X_HAS = frozenset(
    {"links", "mentions", "hashtags", "cashtags", "media", "images", "videos", "geo"}
)
_X_IS = frozenset({"retweet", "reply", "quote", "verified", "nullcast"})
_COMPARISON = re.compile(r"[<>\[{].*")  # a comparison (>3, <=2) or a range's start ([10, {a)


def misreadings(query: str, analyser: TermAnalyser | None = None) -> list[str]:
    """A warning for each piece of ``query`` that X's rules or Lucene's syntax read otherwise:
    the piece as written, how wordcast reads it, and what to write instead (empty: the query
    reads as it is meant)."""
    if analyser is None:  # not `or`: an analyser that has remembered no word yet is falsy
        analyser = default_analyser()
    found: list[str] = []
    for piece in _PIECE.findall(query):
        warning = _warning(piece, analyser)
        if warning and warning not in found:
            found.append(warning)
    return found


def _warning(piece: str, analyser: TermAnalyser) -> str | None:
    if piece.startswith('"'):
        closed = piece.rsplit('"', 1)
        if piece.count('"') >= 2 and closed[1].startswith("~"):
            near = closed[1][1:]
            return (
                f"`{piece}`: Lucene's proximity is not read (the phrase must be exact): write "
                f"`NEAR/{near}({closed[0][1:]})` for its words within {near} positions"
            )
        return None
    lowered = piece.lower()
    if lowered in _LOWER_OPERATORS and piece not in ("OR", "NOT"):
        return _LOWER_OPERATORS[lowered]
    filtered = _FILTER.fullmatch(piece)
    if filtered is not None:
        return _filter_warning(piece, filtered[1].lower(), filtered[2])
    return _word_warning(piece, analyser)


def _filter_warning(piece: str, name: str, value: str) -> str | None:
    value = value.strip('"')
    if _COMPARISON.fullmatch(value):
        return (
            f"`{piece}` is read as the attribute `{name}` equal to the text `{value}`: "
            "comparisons and ranges are not supported"
        )
    if name == "has" and value.lower() in _X_HAS:
        return (
            f"`{piece}` is read as: the publication has an attribute named `{value.lower()}`; "
            "X's meaning (found in the text) is not read yet"
        )
    if name == "is" and value.lower() in _X_IS:
        return (
            f"`{piece}` is read as the attribute `is` equal to `{value.lower()}`: publish it "
            f'as an attribute (`"attributes": {{"is": "{value.lower()}"}}`) for it to match'
        )
    if name == "url":
        return (
            f"`{piece}` is read as the attribute `url` equal to `{value}`, not a part of a "
            "link in the text"
        )
    return None


def _word_warning(piece: str, analyser: TermAnalyser) -> str | None:
    word = piece.lstrip("-")
    if word.startswith("+") and len(word) > 1:
        return f"`{piece}`: `+` is not read: every word is required already"
    if word[:1] in "#@$" and len(word) > 1:
        kind = {"#": "a hashtag", "@": "a mention", "$": "a cashtag"}[word[0]]
        return (
            f"`{piece}` is read as the word `{word[1:]}`: {kind} is not told apart from the "
            "word yet"
        )
    if word.startswith("!") and len(word) > 1:
        return f"`{piece}`: `!` is not read: write `-{word[1:]}` to exclude"
    if "*" in word or "?" in word:
        return (
            f"`{piece}`: wildcards are not read in a query, so it is matched as "
            f"{_as_words(word, analyser)}: a pattern subscription matches wildcards "
            f'(`"pattern": "{word}"`)'
        )
    fuzzy = _FUZZY.fullmatch(word)
    if fuzzy is not None:
        return (
            f"`{piece}`: fuzzy matching is not supported, so it is matched as "
            f"{_as_words(fuzzy[1], analyser)}, exactly"
        )
    boost = _BOOST.fullmatch(word)
    if boost is not None:
        return (
            f"`{piece}`: boosts are not read, so it is matched as {_as_words(boost[1], analyser)}"
        )
    return None


def _as_words(written: str, analyser: TermAnalyser) -> str:
    """How a written piece is matched: its analysed terms, or nothing."""
    terms = sorted(analyser.terms(written))
    if not terms:
        return "nothing (no word is left of it)"
    return " and ".join(f"`{term}`" for term in terms)
