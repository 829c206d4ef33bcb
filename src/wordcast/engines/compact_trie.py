"""Compact trie (web-syndication thesis §3.2.2): node types and path compression.

The thesis classifies nodes by how they store subscriptions (class a: none, b: one id, c: several)
and children (class I: leaf, II: a child map), and compresses chains of single-child nodes without
subscriptions into one *compact* node labelled with the whole run of terms (Table 3.3).

In Python every object costs dozens of bytes, so the representation matters more than in Java:

* terms are interned to integer ranks of a :class:`~wordcast.engines.termstats.TermOrder` (the order the
  paths are sorted in), so a label run is a tuple of small ints and the child maps are int-keyed;
* a node is one ``__slots__`` object whose fields take the cheapest form for its type: ``subs`` is
  ``None`` (a), the bare id (b) or a list (c); ``children`` is ``None`` (I) or a dict (II);
  ``rest`` is the shared empty tuple unless the node is compact;
* the trie does not remember each subscription's path: ``remove`` takes the terms, which the caller
  (the matcher) holds anyway.

Matching is the scoped traversal of the plain trie: a compact node is entered only when every term
of its label is in the item, and traversal continues after the position of the label's last term.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from typing import Generic, TypeVar

from wordcast.engines.termstats import TermOrder

SubId = TypeVar("SubId", bound=Hashable)
_EMPTY: tuple[int, ...] = ()


class _Node:
    __slots__ = ("children", "rest", "subs")

    def __init__(self, rest: tuple[int, ...] = _EMPTY) -> None:
        self.rest = rest
        self.children: dict[int, _Node] | None = None
        self.subs: object = None

    def add_sub(self, sub_id: object) -> None:
        if self.subs is None:
            self.subs = sub_id
        elif type(self.subs) is list:
            self.subs.append(sub_id)
        else:
            self.subs = [self.subs, sub_id]

    def remove_sub(self, sub_id: object) -> bool:
        subs = self.subs
        if type(subs) is list:
            if sub_id not in subs:
                return False
            subs.remove(sub_id)
            if len(subs) == 1:
                self.subs = subs[0]
            return True
        if subs is not None and subs == sub_id:
            self.subs = None
            return True
        return False

    def kind(self) -> str:
        """The node type of thesis Table 3.3, e.g. ``IIb`` or ``Ic(compact)``."""
        children = "II" if self.children else "I"
        subs = self.subs
        stored = "a" if subs is None else ("c" if type(subs) is list else "b")
        return children + stored + ("(compact)" if self.rest else "")


class CompactTrie(Generic[SubId]):
    def __init__(self, order: TermOrder | None = None) -> None:
        self.order = order or TermOrder()
        self._root = _Node()
        self._root.children = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    # -- changes --------------------------------------------------------------------------------
    def add(self, sub_id: SubId, terms: Iterable[str]) -> None:
        path = sorted({self.order.intern(t) for t in terms})
        if not path:
            raise ValueError("a subscription needs at least one term")
        node = self._root
        i = 0
        while i < len(path):
            children = node.children
            if children is None:
                children = node.children = {}
            child = children.get(path[i])
            if child is None:
                child = children[path[i]] = _Node(tuple(path[i + 1 :]))
                child.add_sub(sub_id)
                self._count += 1
                return
            i += 1
            rest = child.rest
            common = 0
            while (
                common < len(rest) and i + common < len(path) and rest[common] == path[i + common]
            ):
                common += 1
            if common < len(rest):
                self._split(child, common)
            i += common
            node = child
        node.add_sub(sub_id)
        self._count += 1

    @staticmethod
    def _split(node: _Node, keep: int) -> None:
        """Cut a compact node's label after ``keep`` terms; the tail becomes its only child."""
        tail = _Node(node.rest[keep + 1 :])
        tail.children, tail.subs = node.children, node.subs
        node.children = {node.rest[keep]: tail}
        node.subs = None
        node.rest = node.rest[:keep] if keep else _EMPTY

    def remove(self, sub_id: SubId, terms: Iterable[str]) -> bool:
        ranks = self.order.rank
        path = sorted(ranks.get(t, -1) for t in set(terms))
        if not path or path[0] < 0:
            return False
        trail: list[tuple[_Node, int]] = []  # (parent, key of the child taken)
        node = self._root
        i = 0
        while i < len(path):
            child = node.children.get(path[i]) if node.children else None
            if child is None:
                return False
            rest = child.rest
            if tuple(path[i + 1 : i + 1 + len(rest)]) != rest:
                return False
            trail.append((node, path[i]))
            i += 1 + len(rest)
            node = child
        if not node.remove_sub(sub_id):
            return False
        self._count -= 1
        self._tidy(node, trail)
        return True

    def _tidy(self, node: _Node, trail: list[tuple[_Node, int]]) -> None:
        """Drop nodes left empty and re-compress chains the removal made single-child."""
        while trail and node.subs is None and not node.children:
            parent, key = trail.pop()
            del parent.children[key]  # type: ignore[union-attr]
            if not parent.children and parent is not self._root:
                parent.children = None
            node = parent
        # Only the last node kept can have become a chain link: no subscriptions, one child.
        if (
            node is not self._root
            and node.subs is None
            and node.children
            and len(node.children) == 1
        ):
            self._merge_only_child(node)

    @staticmethod
    def _merge_only_child(node: _Node) -> None:
        assert node.children is not None
        ((key, child),) = node.children.items()
        node.rest = (*node.rest, key, *child.rest)
        node.children, node.subs = child.children, child.subs

    # -- matching --------------------------------------------------------------------------------
    def match_batch(self, batch: Sequence[Iterable[str]]) -> list[tuple[SubId, int]]:
        """(subscription, position) for every match of every publication of a batch."""
        return [(sub_id, k) for k, terms in enumerate(batch) for sub_id in self.match(terms)]

    def match(self, terms: Iterable[str]) -> list[SubId]:
        ranks = self.order.rank
        post = sorted(r for t in set(terms) if (r := ranks.get(t)) is not None)
        end = len(post)
        found: list[SubId] = []
        if not end:
            return found
        where: dict[int, int] | None = None
        stack: list[tuple[_Node, int]] = [(self._root, 0)]
        while stack:
            node, start = stack.pop()
            children = node.children
            assert children is not None
            for j in range(start, end):
                child = children.get(post[j])
                if child is None:
                    continue
                after = j + 1
                if child.rest:
                    if where is None:
                        where = {r: k for k, r in enumerate(post)}
                    whole_label = True
                    for r in child.rest:
                        k = where.get(r)
                        if k is None:
                            whole_label = False
                            break
                        after = k + 1
                    if not whole_label:
                        continue
                subs = child.subs
                if subs is not None:
                    if type(subs) is list:
                        found.extend(subs)
                    else:
                        found.append(subs)  # type: ignore[arg-type]
                if child.children and after < end:
                    stack.append((child, after))
        return found

    # -- introspection ---------------------------------------------------------------------------
    def node_types(self) -> Counter[str]:
        """How many nodes of each type of thesis Table 3.3 the trie has (root excluded)."""
        kinds: Counter[str] = Counter()
        stack = [self._root]
        while stack:
            node = stack.pop()
            if node.children:
                for child in node.children.values():
                    kinds[child.kind()] += 1
                    stack.append(child)
        return kinds

    @property
    def node_count(self) -> int:
        return 1 + sum(self.node_types().values())

    def is_compressed(self) -> bool:
        """True when no node but the root is a bare chain link (no subscriptions, one child)."""
        stack = [self._root]
        while stack:
            node = stack.pop()
            if node is not self._root and node.subs is None and len(node.children or ()) == 1:
                return False
            stack.extend((node.children or {}).values())
        return True
