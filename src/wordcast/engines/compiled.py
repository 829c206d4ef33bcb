"""The compiled engines of ``wordcast._core`` behind the :class:`~wordcast.engines.base.TermIndex`
and :class:`~wordcast.engines.base.PatternIndex` protocols.

The compiled classes index small integers; a matcher's subscriptions are named by strings. Each
adapter here numbers the names it is given (reusing a number once its name is gone) and turns the
numbers of a match back into names. The Python engines beside them stay the seed-faithful
references and the oracles of the differential tests (``tests/unit/test_compiled.py``).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

from wordcast import _core
from wordcast.engines.querynote import QueryNoteIndex
from wordcast.engines.termstats import TermOrder, TermStats
from wordcast.query.patterns import Pattern


class _Numbers:
    """Names <-> small integers, each number reused once its name has left."""

    __slots__ = ("free", "held", "names", "numbers")

    def __init__(self) -> None:
        self.numbers: dict[Hashable, int] = {}
        self.names: list[Hashable] = []
        self.held: list[int] = []  # how many entries each number stands for
        self.free: list[int] = []

    def take(self, name: Hashable) -> int:
        number = self.numbers.get(name)
        if number is None:
            number = self.free.pop() if self.free else len(self.names)
            if number == len(self.names):
                self.names.append(name)
                self.held.append(0)
            else:
                self.names[number] = name
            self.numbers[name] = number
        self.held[number] += 1
        return number

    def take_many(self, names: Sequence[Hashable]) -> list[int]:
        """``take`` for each: in one step when none of them is held, all are distinct and no
        number is free to reuse (a snapshot loaded into a fresh index)."""
        numbers = self.numbers
        if self.free or len(set(names)) != len(names) or any(n in numbers for n in names):
            return [self.take(name) for name in names]
        first = len(self.names)
        self.names += names
        self.held += [1] * len(names)
        numbers.update(zip(names, range(first, first + len(names)), strict=True))
        return list(range(first, first + len(names)))

    def give_back(self, name: Hashable) -> None:
        number = self.numbers[name]
        self.held[number] -= 1
        if not self.held[number]:
            del self.numbers[name]
            self.names[number] = None
            self.free.append(number)


class CompiledCompactTrie:
    """``wordcast._core.CompactTrie`` under string ids: the matcher's default term index."""

    def __init__(self, order: TermOrder | None = None) -> None:
        ranks = order.rank if order is not None and order.kind != "lexicographic" else None
        self._core = _core.CompactTrie(ranks)
        self._ids = _Numbers()

    def __len__(self) -> int:
        return len(self._core)

    @property
    def node_count(self) -> int:
        return self._core.node_count

    def add(self, sub_id: str, terms: Iterable[str]) -> None:
        terms = list(terms)
        if not terms:
            raise ValueError("a subscription needs at least one term")
        self._core.add(self._ids.take(sub_id), terms)

    def add_many(self, sub_ids: Sequence[str], terms: Sequence[Iterable[str]]) -> None:
        """``add`` for each, the indexing done in one compiled call (the GIL released)."""
        if len(terms) != len(sub_ids):
            raise ValueError("as many subscription ids as term lists, please")
        if not all(terms):
            raise ValueError("a subscription needs at least one term")
        self._core.add_many(self._ids.take_many(sub_ids), terms)

    def remove(self, sub_id: str, terms: Iterable[str]) -> bool:
        number = self._ids.numbers.get(sub_id)
        if number is None or not self._core.remove(number, list(terms)):
            return False
        self._ids.give_back(sub_id)
        return True

    def match(self, terms: Iterable[str]) -> list[str]:
        names = self._ids.names
        return [names[i] for i in self._core.match(terms)]  # type: ignore[misc]

    def match_batch(self, batch: Sequence[Iterable[str]]) -> list[tuple[str, int]]:
        names = self._ids.names
        return [
            (names[i], k)  # type: ignore[misc]
            for k, found in enumerate(self._core.match_many(batch))
            for i in found
        ]

    def match_flat(self, batch: Sequence[Iterable[str]]) -> tuple[memoryview, memoryview]:
        """The numbers matched, publication after publication, and where each publication's
        run starts (``CompactTrie.match_many_flat``): no Python object per match. A number
        names a subscription through :meth:`name_of`."""
        return self._core.match_many_flat(batch)

    def number_of(self, sub_id: str) -> int | None:
        """The number ``sub_id`` is indexed under, if it is."""
        return self._ids.numbers.get(sub_id)

    def name_of(self, number: int) -> str:
        return self._ids.names[number]  # type: ignore[return-value]


class CompiledQueryNote:
    """QueryNote with its second layer compiled: the term collection (which terms a query's
    QueryNote stores, §5.5) is decided by the Python reference's cost model, the matching of each
    batch is ``wordcast._core.QueryNote``'s."""

    def __init__(self, stats: TermStats, mode: str = "querynote") -> None:
        self._plan = QueryNoteIndex[str](stats, mode)  # decides; holds nothing
        self._core = _core.QueryNote()
        self._ids = _Numbers()

    def __len__(self) -> int:
        return len(self._core)

    def add(self, sub_id: str, terms: Iterable[str]) -> None:
        key = self._plan.sort_terms(terms)
        if not key:
            raise ValueError("a subscription needs at least one term")
        self._core.add(self._ids.take(sub_id), list(key), self._plan.decide_extra_terms(key))

    def remove(self, sub_id: str, terms: Iterable[str]) -> bool:
        number = self._ids.numbers.get(sub_id)
        key = self._plan.sort_terms(terms)
        if number is None or not self._core.remove(number, list(key)):
            return False
        self._ids.give_back(sub_id)
        return True

    def match_batch(self, batch: Sequence[Iterable[str]]) -> list[tuple[str, int]]:
        names = self._ids.names
        return [(names[i], k) for i, k in self._core.match_batch(batch)]  # type: ignore[misc]

    def match(self, terms: Iterable[str]) -> list[str]:
        return [sub_id for sub_id, _ in self.match_batch([terms])]


class CompiledPatterns:
    """``wordcast._core.Patterns`` (REtriever's recombination over Aho–Corasick) under any id."""

    def __init__(self, rebuild_after: int = 256) -> None:
        self._core = _core.Patterns(rebuild_after)
        self._ids = _Numbers()

    def __len__(self) -> int:
        return len(self._core)

    def add(self, sub_id: Hashable, pattern: Pattern) -> None:
        if sub_id in self._ids.numbers:
            raise ValueError(f"pattern subscription {sub_id!r} is already indexed")
        gaps = [(gap.questions, gap.star) for gap in pattern.gaps]
        self._core.add(self._ids.take(sub_id), list(pattern.phrases), gaps)

    def remove(self, sub_id: Hashable) -> bool:
        number = self._ids.numbers.get(sub_id)
        if number is None or not self._core.remove(number):
            return False
        self._ids.give_back(sub_id)
        return True

    def match(self, text: str) -> set[Hashable]:
        names = self._ids.names
        return {names[i] for i in self._core.match(text)}
