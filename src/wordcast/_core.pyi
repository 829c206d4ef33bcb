"""Type stubs of the compiled core (``rust/``), built into ``wordcast._core`` by maturin."""

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Self, final

__all__ = [
    "Analyser",
    "BatchShapeError",
    "ChosenMatches",
    "CompactTrie",
    "CoreError",
    "Deliveries",
    "DeliveryColumns",
    "LanguageDetector",
    "MessageShape",
    "ModelError",
    "PatternError",
    "Patterns",
    "PlacementError",
    "PlanningView",
    "QueryNote",
    "Readings",
    "SubscriptionError",
    "TextReading",
    "WildcardTerms",
]

class CoreError(ValueError):
    """What the compiled core refuses: bad input (a ValueError)."""

class SubscriptionError(CoreError):
    """A subscription the core cannot hold: an id too large, no term."""

class BatchShapeError(CoreError):
    """Lists that go together of different lengths, or bytes that are not UTF-8."""

class PlacementError(CoreError):
    """No matcher to place on, or one no list knows."""

class PatternError(CoreError):
    """A wildcard pattern whose pieces do not fit together."""

class ModelError(CoreError):
    """A language model file that is not one the core reads."""

@final
class Analyser:
    """The analyser of :mod:`wordcast.query.analysis`, compiled: the same terms for every text."""

    def __new__(
        cls,
        stem_words: Callable[[list[str]], list[str]],
        fallback: Callable[[str], frozenset[str]],
    ) -> Self: ...
    def terms(self, text: str) -> frozenset[str]: ...
    def terms_many(self, texts: Iterable[str]) -> list[frozenset[str]]:
        """``terms`` of each text, the GIL released while they are read."""
    def term_tuples(self, texts: Iterable[str]) -> list[tuple[str, ...]]:
        """The terms of each text as a tuple (each once, in no particular order)."""
    def term_tuples_and_tokens(
        self, texts: Iterable[str], keep: Sequence[bool]
    ) -> tuple[list[tuple[str, ...]], list[list[str] | None]]:
        """``term_tuples``, and the normalised tokens of each text ``keep`` flags, read in the
        same pass (None for the others, and for a text the reference reads)."""
    @property
    def texts_read(self) -> int:
        """How many texts it has read for their offsets and positions (``readings_many``, and
        ``Deliveries.write``'s readings)."""
    def readings_many(self, texts: Iterable[str]) -> list[TextReading | None]:
        """Each text read once; None for a text holding a code point the tables cannot vouch
        for."""
    def __len__(self) -> int: ...

@final
class CompactTrie:
    """The compact trie (web-syndication thesis §3.2.2) over interned terms."""

    def __new__(cls, order: Mapping[str, int] | None = None) -> Self: ...
    def __len__(self) -> int: ...
    def add(self, sub_id: int, terms: Iterable[str]) -> None: ...
    def add_many(self, sub_ids: Sequence[int], terms: Iterable[Iterable[str]]) -> None: ...
    def remove(self, sub_id: int, terms: Iterable[str]) -> bool: ...
    def match(self, terms: Iterable[str]) -> list[int]: ...
    def match_many(self, batch: Iterable[Iterable[str]]) -> list[list[int]]: ...
    def match_many_flat(self, batch: Iterable[Iterable[str]]) -> tuple[memoryview, memoryview]:
        """``match_many`` as two ``memoryview``s of unsigned 32-bit integers (format ``"I"``):
        the ids matched, publication after publication, and where each one's run starts
        (``offsets[k]:offsets[k + 1]``; one more offset than publications). No Python object
        per match; the GIL released while matching."""
    @property
    def node_count(self) -> int: ...
    @property
    def heap_bytes(self) -> int: ...
    def is_compressed(self) -> bool: ...

@final
class QueryNote:
    """QueryNote's matching of a batch (Luwak thesis §5), with the extra terms given per query."""

    def __new__(cls) -> Self: ...
    def __len__(self) -> int: ...
    def add(self, sub_id: int, terms: Sequence[str], extra: int) -> None: ...
    def remove(self, sub_id: int, terms: Iterable[str]) -> bool: ...
    def match_batch(self, docs: Iterable[Iterable[str]]) -> list[tuple[int, int]]: ...
    def operation_costs(
        self, docs: Iterable[Iterable[str]], queries: Sequence[Sequence[str]], repeat: int = 3
    ) -> tuple[float, float, float]: ...

@final
class Patterns:
    """Wildcard patterns: Aho–Corasick keywords and REtriever's recombination."""

    def __new__(cls, rebuild_after: int = 256) -> Self: ...
    def __len__(self) -> int: ...
    def add(
        self, sub_id: int, phrases: Sequence[str], gaps: Sequence[tuple[int, bool]]
    ) -> None: ...
    def remove(self, sub_id: int) -> bool: ...
    def match(self, text: str) -> list[int]: ...
    def match_many(self, texts: Sequence[str]) -> list[list[int]]: ...

@final
class Deliveries:
    """The one writer of a matcher's messages: what writing a match of each compact trie number
    needs, and the messages of a batch, of every kind of match
    (``wordcast.services.matcher.messages``)."""

    def __new__(cls) -> Self: ...
    def __len__(self) -> int: ...
    def set_many(self, columns: DeliveryColumns) -> None:
        """Say what writing a match of each trie number needs; the columns are taken."""
    def write(
        self,
        numbers: memoryview,
        offsets: memoryview,
        wanted: int,
        ids: Sequence[str],
        texts: Sequence[str],
        shape: MessageShape,
        *,
        analyser: Analyser | None = None,
        left: Sequence[int] | None = None,
        reference: Callable[[list[int]], Mapping[int, _Reading]] | None = None,
        decide: Callable[[list[tuple[int, int]], Readings], ChosenMatches | None] | None = None,
        terms: Sequence[Sequence[str]] | None = None,
    ) -> tuple[
        list[tuple[int, bytes, str, int, tuple[str, ...], tuple[int, ...], tuple[float, ...]]], int
    ]:
        """The messages of a batch, as (group, body, webhook-id, matches, subscription ids, each
        one's matches, each one's incarnation), and how many matches they hold: the trie's
        matches the table decides, and those ``decide`` chooses given the (number, position) of
        the others and the batch's readings. Each text read once: by ``analyser``, or by
        ``reference`` for those ``left`` to it, those the analyser cannot vouch for, and every
        one without ``analyser``. The GIL released while sorting and writing."""

_Reading = tuple[dict[str, bytes], dict[str, list[int]], list[tuple[int, int]]]

@final
class TextReading:
    """One text's compiled reading, each part made when first asked."""

    def parts(self) -> dict[str, bytes]:
        """Each term's JSON member of a ``matched``'s ``terms`` (``b'"term":[[start,end],…]'``,
        in code points), terms in the order they first occur."""
    def positions(self) -> dict[str, list[int]]:
        """Where each term occurs (positions count every normalised token)."""
    def spans(self) -> list[tuple[int, int]]:
        """Each token's [start, end) in code points, by position."""

@final
class Readings:
    """The compiled readings of a batch being written (``Deliveries.write``'s ``decide``)."""

    def __len__(self) -> int: ...
    def reading(self, position: int) -> TextReading | None:
        """Publication ``position``'s compiled reading (read now if the writer did not need
        it); None for a text the reference reads."""

_SpanIn = tuple[
    list[tuple[str, int]], int, str
]  # a phrase or window: (terms at offsets, near, name)
# A condition: (name, kind, low, high, low included, high included, the part contained).
_ConditionIn = tuple[str, str, str, str, bool, bool, str]
# What a rule asks of the terms: (filter terms, excluded terms, conditions, excluded ones).
_TermRuleIn = tuple[list[str], list[str], list[_ConditionIn], list[_ConditionIn]]
# A rule: (spans, not_spans, the start of its matched, what it asks of the terms, the rest of
# its matched after its terms).
_RuleIn = tuple[list[_SpanIn], list[_SpanIn], bytes, _TermRuleIn, bytes]

@final
class DeliveryColumns:
    """What writing a match of each trie number needs, by columns (``Deliveries.set_many``)."""

    def __new__(
        cls,
        *,
        numbers: Sequence[int],
        ids: Sequence[str],
        terms: Sequence[Sequence[str]],
        groups: Sequence[tuple[int | None, int | None]],
        audiences: Sequence[int],
        plain: Sequence[bool],
        spans: Sequence[_RuleIn | None] | None = None,
        tags: Sequence[str] | None = None,
        delivered_ids: Sequence[str] | None = None,
        incarnations: Sequence[float] | None = None,
    ) -> Self: ...
    def __len__(self) -> int: ...

@final
class ChosenMatches:
    """The matches ``Deliveries.write``'s ``decide`` chooses, by columns."""

    def __new__(
        cls,
        *,
        ids: Sequence[str],
        delivered_ids: Sequence[str],
        tags: Sequence[str],
        groups: Sequence[tuple[int | None, int | None]],
        positions: Sequence[int],
        matched: Sequence[bytes],
        written: Sequence[tuple[str, str]] | None = None,
        incarnations: Sequence[float] | None = None,
    ) -> Self: ...
    def __len__(self) -> int: ...

@final
class MessageShape:
    """A batch's payload version, publisher and stream, and its messages' bounds
    (``Deliveries.write``)."""

    def __new__(
        cls,
        *,
        version: int,
        publisher: str,
        stream: str,
        most: int,
        max_bytes: int,
        most_subscriptions: int,
        explain: bool,
        backfill: bool = False,
    ) -> Self: ...

@final
class PlanningView:
    """LASP's view of the word maps while a batch is placed (``wordcast.routing.placement``'s
    ``PlanningView`` with ``wordcast.routing.lasp.place_among``, compiled)."""

    def __new__(
        cls,
        sizes: Sequence[int],
        held: Mapping[int, Sequence[str]],
        slope: float,
        intercept: float,
    ) -> Self: ...
    @property
    def sizes(self) -> list[int]: ...
    def known(self, terms: Sequence[str], matchers: Sequence[int]) -> dict[int, int]: ...
    def hold(self, terms: Sequence[str], matchers: Sequence[int]) -> None: ...
    def place(self, terms: Sequence[str], eligible: Sequence[int]) -> int: ...

@final
class LanguageDetector:
    """fastText's language identification (a ``lid.176`` model file), run in the core."""

    def __new__(cls, path: str | os.PathLike[str]) -> Self: ...
    @property
    def labels(self) -> list[str]: ...
    def detect_many(self, texts: Sequence[str], default: str) -> list[str]:
        """Each text's language as fastText's ``predict(text, k=1)`` names it, or ``default``;
        the GIL is released meanwhile."""

@final
class WildcardTerms:
    """The wildcard words a router or a matcher holds (``wordcast.query.wildcards``)."""

    def __new__(cls, terms: Sequence[str] = ...) -> Self: ...
    def add(self, term: str) -> None:
        """Hold ``term`` (once more: each holder counted)."""
    def discard(self, term: str) -> None:
        """Let one holder of ``term`` go."""
    def __len__(self) -> int: ...
    def __contains__(self, key: str, /) -> bool: ...
    def found(self, tokens: Sequence[str]) -> list[str]:
        """The terms held that some token instantiates, each once, sorted."""
    def found_in_texts(self, texts: Sequence[str]) -> list[list[str] | None]:
        """``found`` of each text's normalised tokens; None for a text holding a code point the
        analyser's tables cannot vouch for (the caller tokenises it with the reference)."""
