"""The workload generator of REtriever §4.1 (Tables 4 and 5).

Letters are drawn with English letter frequencies. A subscription is ``num_sub_str`` strings of
``sub_str_len`` letters, ``num_overlap_str`` of them drawn from a shared pool of ``num_overlap``
overlap strings (at the start, the end, or anywhere: ``overlap_pos``), joined by ``num_star`` ``*``
and ``num_question`` ``?`` operators placed in the gaps between the strings (gaps left without an
operator join their strings into one longer phrase). A publication instantiates ``num_match``
subscriptions drawn from the generated ones (``?`` becomes a letter, ``*`` a string of zero to
``sub_str_len`` letters) and concatenates them with extra random strings in between, so every
publication matches at least ``num_match`` subscriptions.

The fixed values of Table 5 are the defaults: 100 publications, one overlap string per 50
subscriptions, 3 matches per publication, strings of 4 letters.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

# Relative frequencies of a–z in English text (per mille).
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_WEIGHTS = [82, 15, 28, 43, 127, 22, 20, 61, 70, 2, 8, 40, 24, 67, 75, 19, 1, 60, 63, 91, 28, 10]
_WEIGHTS += [24, 2, 20, 1]

Letters = Callable[[int], str]


@dataclass(frozen=True)
class PatternWorkload:
    num_subscriptions: int
    num_publications: int = 100
    overlap_ratio: int = 50  # subscriptions per overlap string (Table 5: 1:50)
    num_overlap: int | None = None  # overrides overlap_ratio when given
    num_match: int = 3
    sub_str_len: int = 4
    num_sub_str: int = 3
    num_star: int = 1
    num_question: int = 1
    num_overlap_str: int = 1
    overlap_pos: Literal["general", "prefix", "suffix"] = "general"
    seed: int = 0

    def generate(self) -> tuple[list[str], list[str]]:
        """(patterns, publications)."""
        rng = random.Random(self.seed)

        def string(length: int) -> str:
            return "".join(rng.choices(_LETTERS, _WEIGHTS, k=length))

        pool_size = self.num_overlap or max(1, self.num_subscriptions // self.overlap_ratio)
        pool = [string(self.sub_str_len) for _ in range(pool_size)]
        patterns = [self._subscription(rng, string, pool) for _ in range(self.num_subscriptions)]
        publications = []
        for _ in range(self.num_publications):
            parts = [string(rng.randint(self.sub_str_len, 2 * self.sub_str_len))]
            for pattern in rng.sample(patterns, min(self.num_match, len(patterns))):
                parts.append(self._instantiate(rng, string, pattern))
                parts.append(string(rng.randint(self.sub_str_len, 2 * self.sub_str_len)))
            publications.append("".join(parts))
        return patterns, publications

    def _subscription(self, rng: random.Random, string: Letters, pool: list[str]) -> str:
        strings = [string(self.sub_str_len) for _ in range(self.num_sub_str)]
        overlaps = min(self.num_overlap_str, self.num_sub_str)
        if self.overlap_pos == "prefix":
            slots = list(range(overlaps))
        elif self.overlap_pos == "suffix":
            slots = list(range(self.num_sub_str - overlaps, self.num_sub_str))
        else:
            slots = rng.sample(range(self.num_sub_str), overlaps)
        for slot in slots:
            strings[slot] = rng.choice(pool)
        gaps = [""] * (self.num_sub_str - 1)
        operators = ["*"] * self.num_star + ["?"] * self.num_question
        rng.shuffle(operators)
        if gaps:
            order = rng.sample(range(len(gaps)), len(gaps))
            for k, operator in enumerate(operators):
                gaps[order[k % len(gaps)]] += operator
        out = [strings[0]]
        for gap, text in zip(gaps, strings[1:], strict=True):
            out.append("".join(sorted(gap)))  # "*?" and "?*" mean the same; keep one spelling
            out.append(text)
        return "".join(out)

    def _instantiate(self, rng: random.Random, string: Letters, pattern: str) -> str:
        out = []
        for ch in pattern:
            if ch == "?":
                out.append(string(1))
            elif ch == "*":
                out.append(string(rng.randint(0, self.sub_str_len)))
            else:
                out.append(ch)
        return "".join(out)
