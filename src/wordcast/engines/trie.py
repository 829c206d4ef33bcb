"""Trie index of conjunctive subscriptions (S³-TM §4.1; web-syndication thesis Alg. 5-6).

Each subscription is a set of terms. Its terms are sorted in a total order (lexicographic, as S³-TM
does, unless a :class:`~wordcast.engines.termstats.TermOrder` is given: the thesis' §2.3.4 compares orders by
frequency too) and inserted as a path from the root; the subscription id is stored on the node at
the end of that path. Subscriptions with common prefixes share nodes, which is why placing similar
subscriptions together (LASP) makes matching cheaper.

Matching a publication is a *scoped traversal*: a child is visited only when its term is in the
publication, which we find by probing the child hash map with the publication's remaining terms.
Every visited node's path is therefore contained in the publication, so every subscription stored on a
visited node matches. Because subscription paths are sorted, a node reached through the publication's
j-th smallest term need only be probed with the terms after j.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Generic, TypeVar

from wordcast.engines.termstats import TermOrder

SubId = TypeVar("SubId", bound=Hashable)


class _Node:
    __slots__ = ("children", "subs")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.subs: list[Hashable] = []


class Trie(Generic[SubId]):
    """A mutable trie of subscriptions keyed by id; add and remove at any time.

    Adding an id that is already present replaces its terms, so replaying an add is harmless.
    """

    def __init__(self, order: TermOrder | None = None) -> None:
        self._order = order
        self._root = _Node()
        self._terms: dict[SubId, tuple[str, ...]] = {}
        self._nodes = 1

    def __len__(self) -> int:
        return len(self._terms)

    def __contains__(self, sub_id: object) -> bool:
        return sub_id in self._terms

    @property
    def node_count(self) -> int:
        """Nodes including the root: S³-TM's trie size, the quantity LASP's cost model uses."""
        return self._nodes

    def add(self, sub_id: SubId, terms: Iterable[str]) -> None:
        if self._order is None:
            path = tuple(sorted(set(terms)))
        else:
            rank = self._order.intern
            path = tuple(sorted(set(terms), key=rank))
        if not path:
            raise ValueError("a subscription needs at least one term")
        if sub_id in self._terms:
            self.remove(sub_id)
        node = self._root
        for term in path:
            child = node.children.get(term)
            if child is None:
                child = node.children[term] = _Node()
                self._nodes += 1
            node = child
        node.subs.append(sub_id)
        self._terms[sub_id] = path

    def remove(self, sub_id: SubId, terms: Iterable[str] = ()) -> bool:
        """Remove a subscription; returns False when it was not present.

        ``terms`` is accepted for the engines' common interface; the trie remembers each path.
        """
        path = self._terms.pop(sub_id, None)
        if path is None:
            return False
        trail = [self._root]
        for term in path:
            trail.append(trail[-1].children[term])
        trail[-1].subs.remove(sub_id)
        # Prune the now-useless tail of the path so memory follows the live subscriptions.
        for depth in range(len(path), 0, -1):
            node = trail[depth]
            if node.subs or node.children:
                break
            del trail[depth - 1].children[path[depth - 1]]
            self._nodes -= 1
        return True

    def match_batch(self, batch: Sequence[Iterable[str]]) -> list[tuple[SubId, int]]:
        """(subscription, position) for every match of every publication of a batch."""
        return [(sub_id, k) for k, terms in enumerate(batch) for sub_id in self.match(terms)]

    def match(self, terms: Iterable[str]) -> list[SubId]:
        """Ids of every subscription whose terms are all among ``terms``."""
        if self._order is None:
            post = sorted(set(terms))
        else:
            ranks = self._order.rank
            post = sorted((t for t in set(terms) if t in ranks), key=ranks.__getitem__)
        found: list[SubId] = []
        stack: list[tuple[_Node, int]] = [(self._root, 0)]
        end = len(post)
        while stack:
            node, start = stack.pop()
            children = node.children
            for j in range(start, end):
                child = children.get(post[j])
                if child is None:
                    continue
                if child.subs:
                    found.extend(child.subs)  # type: ignore[arg-type]
                if child.children and j + 1 < end:
                    stack.append((child, j + 1))
        return found

    def operations(self, terms: Iterable[str]) -> int:
        """Child-map probes made to match ``terms``: the trie side of thesis Table 4.6."""
        post = sorted(set(terms)) if self._order is None else self._order.sort(terms)
        probes = 0
        stack: list[tuple[_Node, int]] = [(self._root, 0)]
        while stack:
            node, start = stack.pop()
            probes += len(post) - start
            for j in range(start, len(post)):
                child = node.children.get(post[j])
                if child is not None and child.children:
                    stack.append((child, j + 1))
        return probes
