"""Term statistics of a document collection, and the term orders built from them.

Document frequencies drive three things: the term orders the web-syndication thesis compares for the
trie (§2.3.4: lexicographic, most-frequent-first, rarest-first), the QueryNote term weights
``w(t) = log(n / df(t)) + 1`` (Luwak thesis Eq. 1), and with the pruned co-occurrence pairs the
partial query probabilities of QueryNote's term collection (§5.5, §6.2).

The statistics are computed at scale by the PySpark job ``spark_jobs/term_stats.py``; this module
holds the pure in-memory form, a pure-Python builder for small inputs and tests, and the file format
(one JSON document) both write.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any


@dataclass
class TermStats:
    documents: int
    df: dict[str, int]
    pair_df: dict[tuple[str, str], int] = field(default_factory=dict)

    @classmethod
    def from_documents(cls, docs: Iterable[Iterable[str]], min_pair_df: int = 0) -> TermStats:
        """Count df and, when ``min_pair_df`` > 0, the pairs co-occurring at least that often."""
        df: Counter[str] = Counter()
        pairs: Counter[tuple[str, str]] = Counter()
        n = 0
        for doc in docs:
            terms = sorted(set(doc))
            n += 1
            df.update(terms)
            if min_pair_df > 0:
                pairs.update(combinations(terms, 2))
        kept = {pair: c for pair, c in pairs.items() if c >= min_pair_df} if min_pair_df else {}
        return cls(n, dict(df), kept)

    # -- probabilities and weights -----------------------------------------------------------------
    def prob(self, term: str) -> float:
        """Prob(t) = df(t) / n (Luwak thesis Eq. 2); an unseen term counts as seen once."""
        return max(self.df.get(term, 0), 1) / max(self.documents, 1)

    def weight(self, term: str) -> float:
        """w(t) = log(n / df(t)) + 1 (Luwak thesis Eq. 1): rarer terms weigh more."""
        return math.log(max(self.documents, 1) / max(self.df.get(term, 0), 1)) + 1.0

    def pair_prob(self, first: str, then: str) -> float:
        """P(then | first) from the pruned co-occurrence pairs, 0 when the pair was pruned."""
        pair = (first, then) if first <= then else (then, first)
        together = self.pair_df.get(pair, 0)
        return together / self.df[first] if together and self.df.get(first) else 0.0

    def frequent_threshold(self, top_fraction: float = 0.0067) -> float:
        """The probability above which a term is among the top ``top_fraction`` of terms (§6.3)."""
        if not self.df:
            return 1.0
        ranked = sorted(self.df.values(), reverse=True)
        cut = ranked[max(0, math.ceil(len(ranked) * top_fraction) - 1)]
        return cut / max(self.documents, 1)

    # -- file format ---------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "documents": self.documents,
            "df": self.df,
            "pairs": [[a, b, c] for (a, b), c in self.pair_df.items()],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TermStats:
        pairs = {(str(a), str(b)): int(c) for a, b, c in data.get("pairs", [])}
        return cls(int(data["documents"]), {str(k): int(v) for k, v in data["df"].items()}, pairs)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json()))

    @classmethod
    def load(cls, path: Path) -> TermStats:
        return cls.from_json(json.loads(path.read_text()))


class TermOrder:
    """A total order on terms, as ranks (smaller first), extended to unseen terms on arrival.

    ``lexicographic``, ``frequent-first`` (most frequent first) and ``rare-first`` (rarest first by
    document frequency) are the orders of the web-syndication thesis §2.3.4. Terms the statistics
    have never seen are ranked after every known term, in order of first appearance: still a total
    order, which is all a trie needs to be correct.
    """

    KINDS = ("lexicographic", "frequent-first", "rare-first")

    def __init__(self, kind: str = "lexicographic", stats: TermStats | None = None) -> None:
        if kind not in self.KINDS:
            raise ValueError(f"unknown term order {kind!r}; choose one of {self.KINDS}")
        self.kind = kind
        df = stats.df if stats else {}
        if kind == "lexicographic":
            known = sorted(df)
        elif kind == "frequent-first":
            known = sorted(df, key=lambda t: (-df[t], t))
        else:
            known = sorted(df, key=lambda t: (df[t], t))
        self.rank: dict[str, int] = {term: i for i, term in enumerate(known)}

    def __len__(self) -> int:
        return len(self.rank)

    def intern(self, term: str) -> int:
        """The rank of ``term``, giving it the next free rank if it is new."""
        rank = self.rank.get(term)
        if rank is None:
            rank = self.rank[term] = len(self.rank)
        return rank

    def sort(self, terms: Iterable[str]) -> list[str]:
        ranks = self.rank
        return sorted(set(terms), key=lambda t: ranks.get(t, len(ranks)))
