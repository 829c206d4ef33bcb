"""QueryNote presearch for matching a batch of documents at once (Luwak thesis §3.3 and §5).

Luwak's workflow, which every mode here follows:

1. each query's terms are sorted by decreasing weight ``w(t) = log(n/df(t)) + 1`` (§5.1); the first,
   rarest term is the query's *representative term* and keys an inverted index of queries;
2. a batch of documents becomes an inverted map term -> document positions; the candidates are the
   queries whose representative term occurs in the batch (the first filtering layer);
3. candidates are evaluated against the batch.

QueryNote (§4, §5.4) stores with each query some *extra terms* and adds a second filtering layer: the
roaring bitmaps (pyroaring) of the representative and extra terms are ANDed; an empty result drops
the query, and when every term is indexed the result *is* the set of matching documents
(``outputMatches``). Otherwise the query goes to the full check (``matchQuery``): a Lucene-style
conjunction that leapfrogs over the sorted posting lists of the batch with ``advance`` (§3.3).

How many extra terms to store is decided per query by ``decideNumTermsCollect``/``findMaximumGain``
(§5.5) from the partial query probabilities, using the pruned co-occurrence pairs where they exist,
with the rule for common queries (§5.5.1) and the greedy batch-size threshold (§5.5.2). The timing
constants of the cost function are measured on this machine (:meth:`CostModel.measure`).

Duplicate queries are one entry with several members, so they are evaluated once per batch (§5.3).

Modes: ``querynote`` (the above), ``luwak`` (no extra terms: every candidate is fully checked) and
``fully-indexed`` (every term in the QueryNote: no full checks at all), the thesis' baselines.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from pyroaring import BitMap

from wordcast.engines.termstats import TermStats

SubId = TypeVar("SubId", bound=Hashable)
MODES = ("querynote", "luwak", "fully-indexed")


@dataclass(frozen=True)
class CostModel:
    """The constants of the thesis' cost function, in seconds, for one batch size."""

    time_check: float  # full check (matchQuery) of one candidate against a batch
    time_and: float  # one AND of two document bitmaps
    time_avoid: float  # outputMatches of a bitmap
    batch_size: int

    @classmethod
    def default(cls, batch_size: int = 600) -> CostModel:
        """Rough figures for a 2020s CPU running this module; use :meth:`measure` for real ones."""
        return cls(time_check=8e-6, time_and=4e-7, time_avoid=1e-6, batch_size=batch_size)

    @classmethod
    def measure(
        cls, batch: Sequence[Iterable[str]], queries: Sequence[Sequence[str]], repeat: int = 3
    ) -> CostModel:
        """Time the three operations on a real batch and real (weight-sorted) queries."""
        postings = _postings(batch)
        # Time the operations on real candidates: queries whose representative term is in the batch.
        usable = [q for q in queries if len(q) > 1 and q[0] in postings][:500]
        usable = usable or [list(postings)[:2]]
        empty = BitMap()
        bitmaps = {t: BitMap(p) for t, p in postings.items()}

        def best(run: object) -> float:
            timings = []
            for _ in range(repeat):
                started = time.perf_counter()
                run()  # type: ignore[operator]
                timings.append(time.perf_counter() - started)
            return min(timings) / len(usable)

        def checks() -> None:
            for q in usable:
                _leapfrog([postings.get(t, []) for t in q])

        def ands() -> None:
            for q in usable:
                _ = bitmaps[q[0]] & bitmaps.get(q[1], empty)

        def outputs() -> None:
            for q in usable:
                _ = [(q, doc) for doc in bitmaps[q[0]]]

        return cls(best(checks), best(ands), best(outputs), len(batch))


class _Query:
    __slots__ = ("extra", "members", "terms")

    def __init__(self, terms: tuple[str, ...], extra: int) -> None:
        self.terms = terms  # by decreasing weight: terms[0] is the representative term
        self.extra = extra  # how many of terms[1:] the QueryNote stores
        self.members: list[Hashable] = []


class QueryNoteIndex(Generic[SubId]):
    def __init__(
        self,
        stats: TermStats,
        mode: str = "querynote",
        costs: CostModel | None = None,
        frequent_top_fraction: float = 0.0067,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose one of {MODES}")
        self.stats = stats
        self.mode = mode
        self.costs = costs or CostModel.default()
        self.frequent_threshold = stats.frequent_threshold(frequent_top_fraction)
        self._queries: dict[tuple[str, ...], _Query] = {}
        self._index: dict[str, dict[tuple[str, ...], _Query]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    @property
    def distinct_queries(self) -> int:
        return len(self._queries)

    @property
    def extra_terms_stored(self) -> int:
        return sum(q.extra for q in self._queries.values())

    # -- changes --------------------------------------------------------------------------------
    def sort_terms(self, terms: Iterable[str]) -> tuple[str, ...]:
        weight = self.stats.weight
        return tuple(sorted(set(terms), key=lambda t: (-weight(t), t)))

    def add(self, sub_id: SubId, terms: Iterable[str]) -> None:
        key = self.sort_terms(terms)
        if not key:
            raise ValueError("a subscription needs at least one term")
        query = self._queries.get(key)
        if query is None:
            query = self._queries[key] = _Query(key, self.decide_extra_terms(key))
            self._index.setdefault(key[0], {})[key] = query
        query.members.append(sub_id)
        self._count += 1

    def remove(self, sub_id: SubId, terms: Iterable[str]) -> bool:
        key = self.sort_terms(terms)
        query = self._queries.get(key)
        if query is None or sub_id not in query.members:
            return False
        query.members.remove(sub_id)
        self._count -= 1
        if not query.members:
            del self._queries[key]
            bucket = self._index[key[0]]
            del bucket[key]
            if not bucket:
                del self._index[key[0]]
        return True

    # -- term collection (§5.5) ------------------------------------------------------------------
    def decide_extra_terms(self, terms: Sequence[str]) -> int:
        size = len(terms)
        if self.mode == "luwak" or size == 1:
            return 0
        if self.mode == "fully-indexed":
            return size - 1
        return self._decide_num_terms_collect(terms)

    def _decide_num_terms_collect(self, terms: Sequence[str]) -> int:
        stats, batch = self.stats, self.costs.batch_size
        size = len(terms)
        partial = 1.0
        probs = [1.0]
        frequent = 0
        doc_threshold = size
        for j in range(1, size):
            # P(t_j | t_j-1) where the pruned matrix knows the pair; independence otherwise.
            pair = stats.pair_prob(terms[j - 1], terms[j])
            if pair > 0:
                partial *= pair
                frequent += 1
            else:
                single = stats.prob(terms[j])
                partial *= single
                if single > self.frequent_threshold:
                    frequent += 1
            probs.append(partial)
            expected_docs = (1.0 - (1.0 - partial) ** batch) * batch
            if expected_docs < 1 and j < doc_threshold:
                doc_threshold = j
        if frequent == size - 1:  # a common query: index it whole (§5.5.1)
            return size - 1
        return self._find_maximum_gain(probs, doc_threshold, size)

    def _find_maximum_gain(self, probs: list[float], doc_threshold: int, size: int) -> int:
        costs = self.costs
        max_gain, index = 0.0, 0
        for j in range(doc_threshold, size):
            if j != size - 1:
                gain = costs.time_check * (1 - probs[j]) - j * costs.time_and
            else:
                gain = costs.time_check - j * costs.time_and - probs[j] * costs.time_avoid
            if gain >= max_gain:
                max_gain, index = gain, j
        return index

    # -- matching -------------------------------------------------------------------------------
    def match_batch(self, docs: Sequence[Iterable[str]]) -> list[tuple[SubId, int]]:
        """Every (subscription id, document position) pair of the batch that matches."""
        postings = _postings(docs)
        bitmaps: dict[str, BitMap] = {}

        def bitmap(term: str) -> BitMap:
            found = bitmaps.get(term)
            if found is None:
                found = bitmaps[term] = BitMap(postings.get(term, ()))
            return found

        out: list[tuple[SubId, int]] = []
        index = self._index
        for rep in postings.keys() & index.keys():  # first layer: PresearcherQuery
            rep_bits = bitmap(rep)
            for query in index[rep].values():
                terms, extra = query.terms, query.extra
                docs_matched: Iterable[int]
                if not extra:
                    docs_matched = (
                        postings[rep]
                        if len(terms) == 1
                        else _leapfrog([postings.get(t, []) for t in terms])
                    )
                elif extra == len(terms) - 1:  # every term indexed: the AND is the answer
                    bits = rep_bits
                    for term in terms[1:]:
                        bits = bits & bitmap(term)
                        if not bits:
                            break
                    docs_matched = bits
                else:  # second layer: AND the QueryNote's terms, then the full check
                    bits = rep_bits
                    for term in terms[1:extra]:
                        bits = bits & bitmap(term)
                        if not bits:
                            break
                    # The last AND only has to say whether anything is left: no bitmap is built.
                    if not bits or not bits.intersect(bitmap(terms[extra])):
                        continue
                    docs_matched = _leapfrog([postings.get(t, []) for t in terms])
                members = query.members
                if len(members) == 1:
                    member = members[0]
                    out.extend((member, doc) for doc in docs_matched)  # type: ignore[misc]
                else:
                    for doc in docs_matched:
                        out.extend((member, doc) for member in members)  # type: ignore[misc]
        return out

    def match(self, terms: Iterable[str]) -> list[SubId]:
        """One document as a batch of one, for the engines' common interface."""
        return [sub_id for sub_id, _ in self.match_batch([terms])]


def _postings(docs: Sequence[Iterable[str]]) -> dict[str, list[int]]:
    """Term -> increasing positions of the documents of the batch containing it."""
    postings: dict[str, list[int]] = {}
    for position, doc in enumerate(docs):
        for term in set(doc):
            found = postings.get(term)
            if found is None:
                postings[term] = [position]
            else:
                found.append(position)
    return postings


def _leapfrog(lists: list[list[int]]) -> list[int]:
    """Lucene's conjunction: the rarest list leads, the others ``advance`` to its document."""
    if not lists or any(not plist for plist in lists):
        return []
    lists = sorted(lists, key=len)
    lead, others = lists[0], lists[1:]
    positions = [0] * len(others)
    found: list[int] = []
    i, n = 0, len(lead)
    while i < n:
        doc = lead[i]
        for k, plist in enumerate(others):
            p = positions[k] = bisect_left(plist, doc, positions[k])
            if p == len(plist):
                return found
            if plist[p] != doc:
                i = bisect_left(lead, plist[p], i + 1)
                break
        else:
            found.append(doc)
            i += 1
    return found
