"""Which matchers a publication must reach for its pattern subscriptions: routing by anchors.

Every pattern has an anchor (see :mod:`wordcast.query.patterns`), a literal run that occurs in every
publication the pattern matches. The router knows which matchers hold patterns with each anchor and
sends a publication only to the owners of the anchors that occur in its normalised text, just as
Eq. 3.1 of S³-TM sends it only to the matchers of its subscribed words.

The anchors are found with one pass of an Aho–Corasick automaton (pyahocorasick). Anchors added
since the automaton was built are searched for directly until there are enough to rebuild, so adding
an anchor is immediate and cheap; anchors removed are ignored until the next rebuild drops them.
"""

from __future__ import annotations

import ahocorasick


class AnchorIndex:
    def __init__(self, rebuild_after: int = 128) -> None:
        self._rebuild_after = rebuild_after
        self._owners: dict[str, set[int]] = {}
        self._pending: set[str] = set()
        self._automaton: ahocorasick.Automaton | None = None
        self._built_size = 0

    def __len__(self) -> int:
        return len(self._owners)

    def owners(self, anchor: str) -> frozenset[int]:
        return frozenset(self._owners.get(anchor, ()))

    def add(self, anchor: str, matcher: int) -> None:
        owners = self._owners.get(anchor)
        if owners is None:
            owners = self._owners[anchor] = set()
            self._pending.add(anchor)
        owners.add(matcher)

    def discard(self, anchor: str, matcher: int) -> None:
        owners = self._owners.get(anchor)
        if owners is None:
            return
        owners.discard(matcher)
        if not owners:
            del self._owners[anchor]
            self._pending.discard(anchor)

    def clear(self) -> None:
        self._owners.clear()
        self._pending.clear()
        self._automaton = None
        self._built_size = 0

    def _rebuild(self) -> None:
        automaton = ahocorasick.Automaton()
        for anchor in self._owners:
            automaton.add_word(anchor, anchor)
        if self._owners:
            automaton.make_automaton()
        self._automaton = automaton if self._owners else None
        self._built_size = len(self._owners)
        self._pending.clear()

    def targets(self, text: str, matchers: int | None = None) -> set[int]:
        """The matchers owning an anchor that occurs in ``text`` (already normalised).

        With ``matchers``, only owners below that ordinal: after a cluster shrinks, the owners of
        a removed matcher are dropped only when its events reach this index, and a batch must not
        go to a matcher that its mapping version does not have.
        """
        if not self._owners:
            return set()
        size = len(self._owners)
        if len(self._pending) > max(self._rebuild_after, size // 100) or (
            self._built_size > 2 * size + self._rebuild_after
        ):
            self._rebuild()
        found: set[int] = set()
        owners = self._owners
        if self._automaton is not None:
            for _, anchor in self._automaton.iter(text):
                owning = owners.get(anchor)
                if owning:
                    found.update(owning)
        for anchor in self._pending:
            if anchor in text:
                found.update(owners[anchor])
        if matchers is not None and found and max(found) >= matchers:
            found = {matcher for matcher in found if matcher < matchers}
        return found
