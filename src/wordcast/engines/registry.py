"""The engines a setting can name (``WORDCAST_MATCHER_ENGINE``, ``…_PATTERN_ENGINE``), and making one.

``rust-…`` and ``rust`` are the compiled engines (:mod:`.compiled`), the services' defaults; the
others are the Python references they are tested against."""

from __future__ import annotations

from collections.abc import Callable

from wordcast.engines.ac_retriever import AhoCorasickREtriever
from wordcast.engines.base import PatternIndex, TermIndex
from wordcast.engines.compact_trie import CompactTrie
from wordcast.engines.compiled import CompiledCompactTrie, CompiledPatterns, CompiledQueryNote
from wordcast.engines.naive_patterns import NaivePatterns
from wordcast.engines.nfa import NFAMatcher
from wordcast.engines.querynote import QueryNoteIndex
from wordcast.engines.retriever import REtriever, Split
from wordcast.engines.termstats import TermOrder, TermStats
from wordcast.engines.trie import Trie

TERM_ENGINES: dict[str, Callable[[TermStats | None], TermIndex]] = {
    "compiled-compact-trie": lambda stats: CompiledCompactTrie(
        TermOrder("rare-first", stats) if stats else None
    ),
    "compiled-querynote": lambda stats: CompiledQueryNote(stats or TermStats(0, {})),
    "trie": lambda stats: Trie(),
    "compact-trie": lambda stats: CompactTrie(
        TermOrder("rare-first", stats) if stats else TermOrder()
    ),
    "querynote": lambda stats: QueryNoteIndex(stats or TermStats(0, {})),
}
PATTERN_ENGINES = ("compiled", "retriever", "aho-corasick", "nfa", "naive")
# Engine names before issue 52 ("rust-…" beside "compiled-…"), still taken by the settings.
RETIRED_ENGINE_NAMES = {
    "rust-compact-trie": "compiled-compact-trie",
    "rust-querynote": "compiled-querynote",
    "rust": "compiled",
}


def term_index(name: str, stats: TermStats | None = None) -> TermIndex:
    """A fresh, empty term index of the kind ``name``."""
    try:
        return TERM_ENGINES[name](stats)
    except KeyError:
        raise ValueError(f"unknown engine {name!r}: one of {', '.join(TERM_ENGINES)}") from None


def pattern_index(
    name: str, split: Split = "none", min_word_len: int = 2, min_split_score: int = 2
) -> PatternIndex:
    """A fresh, empty pattern index of the kind ``name`` (the split settings are REtriever's)."""
    if name == "compiled":
        return CompiledPatterns()
    if name == "retriever":
        return REtriever(split, min_word_len, min_split_score)
    if name == "aho-corasick":
        return AhoCorasickREtriever()
    if name == "nfa":
        return NFAMatcher()
    if name == "naive":
        return NaivePatterns()
    raise ValueError(f"unknown pattern engine {name!r}: one of {', '.join(PATTERN_ENGINES)}")
