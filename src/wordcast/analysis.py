"""The one text analyser every component uses (ARCHITECTURE.md, invariant 3).

S³-TM §6.1 pre-processes posts and subscriptions with stop word removal and Porter stemming; we do the
same, after Unicode normalisation, so that ``Running`` in a subscription matches ``runs`` in a post.

Pipeline, in order:

1. NFKC normalisation, so compatibility forms (ligatures, full-width letters) become plain letters;
2. case folding (``str.casefold``), which is stronger than ``lower`` (``Straße`` -> ``strasse``);
3. tokenising into maximal runs of Unicode letters, combining marks and digits: punctuation, symbols,
   emoji and white space separate tokens and are never part of one (so a URL yields its words);
4. dropping English stop words, tokens of one character and tokens longer than ``MAX_TOKEN_CHARS``;
5. Porter stemming (PyStemmer's ``porter`` algorithm, the original one the seed uses).

The result is a set of terms. Terms never contain white space, which the storage layer relies on.
"""

from __future__ import annotations

import unicodedata

import regex
import Stemmer

MAX_TOKEN_CHARS = 64

# Snowball's English stop word list, plus the contraction fragments tokenising leaves behind.
STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before being
    below between both but by can cannot could couldn did didn do does doesn doing don down during each
    few for from further had hadn has hasn have haven having he her here hers herself him himself his
    how i if in into is isn it its itself let ll me more most mustn my myself no nor not of off on once
    only or other ought our ours ourselves out over own re same shan she should shouldn so some such
    than that the their theirs them themselves then there these they this those through to too under
    until up ve very was wasn we were weren what when where which while who whom why will with won
    would wouldn you your yours yourself yourselves
    """.split()  # noqa: SIM905 - a word list reads better as text
)

STEM_CACHE_WORDS = 100_000
_TOKEN = regex.compile(r"[\p{L}\p{M}\p{N}]+")


class Analyzer:
    """Turns text into its set of analysed terms.

    Instances are cheap to share; PyStemmer caches stems internally, which matters on the router's
    hot path where the same few thousand words recur in every batch.
    """

    __slots__ = ("_stem_words",)

    def __init__(self) -> None:
        # PyStemmer's default cache (10,000 words) is smaller than a day's vocabulary: pypi
        # summaries bring 41,000 distinct words in 50,000 posts; the misses made stemming 1.5× slower.
        self._stem_words = Stemmer.Stemmer("porter", STEM_CACHE_WORDS).stemWords

    def tokens(self, text: str) -> list[str]:
        """Normalised tokens of ``text`` that survive stop word and length filtering, unstemmed."""
        folded = unicodedata.normalize("NFKC", text).casefold()
        return [
            token
            for token in _TOKEN.findall(folded)
            if 1 < len(token) <= MAX_TOKEN_CHARS and token not in STOP_WORDS
        ]

    def terms(self, text: str) -> frozenset[str]:
        """The set of analysed terms of ``text``; empty when nothing meaningful is left."""
        return frozenset(self._stem_words(self.tokens(text)))


_default: Analyzer | None = None


def default_analyzer() -> Analyzer:
    """The process-wide analyser, created on first use."""
    global _default
    if _default is None:
        _default = Analyzer()
    return _default


def analyze(text: str) -> frozenset[str]:
    """Shorthand for ``default_analyzer().terms(text)``."""
    return default_analyzer().terms(text)
