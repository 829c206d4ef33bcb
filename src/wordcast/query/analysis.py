"""The one text analyser every component uses (docs/ARCHITECTURE.md, invariant 3).

S³-TM §6.1 pre-processes posts and subscriptions with stop word removal and Porter stemming; we do the
same, after Unicode normalisation, so that ``Running`` in a subscription matches ``runs`` in a post.

Pipeline, in order:

1. dropping default-ignorable code points (zero-width joiners and non-joiners, soft hyphens,
   variation selectors, the byte order mark): invisible, they must not split a word in two
   (``hou\u200dse`` reads ``house``);
2. tokenising into maximal runs of Unicode letters, combining marks and digits: punctuation, symbols,
   emoji and white space separate tokens and are never part of one (so a URL yields its words);
3. NFKC normalisation of each token, so compatibility forms (ligatures, full-width and
   mathematical letters) become plain letters, then case folding (``str.casefold``, stronger than
   ``lower``: ``Straße`` -> ``strasse``); a token that normalises to several runs (``⑴`` -> ``(1)``)
   is tokenised again. Normalising the tokens rather than the text keeps symbols that decompose
   into letters (``™`` -> ``TM``, ``℠``, ``㎏``) from gluing those letters onto the word before
   them: ``Works™`` reads ``works``, while ``𝐋odash`` still reads ``lodash``;
4. dropping English stop words, tokens of one character and tokens longer than ``MAX_TOKEN_CHARS``;
5. Porter stemming (PyStemmer's ``porter`` algorithm, the original one the seed uses).

The result is a set of terms. Terms never contain white space, which the storage layer relies on.
A text's *entities* join its terms (issue 53, X's operators): each hashtag ``#tag``, mention
``@name``, cashtag ``$tag`` and link ``url:<link>`` it holds, and ``has:hashtags``,
``has:mentions``, ``has:cashtags``, ``has:links`` where it holds one (:func:`entity_terms`). No
word's term starts with ``#``, ``@`` or ``$`` or holds a ``:``, so the two never meet, and the
text's words still match as words (``#Python`` gives ``python`` and ``#python``).
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable, Sequence
from importlib import resources
from typing import Protocol

import regex
import Stemmer

MAX_TOKEN_CHARS = 64

# Snowball's English stop word list, plus the contraction fragments tokenising leaves behind: one
# file, which the compiled analyser reads too (rust/src/analysis.rs, by include_str!).
STOP_WORDS: frozenset[str] = frozenset(
    line.strip()
    for line in resources.files("wordcast.query")
    .joinpath("stop_words.txt")
    .read_text()
    .splitlines()
    if line.strip() and not line.startswith("#")
)

STEM_CACHE_WORDS = 100_000
_TOKEN = regex.compile(r"[\p{L}\p{M}\p{N}]+")
_IGNORABLE = regex.compile(r"\p{Default_Ignorable_Code_Point}+")
# Within ASCII, NFKC changes nothing, casefold is lower, no code point is default-ignorable, and
# the letters, marks and digits of _TOKEN are exactly these: the same tokens at half the cost,
# for the nine posts in ten that are plain ASCII.
_ASCII_TOKEN = re.compile(r"[a-z0-9]+")


def normalised_tokens(text: str) -> list[str]:
    """Steps 1-3 of the pipeline: the normalised, case-folded tokens of ``text``, in order."""
    if text.isascii():
        return _ASCII_TOKEN.findall(text.lower())
    tokens = []
    for token in _TOKEN.findall(_IGNORABLE.sub("", text)):
        if token.isascii():
            tokens.append(token.lower())
        else:
            tokens += _TOKEN.findall(unicodedata.normalize("NFKC", token).casefold())
    return tokens


_RUN_WITH_IGNORABLE = regex.compile(r"[\p{L}\p{M}\p{N}\p{Default_Ignorable_Code_Point}]+")


def token_offsets(text: str) -> list[tuple[str, int, int]]:
    """Each of :func:`normalised_tokens` with the character offsets in ``text`` it was read
    from, for highlighting. A run that normalisation splits in several tokens (``⑴``) gives
    each of them the whole run's offsets."""
    if text.isascii():
        return [(m.group(), m.start(), m.end()) for m in _ASCII_TOKEN.finditer(text.lower())]
    tokens = []
    # Dropping the ignorable code points first joins the runs only they separate: the same runs
    # as these, which keep their places in the text.
    for run in _RUN_WITH_IGNORABLE.finditer(text):
        token = _IGNORABLE.sub("", run.group())
        if not token:
            continue
        start, end = run.span()
        if token.isascii():
            tokens.append((token.lower(), start, end))
        else:
            folded = unicodedata.normalize("NFKC", token).casefold()
            tokens += [(part, start, end) for part in _TOKEN.findall(folded)]
    return tokens


# Entities, found in the text with its default-ignorable code points dropped: a marker after
# anything but a token character, ``_`` or another marker (``&#39;`` is no hashtag), then a
# hashtag's letters, marks, digits and ``_`` (not only digits), a mention's ASCII letters, digits
# and ``_``, a cashtag's ASCII letters (not followed by a token character), or a link: http(s)://
# and the printable ASCII after it, but for ``<>"\``, without its trailing punctuation.
_ENTITY = regex.compile(
    r"(?<![\p{L}\p{M}\p{N}_#@$&])(?:#([\p{L}\p{M}\p{N}_]+)|@([A-Za-z0-9_]+)"
    r"|\$([A-Za-z]+)(?![\p{L}\p{M}\p{N}_])|([hH][tT][tT][pP][sS]?://[\x21\x23-\x3b\x3d\x3f-\x5b\x5d-\x7e]+))"
)
_LINK_TRAILING = ".,;:!?)]}'"
_DIGITS = re.compile(r"[0-9_]+")
ENTITY_FLAGS = {"#": "has:hashtags", "@": "has:mentions", "$": "has:cashtags", "u": "has:links"}


def entity_terms(text: str) -> list[str]:
    """The entity terms of ``text``, each once, sorted: ``#tag`` (its tokens, normalised, joined
    by ``_``), ``@name`` and ``$tag`` (lower case), ``url:<link>`` (lower case), and a ``has:``
    flag for each kind found."""
    if "#" not in text and "@" not in text and "$" not in text and ":" not in text:
        return []
    found: set[str] = set()
    for match in _ENTITY.finditer(_IGNORABLE.sub("", text)):
        tag, name, cash, link = match.groups()
        if tag is not None:
            words = normalised_tokens(tag)
            if words and not _DIGITS.fullmatch(tag):
                found.update(("#" + "_".join(words), ENTITY_FLAGS["#"]))
        elif name is not None:
            found.update(("@" + name.lower(), ENTITY_FLAGS["@"]))
        elif cash is not None:
            found.update(("$" + cash.lower(), ENTITY_FLAGS["$"]))
        else:
            scheme, _, rest = link.partition("://")
            rest = rest.rstrip(_LINK_TRAILING)
            if rest:
                found.update((f"url:{scheme.lower()}://{rest.lower()}", ENTITY_FLAGS["u"]))
    return sorted(found)


def is_entity_term(term: str) -> bool:
    """Whether a term is an entity's (or a filter's), not a word's."""
    return term[:1] in "#@$" or ":" in term


class Analyser:
    """Turns text into its set of analysed terms.

    Instances are cheap to share. Each keeps what it made of every token it has seen (the
    term, or nothing for a stop word or a token of the wrong length), as the router's hot path
    meets the same few thousand words in every batch: one dictionary lookup a token instead of
    the filters and a call into the stemmer.
    """

    __slots__ = ("_mark", "_stem_words", "_stop", "_term_of")

    def __init__(
        self, algorithm: str = "porter", stop_words: frozenset[str] = STOP_WORDS, mark: str = ""
    ) -> None:
        """English by default; another Snowball ``algorithm`` with its ``stop_words`` analyses
        another language (:mod:`.languages`), each term followed by ``mark``."""
        self._stem_words = Stemmer.Stemmer(algorithm).stemWords
        self._stop = stop_words
        self._mark = mark
        self._term_of: dict[str, str] = {}

    def tokens(self, text: str) -> list[str]:
        """Normalised tokens of ``text`` that survive stop word and length filtering, unstemmed."""
        return [token for token in normalised_tokens(text) if self._kept(token)]

    def terms(self, text: str) -> frozenset[str]:
        """The set of analysed terms of ``text``, with its entities' (in English, the
        analysis every text has); empty when nothing meaningful is left."""
        term_of = self._term_of
        terms = set()
        for token in normalised_tokens(text):
            term = term_of.get(token)
            if term is None:
                term = self._term(token)
            if term:
                terms.add(term)
        if not self._mark:
            terms.update(entity_terms(text))
        return frozenset(terms)

    def terms_many(self, texts: Iterable[str]) -> list[frozenset[str]]:
        """``terms`` of each text."""
        return [self.terms(text) for text in texts]

    def term_tuples(self, texts: Iterable[str]) -> list[tuple[str, ...]]:
        """The terms of each text as a tuple (each once): what the routers' hot path reads."""
        return [tuple(self.terms(text)) for text in texts]

    def term_tuples_and_tokens(
        self, texts: Sequence[str], keep: Sequence[bool]
    ) -> tuple[list[tuple[str, ...]], list[list[str] | None]]:
        """``term_tuples``, and the normalised tokens of each text ``keep`` flags, read once."""
        terms: list[tuple[str, ...]] = []
        tokens: list[list[str] | None] = []
        term_of = self.term_of
        for text, keeping in zip(texts, keep, strict=True):
            read = normalised_tokens(text)
            found = {term for term in map(term_of, read) if term}
            if not self._mark:
                found.update(entity_terms(text))
            terms.append(tuple(found))
            tokens.append(read if keeping else None)
        return terms, tokens

    def term_of(self, token: str) -> str:
        """The term of a normalised token ("" where it is dropped)."""
        term = self._term_of.get(token)
        return self._term(token) if term is None else term

    def _kept(self, token: str) -> bool:
        return 1 < len(token) <= MAX_TOKEN_CHARS and token not in self._stop

    def _term(self, token: str) -> str:
        """The term of a token not seen lately ("" if it is dropped), remembered."""
        term = self._stem_words([token])[0] + self._mark if self._kept(token) else ""
        if len(self._term_of) >= STEM_CACHE_WORDS:
            # A day's vocabulary fits (pypi summaries: 41,000 words in 50,000 posts); past it,
            # starting afresh keeps the memory bounded at the cost of one cold batch.
            self._term_of.clear()
        self._term_of[token] = term
        return term


class TermAnalyser(Protocol):
    """What the services ask of an analyser: this module's reference, or the compiled one."""

    def terms(self, text: str) -> frozenset[str]: ...

    def terms_many(self, texts: Iterable[str]) -> list[frozenset[str]]: ...

    def term_tuples(self, texts: Iterable[str]) -> list[tuple[str, ...]]: ...

    def term_tuples_and_tokens(
        self, texts: Sequence[str], keep: Sequence[bool]
    ) -> tuple[list[tuple[str, ...]], list[list[str] | None]]: ...


def compiled_analyser() -> TermAnalyser:
    """The analyser compiled in ``wordcast._core``: the same terms as :class:`Analyser` for every
    text (its differential tests say so), many times faster. It stems with PyStemmer's own
    ``porter`` (each new word once, remembered), and hands the rare text holding a code point its
    tables cannot vouch for to an :class:`Analyser`."""
    from wordcast import _core

    return _core.Analyser(Stemmer.Stemmer("porter").stemWords, Analyser().terms)


def reference_asked() -> bool:
    """Whether ``WORDCAST_ANALYSER=python`` asks every analysis of this process of the Python
    reference (``WORDCAST_ANALYZER``, its spelling before issue 52, is still read)."""
    asked = os.environ.get("WORDCAST_ANALYSER") or os.environ.get("WORDCAST_ANALYZER")
    return asked == "python"


def new_analyser() -> TermAnalyser:
    """The compiled analyser, or this module's reference when ``WORDCAST_ANALYSER=python``."""
    if reference_asked():
        return Analyser()
    return compiled_analyser()


_default: TermAnalyser | None = None


def default_analyser() -> TermAnalyser:
    """The process-wide analyser (:func:`new_analyser`), created on first use."""
    global _default
    if _default is None:
        _default = new_analyser()
    return _default


def word_terms(analyser: TermAnalyser, text: str) -> frozenset[str]:
    """The terms of the words of ``text``, without its entities': what a query's words require
    (a link written in a query means its words; a hashtag is read by the query's parser)."""
    return frozenset(t for t in analyser.terms(text) if not is_entity_term(t))


def analyse(text: str) -> frozenset[str]:
    """Shorthand for ``default_analyser().terms(text)``."""
    return default_analyser().terms(text)


_positional: Analyser | None = None


def token_terms(text: str) -> list[str]:
    """The term of each normalised token of ``text``, "" where it is dropped: the reference
    analyser's terms, which the compiled one equals, with the places of the tokens dropped."""
    return terms_of_tokens(normalised_tokens(text))


def terms_of_tokens(tokens: Iterable[str]) -> list[str]:
    """The term of each normalised token, "" where it is dropped."""
    global _positional
    if _positional is None:
        _positional = Analyser()
    term_of, make = _positional._term_of, _positional._term
    terms = []
    for token in tokens:
        term = term_of.get(token)
        terms.append(make(token) if term is None else term)
    return terms


def term_positions(text: str) -> dict[str, list[int]]:
    """Where each analysed term of ``text`` occurs, for phrases and proximity
    (:mod:`wordcast.query.spans`): positions count every normalised token, so a stop word or a
    token dropped for its length keeps its place and leaves a gap, as Lucene's position
    increments do."""
    positions: dict[str, list[int]] = {}
    for position, term in enumerate(token_terms(text)):
        if term:
            positions.setdefault(term, []).append(position)
    return positions
