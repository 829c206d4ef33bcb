"""The one message writer (``wordcast._core.Deliveries``, driven by
:class:`wordcast.services.matcher.messages.MessageWriter`) against its reference,
:func:`wordcast.testing.messages.messages`: the same messages byte for byte, on random batches
(hypothesis) and on the corpora, for plain matches and for every other kind beside them (boolean
alternatives, phrases and windows, restricted placements, patterns), in both payload versions;
and the writer following the index's changes."""

from __future__ import annotations

import random
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.support import placed_subscriptions, routed_batch, shown
from wordcast.corpus.workload import (
    post_boolean_queries,
    post_queries,
    post_span_queries,
    sample_posts,
)
from wordcast.engines.compiled import CompiledCompactTrie
from wordcast.engines.registry import pattern_index, term_index
from wordcast.query.analysis import Analyser
from wordcast.query.boolean import parse_query, part_id
from wordcast.query.patterns import normalise
from wordcast.routing.placement import Placement
from wordcast.services.matcher.explanations import Explanations
from wordcast.services.matcher.index import Batch, MatcherIndex
from wordcast.services.matcher.messages import MessageOptions, MessageWriter
from wordcast.storage.outbox import Message
from wordcast.storage.records import Subscription, SubscriptionEvent, delivery_address
from wordcast.testing.messages import messages
from wordcast.webhooks.payload import matches_of

ANALYZER = Analyser()
WORDS = ["senate", "vote", "budget", "river", "house", "naïve", "café", "Straße", "data", "x"]
AWKWARD = ['quote " and \\ slash', "ünïcödé ☃", "tab\there", "new\nline", "</script>", "\x00\x1f"]


def _index(subs: Iterable[Subscription]) -> MatcherIndex:
    index = MatcherIndex(0, CompiledCompactTrie, lambda: pattern_index("retriever"))
    index.load(subs)
    return index


def _sub(
    sub_id: str, query: str, tenant: str = "t", url: str = "http://a/", **kw: object
) -> Subscription:
    terms = tuple(sorted(ANALYZER.terms(query)))
    kw.setdefault("created", _made(sub_id))
    return Subscription(sub_id, query, terms, url, 0, tenant=tenant, **kw)  # type: ignore[arg-type]


def _made(sub_id: str) -> float:
    """A record's ``created``, one of its own (the incarnation each message hands back)."""
    return 1e9 + zlib.crc32(sub_id.encode()) / 1000


def _routed(
    texts: Sequence[str], ids: Sequence[str] | None = None, lang: str = ""
) -> list[tuple[str, str, tuple[str, ...], bool]]:
    filters = (f"lang:{lang}",) if lang else ()
    return [
        (ids[k] if ids else f"p{k}", text, tuple(ANALYZER.terms(text)) + filters, False)
        for k, text in enumerate(texts)
    ]


def _both(
    index: MatcherIndex,
    batch: Batch,
    most: int = 100,
    *,
    explain: bool = True,
    max_bytes: int = 1 << 20,
    subscriptions_max: int | None = None,
    version: int = 0,
    payload_version: int = 2,
    drawn: list[dict[str, int]] | None = None,
) -> tuple[list[Message], list[Message]]:
    """(the reference's messages, the writer's) for ``batch`` routed with mapping ``version``
    (``drawn``: the hot words' copies drawn for each publication)."""
    batch = replace(batch, mapping_version=version, drawn=dict(enumerate(drawn or [])))
    pairs = index.pairs(batch)
    reference = messages(
        pairs,
        batch,
        index.subscriptions,
        Explanations(batch, index.alternatives, explain),
        most,
        explain=explain,
        max_bytes=max_bytes,
        subscriptions_max=subscriptions_max,
        payload_version=payload_version,
    )
    options = MessageOptions(most, max_bytes, subscriptions_max, explain, payload_version)
    compiled, count = MessageWriter(index, options).messages(batch)
    assert count == len(pairs)
    return reference, compiled


def _delivered(found: Iterable[Message]) -> list[tuple[str, str, str, str, str]]:
    """(tenant, URL, subscription, publication id, matched's JSON) of every match delivered."""
    out = []
    for message in found:
        body = orjson.loads(message.body)
        for match in matches_of(body):
            out.append(
                (
                    message.tenant,
                    message.callback_url,
                    match["subscription_id"],
                    match["publication_id"],
                    orjson.dumps(match.get("matched")).decode(),
                )
            )
    return sorted(out)


@settings(max_examples=150, deadline=None)
@given(
    queries=st.lists(
        st.tuples(
            st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
            st.sampled_from(["t", "u"]),
            st.sampled_from(["http://a/", "http://b/", "", "http://c/ü"]),
            st.booleans(),
            st.sampled_from(["", "news"]),
            st.sampled_from(["", "elections", 'q"uote\\ ü ☃']),
        ),
        min_size=1,
        max_size=12,
    ),
    texts=st.lists(
        st.lists(st.sampled_from(WORDS + AWKWARD + ["the", "and"]), max_size=8).map(" ".join),
        min_size=1,
        max_size=10,
    ),
    ids=st.sampled_from([None, ["é" * k + '"' for k in range(10)]]),
    publisher=st.sampled_from(["t", "u"]),
    stream=st.sampled_from(["", "news"]),
    most=st.integers(1, 6),
    max_bytes=st.sampled_from([1, 300, 700, 1 << 20]),
    subscriptions_max=st.sampled_from([None, 1, 2]),
    explain=st.booleans(),
    lang=st.sampled_from(["", "en", "de", "eo"]),  # eo: no Snowball stemmer, read as English
)
def test_plain_matches_are_written_as_the_reference_writes_them(
    queries: list[tuple[list[str], str, str, bool, str, str]],
    texts: list[str],
    ids: list[str] | None,
    publisher: str,
    stream: str,
    most: int,
    max_bytes: int,
    subscriptions_max: int | None,
    explain: bool,
    lang: str,
) -> None:
    subs = []
    for k, (words, tenant, url, to_stream, sub_stream, tag) in enumerate(queries):
        address = delivery_address(url, to_stream or not url)
        sub = _sub(f"s{k}\u00e9", " ".join(words), tenant, address, stream=sub_stream, tag=tag)
        if sub.terms:  # "x" alone: no term (a query the router refuses)
            subs.append(sub)
    batch = routed_batch(_routed(texts, ids, lang), publisher, stream, accepted=12.5)
    reference, compiled = _both(
        _index(subs),
        batch,
        most,
        explain=explain,
        max_bytes=max_bytes,
        subscriptions_max=subscriptions_max,
    )
    assert shown(compiled) == shown(reference)
    assert all(m.published == 12.5 for m in compiled)


@pytest.mark.parametrize("explain", [True, False])
def test_plain_matches_on_the_corpora(explain: bool) -> None:
    posts = sample_posts(1_500, seed=4)
    queries = post_queries(posts, 3_000, seed=5, sizes=(2, 2, 3))
    urls = ["http://a/", "http://b/", delivery_address("http://a/", True)]
    tags = ["", "", "corpus", "ü"]
    subs = [_sub(f"sub{k}", q, url=urls[k % 3], tag=tags[k % 4]) for k, q in enumerate(queries)]
    batch = routed_batch(_routed([p.text for p in posts], [p.id for p in posts]), "t")
    reference, compiled = _both(_index(subs), batch, 50, explain=explain)
    assert sum(m.matches for m in reference) > 3_000
    assert shown(compiled) == shown(reference)


@pytest.mark.parametrize("payload_version", [1, 2])
def test_every_kind_of_match_beside_plain_ones_is_written_as_the_reference_writes_it(
    payload_version: int,
) -> None:
    posts = sample_posts(400, seed=6)
    plain = post_queries(posts, 600, seed=7, sizes=(1, 2))
    boolean = post_boolean_queries(posts, 200, seed=8)
    subs = [_sub(f"p{k}", q) for k, q in enumerate(plain)]
    for k, query in enumerate(boolean):
        read = parse_query(query)
        for part, clause in enumerate(read.clauses):
            stored = part_id(f"b{k}", part)
            subs.append(
                Subscription(
                    stored, query, clause.words, "http://a/", 0, tenant="t", created=_made(query)
                )
            )
    # Restricted by their placements: served from mapping version 5 on.
    later = (Placement(0, 5),)
    subs += [_sub(f"r{k}", q, placements=later) for k, q in enumerate(plain[:50])]
    for k, pattern in enumerate(["pack* d?ta", "the* *ing", "new?"]):
        subs.append(
            Subscription(
                f"w{k}", "", (), "http://a/", 0, pattern=pattern, tenant="t", created=_made(pattern)
            )
        )
    # Every publication flagged: an anchor of the patterns' occurs in it.
    routed = [(*p[:3], True) for p in _routed([p.text for p in posts], [p.id for p in posts])]
    batch = routed_batch(routed, "t")
    index = _index(subs)
    for version in (0, 7):
        reference, compiled = _both(
            index, batch, 40, version=version, payload_version=payload_version
        )
        assert shown(compiled) == shown(reference)
        kinds = {m[2][0] for m in _delivered(reference)}
        assert kinds >= ({"p", "b", "r", "w"} if version else {"p", "b", "w"})


def test_the_writer_follows_the_index() -> None:
    subs = [_sub("a", "senate vote"), _sub("b", "river"), _sub("c", "budget", tenant="u")]
    index = _index(subs)
    writer = MessageWriter(index, MessageOptions(most=10))
    batch = routed_batch(_routed(["the senate vote on the river budget"]), "t")

    def written() -> list[tuple[str, str, str, str, str]]:
        found, _ = writer.messages(batch)
        return _delivered(found)

    assert [m[2] for m in written()] == ["a", "b"]
    moved = _sub("b", "river budget", url="http://elsewhere/")
    index.apply(
        [
            SubscriptionEvent("1-0", "del", subs[0], ()),
            SubscriptionEvent("2-0", "upd", moved, ()),
            SubscriptionEvent("3-0", "add", _sub("d", "vote"), ()),
        ]
    )
    assert [(m[1], m[2]) for m in written()] == [("http://a/", "d"), ("http://elsewhere/", "b")]


def _boolean_subs(queries: Sequence[str], prefix: str) -> list[Subscription]:
    """The stored records of boolean queries: one per alternative, as the router stores them."""
    subs = []
    for k, query in enumerate(queries):
        read = parse_query(query)
        for part, clause in enumerate(read.clauses):
            stored = part_id(f"{prefix}{k}", part) if not read.is_plain else f"{prefix}{k}"
            subs.append(
                Subscription(
                    stored, query, clause.words, "http://a/", 0, tenant="t", created=_made(query)
                )
            )
    return subs


def test_phrases_and_windows_checked_in_the_core_deliver_as_the_reference_does() -> None:
    posts = sample_posts(600, seed=9)
    spans = post_span_queries(posts, 800, seed=10)
    subs = _boolean_subs(spans, "s") + [_sub(f"p{k}", q) for k, q in enumerate(spans[:100])]
    index = _index(subs)
    assert sum(index.alternatives.checked_alone(s.id) is not None for s in subs) > 400
    batch = routed_batch(_routed([p.text for p in posts], [p.id for p in posts]), "t")
    reference, compiled = _both(index, batch, 40)
    assert shown(compiled) == shown(reference)
    assert sum(m[2].startswith("s") for m in _delivered(compiled)) > 100


SPAN_WORDS = ["white", "house", "the", "a", "of", "x", "card", "black"]


@settings(max_examples=200, deadline=None)
@given(
    queries=st.lists(
        st.sampled_from(
            [
                '"white house"',
                '"white the house"',
                '"house of card"',
                '"white house" -"black house"',
                "NEAR/1(white house)",
                "NEAR/3(white card)",
                "NEAR/2(house white card)",
                "white NOT NEAR/2(house card)",
                '"white house" NEAR/4(card black)',
                '"x house"',
            ]
        ),
        min_size=1,
        max_size=6,
    ),
    texts=st.lists(
        st.lists(st.sampled_from([*SPAN_WORDS, "ünï", "Whité"]), max_size=12).map(" ".join),
        min_size=1,
        max_size=8,
    ),
)
def test_span_checks_in_the_core_keep_exactly_the_candidates_the_reference_keeps(
    queries: list[str], texts: list[str]
) -> None:
    index = _index(_boolean_subs(queries, "q"))
    batch = routed_batch(_routed(texts), "t")
    reference, compiled = _both(index, batch)
    assert shown(compiled) == shown(reference)


@pytest.mark.parametrize("engine", ["compiled-compact-trie", "compact-trie"])
@pytest.mark.parametrize("payload_version", [1, 2])
def test_hot_words_placements_and_patterns_of_either_index_as_the_reference_writes_them(
    engine: str, payload_version: int
) -> None:
    rng = random.Random(11)
    index = MatcherIndex(
        0, lambda: term_index(engine, None), lambda: pattern_index("retriever", "none", 2, 2)
    )
    index.load(placed_subscriptions(rng))
    assert index.hot_indexes
    assert index.restricted
    assert len(index.patterns)
    words = [f"w{i}" for i in range(12)]
    for version in (0, 1, 3):
        texts = [" ".join(rng.sample(words, rng.randint(1, 6))) for _ in range(60)]
        routed = [(*p[:3], True) for p in _routed(texts)]
        drawn = [{w: rng.randint(0, 3) for w in words} for _ in routed]
        for publisher in ("a", "b"):
            batch = routed_batch(routed, publisher)
            reference, compiled = _both(
                index, batch, 7, version=version, payload_version=payload_version, drawn=drawn
            )
            assert shown(compiled) == shown(reference)
            assert sum(m.matches for m in compiled) > 20


def test_a_batchs_languages_column_reads_as_its_filter_terms_do() -> None:
    """A router sends each publication's language as a column; one that did not left it among
    the filter terms (``lang:de``): the matcher reads either the same way."""
    posts = sample_posts(300, seed=12)
    langs = ["de", "en", "", "fr", "eo"]
    rows = [_routed([p.text], [p.id], langs[k % 5])[0] for k, p in enumerate(posts)]
    subs = [_sub(f"q{k}", q) for k, q in enumerate(post_queries(posts, 400, seed=13))]
    index = _index(subs)
    by_terms = routed_batch(rows, "t")
    unmarked = routed_batch(_routed([p.text for p in posts], [p.id for p in posts]), "t")
    by_column = replace(unmarked, languages=[langs[k % 5] for k in range(len(rows))])
    assert [by_column.language(k) for k in range(5)] == ["de", "en", None, "fr", "eo"]
    assert [by_terms.language(k) for k in range(5)] == ["de", "en", None, "fr", "eo"]
    written = [MessageWriter(index, MessageOptions()).messages(b)[0] for b in (by_terms, by_column)]
    assert shown(written[0]) == shown(written[1])
    assert sum(m.matches for m in written[0]) > 100


def test_each_text_is_read_once_in_the_process_whatever_its_matches_need(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Plain matches, boolean alternatives (phrases and windows the core checks, exclusions the
    matcher checks), restricted placements and patterns, in one batch: the compiled analyser
    reads each text once at most, and the matcher reads none again (no reference reading of
    an English text, no positions of its own, each flagged text normalised once)."""
    from wordcast.query.explain import AnalysedText, offsets_analyser
    from wordcast.services.matcher import explanations
    from wordcast.services.matcher import index as index_module

    posts = list({p.text: p for p in sample_posts(300, seed=12) if p.text.isascii()}.values())
    plain = post_queries(posts, 300, seed=7, sizes=(1, 2))
    subs = [_sub(f"p{k}", q) for k, q in enumerate(plain)]
    subs += _boolean_subs(post_boolean_queries(posts, 150, seed=8), "b")
    subs += _boolean_subs(post_span_queries(posts, 150, seed=9), "s")
    subs += [_sub(f"r{k}", q, placements=(Placement(0, 5),)) for k, q in enumerate(plain[:40])]
    subs += [
        Subscription(f"w{k}", "", (), "http://a/", 0, pattern=pattern, tenant="t")
        for k, pattern in enumerate(["pack* d?ta", "the* *ing", "new?"])
    ]
    routed = [(*p[:3], True) for p in _routed([p.text for p in posts], [p.id for p in posts])]
    batch = replace(routed_batch(routed, "t"), mapping_version=7)
    index = _index(subs)
    writer = MessageWriter(index, MessageOptions(40))
    writer.follow()

    read: Counter[str] = Counter()
    reference_init = AnalysedText.__init__

    def counted_reference(self: AnalysedText, text: str, language: str | None = None) -> None:
        read["reference", text] += 1
        reference_init(self, text, language)

    def counted_normalise(text: str) -> str:
        read["normalise", text] += 1
        return normalise(text)

    def no_positions(text: str) -> dict[str, list[int]]:
        raise AssertionError(f"positions read again: {text!r}")

    monkeypatch.setattr(AnalysedText, "__init__", counted_reference)
    monkeypatch.setattr(explanations, "normalise", counted_normalise)
    monkeypatch.setattr(index_module, "normalise", counted_normalise)
    monkeypatch.setattr(index_module, "term_positions", no_positions)
    analyser = offsets_analyser()
    before = analyser.texts_read
    found, _ = writer.messages(batch)
    kinds = {m[2][0] for m in _delivered(found)}
    assert kinds == {"p", "b", "s", "r", "w"}  # every kind of match, and each read once:
    assert analyser.texts_read - before <= len(batch)
    assert not [key for key in read if key[0] == "reference"]
    assert max(read.values()) == 1
    assert sum(1 for key in read if key[0] == "normalise") == len(batch)


FILTER_WORDS = ["white", "house", "card", "black", "spam"]


@settings(max_examples=200, deadline=None)
@given(
    queries=st.lists(
        st.sampled_from(
            [
                "white source:rss",
                "white -spam",
                "white house -source:rss has:links",
                "white score:>3",
                "house score:[2 TO 4] -score:{2 TO 3}",
                'white url:"example"',
                "card date:>=2026-01-15",
                "black name:[b TO d]",
                '"white house" source:atom',
                "NEAR/2(white card) -spam -score:<2",
                "(white OR black) source:rss",
                "white #tag",
            ]
        ),
        min_size=1,
        max_size=8,
    ),
    posts=st.lists(
        st.tuples(
            st.lists(st.sampled_from([*FILTER_WORDS, "#tag", "https://example.org/x"]), max_size=8),
            st.lists(
                st.sampled_from(
                    [
                        "source:rss",
                        "source:atom",
                        "score:1",
                        "score:2",
                        "score:3.5",
                        "score:4",
                        "score:x",
                        "date:2026-01-15",
                        "date:2026-01-14t23:00z",
                        "date:soon",
                        "name:bob",
                        "name:dan",
                        "has:links",
                    ]
                ),
                max_size=4,
            ),
        ),
        min_size=1,
        max_size=8,
    ),
    explain=st.booleans(),
)
def test_filters_exclusions_and_conditions_checked_in_the_core_deliver_as_the_reference_does(
    queries: list[str], posts: list[tuple[list[str], list[str]]], explain: bool
) -> None:
    """An alternative checked alone (issue 53): its filter terms, exclusions and conditions
    decided by the core on the routed terms, written byte for byte as the reference writes it."""
    index = _index(_boolean_subs(queries, "f"))
    rows = []
    for k, (words, filters) in enumerate(posts):
        text = " ".join(words)
        rows.append((f"p{k}", text, tuple(ANALYZER.terms(text)) + tuple(filters), False))
    reference, compiled = _both(index, routed_batch(rows, "t"), explain=explain)
    assert shown(compiled) == shown(reference)
