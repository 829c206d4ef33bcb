"""NFA baseline for wildcard patterns, in the style of YFilter (REtriever §2.3 and §4).

All patterns share one NFA built over their token sequences (literal characters, ``?`` and ``*``),
so patterns with a common prefix share its states, as YFilter shares path prefixes. ``?`` is a
transition on any character; ``*`` is an ε-transition into a state with a self-loop on any
character (YFilter's ``//``). Matching keeps the set of active states: the initial state is active
at every position (substring semantics), and every ``*`` state, once reached, stays active to the
end of the publication. That growing active set is the cost REtriever's keyword matching avoids.
"""

from __future__ import annotations

from collections.abc import Hashable

from wordcast.query.patterns import Pattern

_ANY = "?"  # token of a one-character wildcard; literal characters are their own tokens
_STAR = "*"


class _Node:
    __slots__ = ("accepts", "any", "closure", "count", "literal", "looping", "star")

    def __init__(self, looping: bool = False) -> None:
        self.literal: dict[str, _Node] = {}
        self.any: _Node | None = None
        self.star: _Node | None = None
        self.looping = looping
        self.accepts: set[Hashable] = set()
        self.count = 0  # patterns whose path runs through this node
        self.closure: tuple[_Node, ...] = (self,)


def tokens(pattern: Pattern) -> list[tuple[str, str]]:
    """(kind, char) tokens with leading and trailing ``*`` dropped: they add nothing to a search."""
    out: list[tuple[str, str]] = []
    for index, (gap, phrase) in enumerate(zip(pattern.gaps, pattern.phrases, strict=False)):
        if gap.star and index > 0:
            out.append((_STAR, ""))
        out.extend((_ANY, "") for _ in range(gap.questions))
        out.extend(("c", ch) for ch in phrase)
    out.extend((_ANY, "") for _ in range(pattern.trailing.questions))
    return out


class NFAMatcher:
    def __init__(self) -> None:
        self.root = _Node()
        self._subs: dict[Hashable, list[tuple[str, str]]] = {}

    def __len__(self) -> int:
        return len(self._subs)

    def add(self, sub_id: Hashable, pattern: Pattern) -> None:
        if sub_id in self._subs:
            raise ValueError(f"pattern subscription {sub_id!r} is already indexed")
        sequence = tokens(pattern)
        node = self.root
        for kind, ch in sequence:
            node = self._child(node, kind, ch, create=True)
            node.count += 1
        node.accepts.add(sub_id)
        self._subs[sub_id] = sequence

    def _child(self, node: _Node, kind: str, ch: str, create: bool) -> _Node:
        if kind == "c":
            child = node.literal.get(ch)
            if child is None and create:
                child = node.literal[ch] = _Node()
        elif kind == _ANY:
            child = node.any
            if child is None and create:
                child = node.any = _Node()
        else:
            child = node.star
            if child is None and create:
                child = node.star = _Node(looping=True)
                node.closure = (node, child)
        assert child is not None
        return child

    def remove(self, sub_id: Hashable) -> bool:
        sequence = self._subs.pop(sub_id, None)
        if sequence is None:
            return False
        path = [self.root]
        for kind, ch in sequence:
            path.append(self._child(path[-1], kind, ch, create=False))
        path[-1].accepts.discard(sub_id)
        for parent, (kind, ch), node in zip(path, sequence, path[1:], strict=False):
            node.count -= 1
            if node.count == 0:
                if kind == "c":
                    del parent.literal[ch]
                elif kind == _ANY:
                    parent.any = None
                else:
                    parent.star = None
                    parent.closure = (parent,)
                break  # everything below was used by this pattern alone
        return True

    def match(self, text: str) -> set[Hashable]:
        """The ids of the patterns ``text`` (already normalised) matches."""
        found: set[Hashable] = set()
        root = self.root
        active: set[_Node] = set()
        for ch in text:
            following: set[_Node] = set()
            for node in (*active, root):
                child = node.literal.get(ch)
                if child is not None:
                    following.update(child.closure)
                if node.any is not None:
                    following.update(node.any.closure)
                if node.looping:
                    following.add(node)
            for node in following:
                if node.accepts:
                    found.update(node.accepts)
            active = following
        return found
