"""Naive baseline for wildcard patterns (REtriever §4.2): one regular expression per pattern.

Every publication is searched with every pattern's compiled expression; nothing is shared. It is
the yardstick the paper drops from its plots once it stops scaling, and the simplest correct engine.
"""

from __future__ import annotations

import re
from collections.abc import Hashable

from wordcast.query.patterns import Pattern


class NaivePatterns:
    def __init__(self) -> None:
        self._subs: dict[Hashable, re.Pattern[str]] = {}

    def __len__(self) -> int:
        return len(self._subs)

    def add(self, sub_id: Hashable, pattern: Pattern) -> None:
        if sub_id in self._subs:
            raise ValueError(f"pattern subscription {sub_id!r} is already indexed")
        self._subs[sub_id] = re.compile(pattern.regex(), re.DOTALL)

    def remove(self, sub_id: Hashable) -> bool:
        return self._subs.pop(sub_id, None) is not None

    def match(self, text: str) -> set[Hashable]:
        """The ids of the patterns ``text`` (already normalised) matches."""
        return {sub_id for sub_id, regex in self._subs.items() if regex.search(text)}
