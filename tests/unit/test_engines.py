"""Every matching engine returns exactly the brute-force oracle's matches, through adds and deletes,
for short posts and long documents, one at a time and in batches."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wordcast.corpus.files import debian_documents
from wordcast.corpus.workload import post_queries, sample_posts
from wordcast.engines.compact_trie import CompactTrie
from wordcast.engines.compiled import CompiledCompactTrie, CompiledQueryNote
from wordcast.engines.querynote import MODES, CostModel, QueryNoteIndex, _leapfrog
from wordcast.engines.termstats import TermOrder, TermStats
from wordcast.engines.trie import Trie
from wordcast.query.analysis import analyse
from wordcast.testing.bruteforce import BruteForce
from wordcast.testing.counting import CountingIndex

VOCAB = [f"w{i}" for i in range(14)]
TRAINING = [random.Random(i).sample(VOCAB, 1 + i % 7) for i in range(300)]
STATS = TermStats.from_documents(TRAINING, min_pair_df=8)

ENGINES: dict[str, Callable[[], Any]] = {
    "trie": Trie,
    "trie-frequent-first": lambda: Trie(TermOrder("frequent-first", STATS)),
    "trie-rare-first": lambda: Trie(TermOrder("rare-first", STATS)),
    "compact-trie": CompactTrie,
    "compact-trie-rare-first": lambda: CompactTrie(TermOrder("rare-first", STATS)),
    "counting": CountingIndex,
    **{f"querynote-{mode}": (lambda m=mode: QueryNoteIndex(STATS, m)) for mode in MODES},
    # The compiled core, judged by the same oracle.
    "compiled-compact-trie": CompiledCompactTrie,
    "compiled-compact-trie-rare-first": lambda: CompiledCompactTrie(TermOrder("rare-first", STATS)),
    **{
        f"compiled-querynote-{mode}": (lambda m=mode: CompiledQueryNote(STATS, m)) for mode in MODES
    },
}

term_sets = st.frozensets(st.sampled_from(VOCAB), min_size=1, max_size=6)
documents = st.frozensets(st.sampled_from([*VOCAB, "zz-unknown"]), max_size=12)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 40), term_sets),
        st.tuples(st.just("remove"), st.integers(0, 40), st.just(frozenset())),
        st.tuples(st.just("match"), st.just(0), st.lists(documents, min_size=1, max_size=8)),
    ),
    max_size=60,
)


@pytest.mark.parametrize("name", sorted(ENGINES))
@settings(max_examples=150, deadline=None)
@given(ops=steps)
def test_engine_agrees_with_brute_force(name: str, ops: list[tuple[str, int, Any]]) -> None:
    engine = ENGINES[name]()
    oracle: BruteForce[int] = BruteForce()
    live: dict[int, frozenset[str]] = {}
    for op, sub_id, arg in ops:
        if op == "add" and sub_id not in live:
            engine.add(sub_id, arg)
            oracle.add(sub_id, arg)
            live[sub_id] = arg
        elif op == "remove":
            was = live.pop(sub_id, None)
            assert engine.remove(sub_id, was or {"w0"}) == (was is not None)
            oracle.remove(sub_id)
        elif op == "match":
            expected = sorted((s, i) for i, doc in enumerate(arg) for s in oracle.match(doc))
            if hasattr(engine, "match_batch"):
                assert sorted(engine.match_batch(arg)) == expected
            got = sorted((s, i) for i, doc in enumerate(arg) for s in engine.match(doc))
            assert got == expected
        assert len(engine) == len(live)


def test_compact_trie_stays_compressed_and_empties_completely() -> None:
    rng = random.Random(4)
    trie: CompactTrie[int] = CompactTrie()
    live = {}
    for i in range(3_000):
        if live and rng.random() < 0.45:
            sub_id = rng.choice(list(live))
            assert trie.remove(sub_id, live.pop(sub_id))
        else:
            live[i] = frozenset(rng.sample(VOCAB, rng.randint(1, 6)))
            trie.add(i, live[i])
        if i % 100 == 0:
            assert trie.is_compressed()
    for sub_id, terms in live.items():
        assert trie.remove(sub_id, terms)
    assert trie.node_count == 1


def test_compact_trie_compresses_chains_and_classifies_nodes() -> None:
    trie: CompactTrie[str] = CompactTrie()
    trie.add("long", ["a", "b", "c", "d"])
    assert trie.node_count == 2  # root plus one compact node labelled a,b,c,d
    assert trie.node_types() == {"Ib(compact)": 1}
    trie.add("short", ["a", "b"])  # splits the label after b
    assert trie.node_types() == {"IIb(compact)": 1, "Ib(compact)": 1}
    trie.add("twin", ["a", "b"])
    assert trie.node_types()["IIc(compact)"] == 1
    assert sorted(trie.match(["a", "b", "c", "d", "e"])) == ["long", "short", "twin"]
    assert sorted(trie.match(["a", "b", "d"])) == ["short", "twin"]


def test_leapfrog_conjunction() -> None:
    assert _leapfrog([[18, 31, 40], [22, 31, 40, 50], [1, 31, 40]]) == [31, 40]
    assert _leapfrog([[1, 2], []]) == []
    assert _leapfrog([[5]]) == [5]


def test_querynote_stores_fewer_extra_terms_than_fully_indexed() -> None:
    docs = [analyse(text) for _, text in debian_documents(limit=3_000)]
    stats = TermStats.from_documents(docs[:2_000], min_pair_df=40)
    queries = [
        analyse(q)
        for q in post_queries(
            sample_posts(3_000, seed=5, pool=100_000), 800, seed=6, sizes=(2, 3, 4, 5)
        )
    ]
    costs = CostModel.measure(docs[2_000:2_600], [sorted(q) for q in queries])
    note = QueryNoteIndex[int](stats, "querynote", costs)
    full = QueryNoteIndex[int](stats, "fully-indexed", costs)
    luwak = QueryNoteIndex[int](stats, "luwak", costs)
    for i, q in enumerate(queries):
        for engine in (note, full, luwak):
            engine.add(i, q)
    assert luwak.extra_terms_stored == 0
    assert 0 < note.extra_terms_stored < full.extra_terms_stored
    batch = docs[2_000:2_600]
    expected = sorted(luwak.match_batch(batch))
    assert sorted(note.match_batch(batch)) == expected == sorted(full.match_batch(batch))


def test_engines_agree_on_corpus_posts_and_long_documents() -> None:
    posts = [analyse(p.text) for p in sample_posts(2_000, seed=11, pool=100_000)]
    longs = [analyse(text) for _, text in debian_documents(limit=600)]
    queries = [
        analyse(q) for q in post_queries(sample_posts(2_000, seed=12, pool=100_000), 1_500, seed=13)
    ]
    stats = TermStats.from_documents(posts + longs, min_pair_df=20)
    oracle: BruteForce[int] = BruteForce()
    engines = [
        Trie[int](),
        CompactTrie[int](TermOrder("rare-first", stats)),
        CountingIndex[int](),
        CompiledCompactTrie(TermOrder("rare-first", stats)),
        CompiledQueryNote(stats),
        QueryNoteIndex[int](stats),
    ]
    for i, q in enumerate(queries):
        oracle.add(i, q)
        for engine in engines:
            engine.add(i, q)
    for i in range(0, len(queries), 3):  # churn: a third removed
        oracle.remove(i)
        for engine in engines:
            engine.remove(i, queries[i])
    for docs in (posts, longs):
        expected = sorted((s, d) for d, doc in enumerate(docs) for s in oracle.match(doc))
        assert len(expected) > 200
        for engine in engines:
            got = sorted((s, d) for d, doc in enumerate(docs) for s in engine.match(doc))
            assert got == expected, type(engine).__name__
        for batched in engines[-3:]:
            assert sorted(batched.match_batch(docs)) == expected, type(batched).__name__
