"""The alternatives of boolean queries a matcher holds, and the check that decides which of them
delivers a match (:mod:`.boolean`: only the first alternative that holds delivers, so a publication
matching the query is delivered exactly once; the Luwak thesis, §2, checks candidates likewise).

Pure: imports only the query package.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

from wordcast.query.boolean import BooleanQuery, Clause, split_part_id
from wordcast.query.wildcards import held_wildcards, is_wildcard


class HeldAlternatives:
    """The alternatives of boolean queries one index holds, and the check their matches pass.

    The index matches an alternative on its required words like any conjunction; ``delivering``
    then keeps a (stored id, publication) match only where that alternative is the one that
    delivers, and ``subscription_id`` names the query it belongs to. What the check needs is
    prepared when an alternative is added: its excluded terms and the earlier alternatives, as
    sets, so that a match costs a few set operations in C; the positions of a publication's
    terms are worked out only for an alternative (or an earlier one) with a phrase or proximity
    condition, once per publication.
    """

    def __init__(self) -> None:
        # The wildcard words the checks read (required or excluded, here or in an earlier
        # alternative): ``delivering``'s ``terms_of`` must give those a text's tokens
        # instantiate, an excluded one being held by no matcher, so carried by no router.
        self.wildcards = held_wildcards()
        self._wildcards_of: dict[str, tuple[str, ...]] = {}
        self._subscription: dict[str, str] = {}  # stored id -> the query's id
        # stored id -> (its place, itself, itself as text): what explanations name
        self._clauses: dict[str, tuple[int, Clause, str]] = {}
        # Only alternatives that can be overruled: stored id -> (excluded terms, required filter
        # terms, the earlier alternatives as (required, excluded), the alternative itself when
        # it has spans or conditions, the earlier ones that have spans or conditions).
        self._checks: dict[
            str,
            tuple[
                frozenset[str],
                frozenset[str],
                tuple[tuple[frozenset[str], frozenset[str]], ...],
                Clause | None,
                tuple[Clause, ...],
            ],
        ] = {}

    def __len__(self) -> int:
        return len(self._subscription)

    def __contains__(self, stored_id: object) -> bool:
        return stored_id in self._subscription

    def add(self, stored_id: str, query: BooleanQuery) -> None:
        part = split_part_id(stored_id)[1]
        if query.is_plain or part >= len(query.clauses):
            raise ValueError(f"{stored_id!r} is not an alternative of {query}")
        before = query.clauses[:part]
        earlier = tuple(
            (frozenset(c.words + c.filters), frozenset(c.without))
            for c in before
            if not _checked_in_full(c)
        )
        earlier_spans = tuple(c for c in before if _checked_in_full(c))
        this = query.clauses[part]
        without, filters = frozenset(this.without), frozenset(this.filters)
        self._subscription[stored_id] = split_part_id(stored_id)[0]
        self._clauses[stored_id] = (part, this, str(this))
        if without or filters or before or _checked_in_full(this):
            spans = this if _checked_in_full(this) else None
            self._checks[stored_id] = (without, filters, earlier, spans, earlier_spans)
        wild = tuple(
            {t for c in query.clauses[: part + 1] for t in (*c.words, *c.without) if is_wildcard(t)}
        )
        if wild and stored_id not in self._wildcards_of:
            self._wildcards_of[stored_id] = wild
            for term in wild:
                self.wildcards.add(term)

    def discard(self, stored_id: str) -> None:
        for term in self._wildcards_of.pop(stored_id, ()):
            self.wildcards.discard(term)
        self._subscription.pop(stored_id, None)
        self._clauses.pop(stored_id, None)
        self._checks.pop(stored_id, None)

    def clause(self, stored_id: str) -> tuple[int, Clause, str] | None:
        """(its place in the query, the alternative, it as text) of a held alternative; else
        None."""
        return self._clauses.get(stored_id)

    def checked_alone(self, stored_id: str) -> Clause | None:
        """The alternative, when what ``delivering`` checks of it is its own: its phrases and
        windows, filter terms, exclusions and conditions, on the publication's terms (with the
        wildcard words of :attr:`wildcards` found); else None (an earlier alternative)."""
        check = self._checks.get(stored_id)
        if check is None:
            return None
        _, _, earlier, _, earlier_full = check
        return None if earlier or earlier_full else self._clauses[stored_id][1]

    def subscription_id(self, stored_id: str) -> str:
        return self._subscription.get(stored_id, stored_id)

    def delivering(
        self,
        pairs: Iterable[tuple[str, int]],
        terms_of: Callable[[int], AbstractSet[str]],
        positions_of: Callable[[int], Mapping[str, Sequence[int]]] | None = None,
    ) -> list[tuple[str, int]]:
        """The (stored id, position) matches that stand, from an index that matched each
        alternative's required words; ``terms_of(position)`` gives the publication's terms and
        ``positions_of(position)`` where they occur (each asked once per publication that needs
        it)."""
        checks = self._checks
        term_sets: dict[int, AbstractSet[str]] = {}
        where: dict[int, Mapping[str, Sequence[int]]] = {}

        def positions(at: int) -> Mapping[str, Sequence[int]]:
            found = where.get(at)
            if found is None:
                if positions_of is None:
                    raise ValueError("phrases and proximity need positions_of")
                found = where[at] = positions_of(at)
            return found

        kept = []
        for stored_id, position in pairs:
            check = checks.get(stored_id)
            if check is not None:
                terms = term_sets.get(position)
                if terms is None:
                    terms = term_sets[position] = terms_of(position)
                without, filters, earlier, spans, earlier_spans = check
                if (
                    not terms.isdisjoint(without)
                    or not filters <= terms
                    or any(
                        required <= terms and terms.isdisjoint(excluded)
                        for required, excluded in earlier
                    )
                ):
                    continue
                if spans is not None and not _also_holds(spans, terms, positions, position):
                    continue
                if earlier_spans and any(
                    c.holds(terms, positions(position) if c.positional else None)
                    for c in earlier_spans
                    if all(t in terms for t in c.words)
                ):
                    continue
            kept.append((stored_id, position))
        return kept


def _checked_in_full(clause: Clause) -> bool:
    """Whether an alternative's check needs more than its terms: positions, or conditions."""
    return clause.positional or bool(clause.conditions or clause.not_conditions)


def _also_holds(
    clause: Clause,
    terms: AbstractSet[str],
    positions: Callable[[int], Mapping[str, Sequence[int]]],
    position: int,
) -> bool:
    """What ``delivering`` checks of an alternative past its terms: conditions, then spans."""
    if not clause.conditions_hold(terms):
        return False
    return not clause.positional or clause.spans_hold(positions(position))
