"""The compiled core against its Python references, on hostile input (ARCHITECTURE invariant 6).

The engines' differential tests are in test_engines.py and test_patterns.py (each compiled engine is
one more engine there, judged by the same oracle); the analyser's over every corpus text is in
tests/e2e/test_compiled_corpora.py. Here: random Unicode of every kind (lone surrogates, NUL,
combining marks, right-to-left scripts), a megabyte of text, queries of 10,000 terms, the limits of
the integer ids, and the GIL let go during batch calls.
"""

from __future__ import annotations

import random
import threading
import time

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wordcast import _core
from wordcast.corpus.workload import sample_posts
from wordcast.engines.compact_trie import CompactTrie
from wordcast.query.analysis import Analyser, compiled_analyser
from wordcast.query.explain import AnalysedText, compiled_readings
from wordcast.testing.bruteforce import BruteForce

REFERENCE = Analyser()
COMPILED = compiled_analyser()

any_text = st.text(
    alphabet=st.characters(codec=None, categories=None, exclude_categories=()), max_size=200
)
wordy = st.lists(
    st.sampled_from(
        [
            "The",
            "RUNNING",
            "naïve",
            "Straße",
            "ﬁle",
            "Works™",
            "hou\u200dse",
            "𝐋odash",
            "e\u0301",
            "שָׁלוֹם",
            "مرحبا",
            "数据",
            "①②",
            "\x00",
            "\ud800",
            "\u0558",
            "x" * 65,
        ]
    ),
    max_size=12,
).map(" ".join)


# Entities' markers next to one another, to words and to what ends a link (issue 53).
entity_rich = st.lists(
    st.sampled_from(
        [
            "#",
            "@",
            "$",
            ":",
            "//",
            "http",
            "HTTPS://",
            "https://",
            " ",
            "x",
            "_",
            "&",
            "1",
            "#Straße",
            "#ca\u200dfé",
            "@Guido_vR",
            "$AAPL",
            "AAPL1",
            "&#39;",
            "a.b/c?d=1).",
            "\u0558",
            "\ud800",
            "#123",
            "数据",
            "#数据",
            "<",
            '"',
            "\\",
            "é",
            "\u200b",
        ]
    ),
    max_size=16,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.one_of(any_text, wordy, entity_rich))
def test_the_compiled_analyser_reads_any_text_as_the_reference_does(text: str) -> None:
    assert COMPILED.terms(text) == REFERENCE.terms(text)
    [as_tuple] = COMPILED.term_tuples([text])  # type: ignore[attr-defined]
    assert frozenset(as_tuple) == REFERENCE.terms(text)
    assert len(as_tuple) == len(set(as_tuple))


ascii_text = st.text(alphabet=st.characters(max_codepoint=127), max_size=300)
ascii_words = st.lists(
    st.sampled_from(["The", "RUNNING", "runs", "a", "x" * 65, "Works", "12", "C3PO", "i.e.", "-"]),
    max_size=20,
).map(lambda words: " ".join(words))


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(ascii_text, ascii_words, any_text, wordy), max_size=8))
def test_compiled_readings_are_the_references_for_every_text(texts: list[str]) -> None:
    """What a match's explanation and its phrases read of a publication: the same terms at the
    same offsets (in code points), in the same order, at the same positions, and the same
    tokens' places, read compiled once, or left to the reference (None) only where a code
    point is one the tables cannot vouch for."""
    found = compiled_readings(texts)
    for text, reading in zip(texts, found, strict=True):
        if reading is None:
            assert not text.isascii(), text  # a code point the tables do not know
            continue
        parts, positions, spans = reading.parts(), reading.positions(), reading.spans()
        assert (parts, positions, spans) == _reference_reading(text), text
        assert list(parts) == list(positions)  # the order terms first occur, in both


def test_compiled_offsets_on_the_corpora() -> None:
    posts = sample_posts(3_000) + [p for p in sample_posts(20_000, seed=5) if not p.text.isascii()]
    texts = [post.text for post in posts]
    unicode = [t for t in texts if not t.isascii()]
    assert len(unicode) > 1_000
    read = 0
    for text, reading in zip(texts, compiled_readings(texts), strict=True):
        if reading is not None:
            read += not text.isascii()
            parts, positions, spans = reading.parts(), reading.positions(), reading.spans()
        assert (parts, positions, spans) == _reference_reading(text), text
        assert list(parts) == list(positions)  # the order terms first occur, in both
    assert read > 0.95 * len(unicode)


def _reference_reading(
    text: str,
) -> tuple[dict[str, bytes], dict[str, list[int]], list[tuple[int, int]]]:
    """Each term's occurrences as the reference finds them, written as a matched's JSON has
    them (in the order the terms first occur), where each term occurs, and each token's
    place."""
    analysed = AnalysedText(text)
    offsets = analysed.term_offsets
    parts = {term: orjson.dumps({term: where})[1:-1] for term, where in offsets.items()}
    return parts, analysed.positions, analysed.token_spans


def test_a_megabyte_of_text_and_a_batch_of_hostile_texts() -> None:
    megabyte = ("naïve Straße runs \u200d数据 ™ " * 40_000)[:1_000_000]
    assert COMPILED.terms(megabyte) == REFERENCE.terms(megabyte)
    hostile = ["\ud800\udfff", "\x00\x00", "\u0301" * 50, "a" * 10_000, "", " \t\n"]
    assert COMPILED.terms_many(hostile) == [REFERENCE.terms(t) for t in hostile]


def test_the_analyser_remembers_a_bounded_number_of_words() -> None:
    analyser = compiled_analyser()
    analyser.terms_many([f"word{k}x" for k in range(120_000)])
    analyser.terms("one more")
    assert len(analyser) <= 100_001  # type: ignore[arg-type]


def test_a_query_of_ten_thousand_terms() -> None:
    terms = [f"t{k}" for k in range(10_000)]
    compiled, reference = _core.CompactTrie(), CompactTrie[int]()
    compiled.add(1, terms)
    reference.add(1, terms)
    compiled.add(2, terms[:3])
    reference.add(2, terms[:3])
    for item in (terms, terms[:5000], [*terms[:3], "zz"]):
        assert sorted(compiled.match(item)) == sorted(reference.match(item))
    assert compiled.remove(1, terms)
    assert compiled.match(terms) == [2]


def test_ids_out_of_range_are_refused_with_a_python_error() -> None:
    trie = _core.CompactTrie()
    with pytest.raises(ValueError, match="ids go up to"):
        trie.add(2**31, ["a"])
    with pytest.raises(OverflowError):
        trie.add(-1, ["a"])
    with pytest.raises(ValueError, match="at least one term"):
        trie.add(1, [])
    with pytest.raises(TypeError):
        trie.add(1, [1, 2])  # type: ignore[list-item]
    assert trie.remove(1, ["never", "added"]) is False
    patterns = _core.Patterns()
    with pytest.raises(ValueError, match="one gap more"):
        patterns.add(1, ["abc"], [])


def test_batch_calls_let_other_threads_run() -> None:
    """match_many holds no GIL while it matches: a Python thread keeps counting meanwhile.

    The counting thread gives the GIL back after every count (``sleep(0)``), so the main thread
    never waits for it, and it can count during the call only if the call let the GIL go: held,
    it counts at most a switch or two, not thousands."""
    trie = _core.CompactTrie()
    trie.add_many(list(range(50_000)), [[f"a{k % 50}", f"b{k}"] for k in range(50_000)])
    batch = [[f"a{k % 50}" for k in range(50)] + [f"b{j}" for j in range(2_000)]] * 800
    counted = [0]
    running = threading.Event()
    stop = threading.Event()

    def count() -> None:
        running.set()
        while not stop.is_set():
            counted[0] += 1
            time.sleep(0)

    counter = threading.Thread(target=count)
    counter.start()
    running.wait()
    before = counted[0]
    trie.match_many(batch)
    during = counted[0] - before
    stop.set()
    counter.join()
    assert during > 1_000, f"the counting thread ran {during} times during the call"


def test_bulk_loads_and_heavy_churn_match_as_the_oracle_does() -> None:
    """``add_many`` (whose size trims the arenas after) and enough adds and removes for the
    trie to compact its arenas several times: every answer stays the brute-force one."""
    rng = random.Random(9)
    words = [f"w{k}" for k in range(300)]
    compiled, oracle = _core.CompactTrie(), BruteForce[int]()
    live: dict[int, list[str]] = {}

    def some_terms() -> list[str]:
        return rng.sample(words, rng.randint(1, 6))

    first = {k: some_terms() for k in range(20_000)}
    compiled.add_many(list(first), list(first.values()))
    for k, terms in first.items():
        oracle.add(k, terms)
    live.update(first)
    for step in range(60_000):
        if live and rng.random() < 0.5:
            k = rng.choice(list(live)) if step % 1_000 == 0 else next(iter(live))
            assert compiled.remove(k, live.pop(k))
            oracle.remove(k)
        else:
            k = 20_000 + step
            live[k] = some_terms()
            compiled.add(k, live[k])
            oracle.add(k, live[k])
        if step % 5_000 == 0:
            items = [rng.sample(words, 12) for _ in range(20)]
            got = compiled.match_many(items)
            assert [sorted(g) for g in got] == [sorted(oracle.match(i)) for i in items]
            ids, offsets = compiled.match_many_flat(items)
            assert (ids.format, offsets.format, len(offsets)) == ("I", "I", len(items) + 1)
            flat = [list(ids[offsets[k] : offsets[k + 1]]) for k in range(len(items))]
            assert flat == got  # the same ids, in the same order
    assert len(compiled) == len(live)
    assert compiled.is_compressed()


def test_a_bulk_load_with_a_bad_entry_adds_nothing() -> None:
    trie = _core.CompactTrie()
    trie.add(1, ["kept"])
    with pytest.raises(ValueError, match="has no term"):
        trie.add_many([2, 3], [["a"], []])
    with pytest.raises(ValueError, match="as many"):
        trie.add_many([2, 3], [["a"]])
    with pytest.raises(ValueError, match="ids go up to"):
        trie.add_many([2**31], [["a"]])
    assert len(trie) == 1
    assert trie.match(["a", "kept"]) == [1]


def test_each_refusal_is_a_class_of_its_own_under_core_error_a_value_error() -> None:
    """Typed exceptions, as pydantic-core's: a caller may catch the kind it can handle, and
    one catching ValueError keeps working."""
    assert issubclass(_core.CoreError, ValueError)
    for kind in (
        _core.SubscriptionError,
        _core.BatchShapeError,
        _core.PlacementError,
        _core.PatternError,
        _core.ModelError,
    ):
        assert issubclass(kind, _core.CoreError)
    with pytest.raises(_core.SubscriptionError, match="ids go up to"):
        _core.CompactTrie().add(2**31, ["a"])
    with pytest.raises(_core.PatternError, match="one gap more"):
        _core.Patterns().add(1, ["abc"], [])
    with pytest.raises(_core.PlacementError, match="no eligible matcher"):
        _core.PlanningView([0], {0: []}, 1.0, 0.0).place(["a"], [])
