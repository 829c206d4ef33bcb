"""A published request's analysis, kept from stalling the router, and each tenant's share of it.

Each text is analysed into its terms in English and in its own language (detected when not
given: :mod:`wordcast.query.languages`), and its attributes into filter terms
(:mod:`wordcast.query.filters`). A request of ``OFF_LOOP_CHARS`` or more is analysed in a worker
thread: the compiled analyser lets go of the GIL, so other tenants' requests, and the router's
report of its mapping version, go on meanwhile. The compiled analyser keeps a cache it borrows
exclusively while it works, so the worker threads share one analyser of their own, one request
at a time, and the event loop keeps another.

:class:`CharsInFlight` bounds the characters of one tenant's publications a router has in flight
at once: past it a request is refused (429) unless it is the tenant's only one, so one tenant's
large requests cannot take the router from the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from wordcast.errors import RateLimited
from wordcast.query.analysis import TermAnalyser, new_analyser
from wordcast.query.filters import Value, filter_terms
from wordcast.query.languages import analyse_in_languages

OFF_LOOP_CHARS = 64 * 1024  # a request of this much text is analysed in a worker thread


@dataclass(frozen=True, slots=True)
class Analysed:
    """A request's publications analysed, by columns: each one's terms, its filter terms (no
    list when no publication has any) and its language ('' when not known: not given, and not
    detected)."""

    terms: list[tuple[str, ...]]
    filters: list[list[str]]
    languages: list[str]


class PublicationAnalysis:
    def __init__(self, detect_languages: bool) -> None:
        self.detect_languages = detect_languages
        self._analyser = new_analyser()
        self._thread_analyser = new_analyser()
        self._thread_analysing = threading.Lock()

    async def analyse(
        self,
        publications: Sequence[tuple[str | None, str]],
        attributes: Sequence[Mapping[str, Value] | None] | None,
        languages: Sequence[str | None] | None,
        size: int,
    ) -> Analysed:
        """Each publication's terms (in English, and in its own language) and filter terms;
        ``attributes[k]`` and ``languages[k]`` what publication k says of itself, ``size`` the
        characters of their texts."""
        if size < OFF_LOOP_CHARS:
            return self._analyse(publications, attributes, languages, self._analyser)
        return await asyncio.to_thread(self._analyse_in_thread, publications, attributes, languages)

    def _analyse_in_thread(
        self,
        publications: Sequence[tuple[str | None, str]],
        attributes: Sequence[Mapping[str, Value] | None] | None,
        languages: Sequence[str | None] | None,
    ) -> Analysed:
        with self._thread_analysing:
            return self._analyse(publications, attributes, languages, self._thread_analyser)

    def _analyse(
        self,
        publications: Sequence[tuple[str | None, str]],
        attributes: Sequence[Mapping[str, Value] | None] | None,
        languages: Sequence[str | None] | None,
        analyser: TermAnalyser,
    ) -> Analysed:
        texts = [text for _, text in publications]
        detect = self.detect_languages
        if not detect and languages is None and attributes is None:
            return Analysed(analyser.term_tuples(texts), [], [""] * len(texts))
        given = languages if languages is not None else [None] * len(texts)
        terms, codes = analyse_in_languages(texts, given, detect, analyser)
        attributes = attributes if attributes is not None else [None] * len(texts)
        filters = [filter_terms(a, code) for a, code in zip(attributes, codes, strict=True)]
        return Analysed(terms, filters, [code or "" for code in codes])


class CharsInFlight:
    """The characters of each tenant's publications in flight on this router."""

    def __init__(self, most: int) -> None:
        self.most = most
        self._in_flight: Counter[str] = Counter()

    @contextlib.contextmanager
    def hold(self, tenant: str, size: int) -> Iterator[None]:
        """Count ``size`` characters of ``tenant``'s in flight until the block ends; RateLimited
        past ``most`` (``tenant_chars_in_flight_max``) unless nothing else of the tenant is."""
        in_flight = self._in_flight[tenant]
        if in_flight and in_flight + size > self.most:
            raise RateLimited(
                f"tenant {tenant!r} has {in_flight:,} characters of publications in flight on this "
                f"router already, and this request would take it past {self.most:,} "
                "(WORDCAST_ROUTER_TENANT_CHARS_IN_FLIGHT_MAX): send it once those are answered",
                retry_after_s=1,
            )
        self._in_flight[tenant] = in_flight + size
        try:
            yield
        finally:
            self._in_flight[tenant] -= size
            if self._in_flight[tenant] <= 0:
                del self._in_flight[tenant]
