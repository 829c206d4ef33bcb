"""The trie must return exactly what brute force returns, through adds and deletes."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from wordcast.corpus.workload import post_queries, sample_posts
from wordcast.engines.trie import Trie
from wordcast.query.analysis import analyse
from wordcast.testing.bruteforce import BruteForce, match_pairs

VOCAB = ["a1", "b2", "c3", "d4", "e5", "f6", "g7", "h8"]
terms = st.frozensets(st.sampled_from(VOCAB), min_size=1, max_size=5)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 30), terms),
        st.tuples(st.just("remove"), st.integers(0, 30), st.just(frozenset())),
        st.tuples(st.just("match"), st.just(0), st.frozensets(st.sampled_from(VOCAB), max_size=8)),
    ),
    max_size=80,
)


@settings(max_examples=300)
@given(operations)
def test_trie_agrees_with_brute_force_through_interleaved_changes(ops: list) -> None:
    trie: Trie[int] = Trie()
    oracle: BruteForce[int] = BruteForce()
    for op, sub_id, words in ops:
        if op == "add":
            trie.add(sub_id, words)
            oracle.add(sub_id, words)
        elif op == "remove":
            assert trie.remove(sub_id) == oracle.remove(sub_id)
        else:
            assert sorted(trie.match(words)) == sorted(oracle.match(words))
        assert len(trie) == len(oracle)


def test_removing_everything_leaves_only_the_root() -> None:
    trie: Trie[int] = Trie()
    trie.add(1, ["x", "y"])
    trie.add(2, ["x", "y", "z"])
    trie.add(3, ["x"])
    assert trie.node_count == 4
    for sub_id in (2, 1, 3):
        assert trie.remove(sub_id)
    assert trie.node_count == 1
    assert trie.match(["x", "y", "z"]) == []
    assert not trie.remove(1)


def test_shared_prefixes_share_nodes() -> None:
    trie: Trie[str] = Trie()
    trie.add("s1", ["obama", "health"])
    trie.add("s2", ["health", "obama", "care"])
    trie.add("s3", ["health"])
    # sorted paths: care>health>obama, health>obama, health
    assert trie.node_count == 1 + 3 + 2
    assert sorted(trie.match(["obama", "health", "news"])) == ["s1", "s3"]


def test_trie_matches_the_oracle_on_corpus_posts() -> None:
    posts = sample_posts(3_000, seed=7, pool=200_000)
    queries = post_queries(posts, 2_000, seed=8)
    subs = {f"s{i}": analyse(q) for i, q in enumerate(queries)}
    pubs = {p.id: analyse(p.text) for p in posts}
    trie: Trie[str] = Trie()
    for sid, words in subs.items():
        trie.add(sid, words)
    # delete a random third and re-add some, so the trie has been through churn
    rng = random.Random(3)
    removed = rng.sample(sorted(subs), len(subs) // 3)
    for sid in removed:
        trie.remove(sid)
    for sid in removed[: len(removed) // 2]:
        trie.add(sid, subs[sid])
    live = {sid: words for sid, words in subs.items() if sid in trie}
    got = {(sid, pid) for pid, words in pubs.items() for sid in trie.match(words)}
    expected = match_pairs(live, pubs)
    assert got == expected
    assert len(expected) > 1_000  # the workload really exercises matching
