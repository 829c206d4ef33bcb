"""Wildcard string subscriptions: syntax, normalisation, anchors (REtriever §2.1).

A pattern is a sequence of literals and two operators: ``?`` stands for exactly one character and
``*`` for any sequence of zero or more characters; ``\\?``, ``\\*`` and ``\\\\`` are the literal
characters. A publication matches a pattern when some substring of its normalised text is an
instantiation of the pattern (REtriever §2.1: "part of the publication is an instantiation").

Normalisation, applied to publications and to the literals of patterns alike: Unicode case folding,
then every run of white space collapsed to one space. ``?`` stands for one character of the
normalised text (so ``ß``, which folds to ``ss``, is two characters).

Splitting a pattern on its operators gives its *phrases* (REtriever §2.2) and the *gaps* around
them: how many ``?`` and whether a ``*`` separate consecutive phrases. The *anchor* is the phrase
that must occur in every matching publication and is the least likely to occur by chance; routers
send a publication to a pattern's matcher only if the anchor occurs in it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from wordcast import limits
from wordcast.errors import InvalidPattern

_WHITESPACE = re.compile(r"\s+")

# English letters from most to least frequent: an anchor made of rarer characters is more selective
# than an equally long one made of common ones.
_COMMON = "etaoinshrdlcumwfgypbvkjxqz"


def normalise(text: str) -> str:
    """Case-fold and collapse white-space runs: the text patterns are matched against."""
    return _WHITESPACE.sub(" ", text.casefold())


@dataclass(frozen=True, slots=True)
class Gap:
    """What separates two phrases: exactly ``questions`` characters, or at least that many."""

    questions: int = 0
    star: bool = False

    def admits(self, distance: int) -> bool:
        """Whether ``distance`` characters between the phrases satisfy this gap."""
        return distance >= self.questions if self.star else distance == self.questions


NO_GAP = Gap()


@dataclass(frozen=True, slots=True)
class Pattern:
    """A parsed pattern: ``phrases[k]`` is preceded by ``gaps[k]``; ``gaps[-1]`` trails."""

    source: str
    phrases: tuple[str, ...]
    gaps: tuple[Gap, ...]

    @property
    def anchor(self) -> str:
        return choose_anchor(self.phrases)

    @property
    def leading(self) -> Gap:
        return self.gaps[0]

    @property
    def trailing(self) -> Gap:
        return self.gaps[-1]

    def regex(self) -> str:
        """The same language as a Python regular expression (searched, with re.DOTALL)."""
        parts: list[str] = []
        for gap, phrase in zip(self.gaps, self.phrases, strict=False):
            parts.append(_gap_regex(gap, leading=not parts))
            parts.append(re.escape(phrase))
        parts.append(_gap_regex(self.gaps[-1], leading=False))
        return "".join(parts)


def _gap_regex(gap: Gap, leading: bool) -> str:
    if gap.questions == 0:
        # A leading or trailing * adds nothing to a substring search; an inner one is ".*".
        return ".*" if gap.star and not leading else ""
    count = f".{{{gap.questions},}}" if gap.star else f".{{{gap.questions}}}"
    return count


def choose_anchor(phrases: tuple[str, ...]) -> str:
    """The most selective phrase: the longest, ties broken towards rarer characters."""

    def selectivity(phrase: str) -> tuple[int, int]:
        rarity = sum(_COMMON.find(ch) if ch in _COMMON else len(_COMMON) for ch in phrase)
        return len(phrase), rarity

    return max(phrases, key=selectivity)


def parse(source: str, min_anchor: int = limits.MIN_PATTERN_ANCHOR_CHARS) -> Pattern:
    """Parse and validate a pattern; raises :class:`InvalidPattern` naming the problem."""
    if not source:
        raise InvalidPattern("pattern is empty")
    if len(source) > limits.MAX_PATTERN_CHARS:
        raise InvalidPattern(
            f"pattern has {len(source)} characters; the limit is {limits.MAX_PATTERN_CHARS}"
        )
    phrases: list[str] = []
    gaps: list[Gap] = []
    literal: list[str] = []
    questions, star = 0, False
    chars = iter(enumerate(source))
    for position, ch in chars:
        if ch == "\\":
            escaped = next(chars, None)
            if escaped is None:
                raise InvalidPattern("pattern ends with a lone backslash; write \\\\ for one")
            if escaped[1] not in "?*\\":
                raise InvalidPattern(
                    f"unknown escape \\{escaped[1]} at position {position}: "
                    "only \\?, \\* and \\\\ are escapes"
                )
            ch = escaped[1]
        elif ch in "?*":
            if literal:
                phrases.append("".join(literal))
                gaps.append(Gap(questions, star))
                literal, questions, star = [], 0, False
            if ch == "?":
                questions += 1
            else:
                star = True
            continue
        literal.append(ch)
    if literal:
        phrases.append("".join(literal))
        gaps.append(Gap(questions, star))
        questions, star = 0, False
    gaps.append(Gap(questions, star))
    normalised = tuple(normalise(p) for p in phrases)
    if not normalised:
        raise InvalidPattern("pattern has no literal characters, only wildcards")
    longest = max(len(p) for p in normalised)
    if longest < min_anchor:
        raise InvalidPattern(
            f"pattern's longest literal run has {longest} characters; at least {min_anchor} are "
            "needed so that it can be routed selectively"
        )
    if len(normalised) > limits.MAX_PATTERN_PHRASES:
        raise InvalidPattern(
            f"pattern has {len(normalised)} literal runs; the limit is {limits.MAX_PATTERN_PHRASES}"
        )
    return Pattern(source, normalised, tuple(gaps))
