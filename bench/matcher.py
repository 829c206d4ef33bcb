"""Matcher engines compared on the seeds' workloads (issue 3): ``make bench-matcher``.

Parts, each writing into ``bench/results/matcher.json`` and a PNG plot:

* ``streaming``: build time, memory (RSS growth per subscription, measured in a fresh process),
  nodes, matches per item and items per second of every single-post engine, for tweet-based
  (whole corpus posts) and query-like (package names) subscriptions at 100K and 1M, on short posts;
  plus trie vs counting index at 800K (the web-syndication thesis' largest size).
* ``operations``: thesis Table 4.6 (operations per item, trie probes vs postings visited) on the
  §3.3 synthetic generator: empirical, uniform and anti-correlated Zipf vocabularies.
* ``compiled``: the compiled core against the Python engines (:mod:`bench.compiled`);
* ``querynote``: Luwak thesis Fig. 11 (time per batch against batch size 200-1200) and Fig. 16
  (against 0.5M-2M query-like subscriptions) on long Debian documents, for QueryNote, "Luwak" and
  "FullyIndexed", with term statistics from the Spark job and cost constants measured here.

Every figure is one core of this machine, single-threaded, matching already analysed term sets.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import os
import pickle
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wordcast.corpus.files import debian_documents
from wordcast.corpus.workload import analysed_posts, package_name_queries
from wordcast.engines.compact_trie import CompactTrie
from wordcast.engines.querynote import MODES, CostModel, QueryNoteIndex
from wordcast.engines.termstats import TermOrder, TermStats
from wordcast.engines.trie import Trie
from wordcast.query.analysis import analyse
from wordcast.testing.counting import CountingIndex
from wordcast.testing.synthetic import DISTRIBUTIONS, generate, uniform_length, zipf_vocabulary

from .common import RESULTS, machine, write_json

CACHE = RESULTS / "cache"
Terms = frozenset[str]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cached(name: str, build: Callable[[], Any]) -> Any:
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"{name}.pickle"
    if path.exists():
        try:
            return pickle.loads(path.read_bytes())
        except (ImportError, AttributeError) as exc:  # pickled by an older layout of the code
            log(f"the cached {name} no longer loads ({exc}): preparing it again")
    log(f"preparing workload {name}…")
    value = build()
    path.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    return value


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# -- workloads ------------------------------------------------------------------------------------
def tweets(n: int) -> list[Terms]:
    return cached(f"tweets-{n}", lambda: analysed_posts(n, seed=1))


def queries(n: int) -> list[Terms]:
    return cached(f"queries-{n}", lambda: package_name_queries(n, seed=3))


def short_items() -> list[Terms]:
    return cached("short-items", lambda: analysed_posts(20_000, seed=2))


def long_documents() -> list[Terms]:
    return cached("debian", lambda: [analyse(t) for _, t in debian_documents()])


def corpus_stats() -> TermStats:
    """Document frequencies of the pypi posts, for the frequency-based trie orders."""

    def build() -> TermStats:
        return TermStats.from_documents(analysed_posts(200_000, seed=9))

    return cached("pypi-stats", build)


def debian_stats(min_pair_df: int) -> TermStats:
    """QueryNote's statistics from the Spark job, on the training half of the Debian corpus."""
    out = CACHE / f"debian-stats-{min_pair_df}.json"
    if not out.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        log("running the Spark term-stats job on the Debian training half…")
        root = Path(__file__).resolve().parents[1]
        subprocess.run(
            [
                sys.executable,
                "-m",
                "wordcast.spark_jobs.term_stats",
                "--corpus",
                "debian",
                "--limit",
                "15000",
                "--min-pair-df",
                str(min_pair_df),
                "--out",
                str(out),
            ],
            check=True,
            cwd=root,
        )
    return TermStats.load(out)


# -- streaming engines -----------------------------------------------------------------------------
def make_engine(name: str) -> Any:
    if name == "counting":
        return CountingIndex()
    kind, _, order = name.partition(":")
    term_order = TermOrder(order or "lexicographic", corpus_stats() if order else None)
    if kind == "trie":
        return Trie(term_order if order else None)
    return CompactTrie(term_order)


def _streaming_child(job: dict[str, Any], results: Any) -> None:
    subs = tweets(job["size"]) if job["workload"] == "tweets" else queries(job["size"])
    items = short_items()
    if job["engine"] != "counting" and ":" in job["engine"]:
        corpus_stats()  # load the order's statistics before the memory baseline
    gc.collect()
    before = rss_bytes()
    started = time.perf_counter()
    engine = make_engine(job["engine"])
    for i, terms in enumerate(subs):
        engine.add(i, terms)
    build = time.perf_counter() - started
    gc.collect()
    grown = rss_bytes() - before
    matched = 0
    done = 0
    started = time.perf_counter()
    deadline = started + job["seconds"]
    for item in items:
        matched += len(engine.match(item))
        done += 1
        if done % 256 == 0 and time.perf_counter() > deadline:
            break
    elapsed = time.perf_counter() - started
    result = {
        **job,
        "build_s": build,
        "bytes_per_subscription": grown / len(subs),
        "items_matched": done,
        "items_per_s": done / elapsed,
        "matches_per_item": matched / done,
    }
    if hasattr(engine, "node_count"):
        result["nodes"] = engine.node_count
    if job.get("operations"):
        probe = items[:2_000]
        result["operations_per_item"] = sum(engine.operations(i) for i in probe) / len(probe)
    results.put(result)


def in_fresh_process(target: Callable[..., None], job: dict[str, Any]) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    process = context.Process(target=target, args=(job, results))
    process.start()
    result: dict[str, Any] = results.get()
    process.join()
    return result


def streaming(sizes: list[int], seconds: float) -> list[dict[str, Any]]:
    engines = [
        "trie",
        "trie:frequent-first",
        "trie:rare-first",
        "compact:lexicographic",
        "compact:rare-first",
        "counting",
    ]
    out = []
    for workload in ("tweets", "queries"):
        for size in sizes:
            for engine in engines:
                job = {"engine": engine, "workload": workload, "size": size, "seconds": seconds}
                result = in_fresh_process(_streaming_child, job)
                log(
                    f"  {workload:8} {size:>9,} {engine:24} {result['items_per_s']:>10,.0f} items/s "
                    f"{result['bytes_per_subscription']:>6,.0f} B/sub  build {result['build_s']:.1f}s "
                    f"{result['matches_per_item']:.2f} matches/item"
                )
                out.append(result)
    return out


def trie_vs_counting(size: int, seconds: float) -> dict[str, Any]:
    got = {}
    for engine in ("compact:rare-first", "trie", "counting"):
        job = {
            "engine": engine,
            "workload": "tweets",
            "size": size,
            "seconds": seconds,
            "operations": engine != "compact:rare-first",
        }
        got[engine] = in_fresh_process(_streaming_child, job)
        log(f"  {size:,} tweets {engine}: {got[engine]['items_per_s']:,.0f} items/s")
    best = max(got["compact:rare-first"]["items_per_s"], got["trie"]["items_per_s"])
    return {
        "size": size,
        "runs": got,
        "speedup_best_trie_over_counting": best / got["counting"]["items_per_s"],
    }


# -- Table 4.6 -----------------------------------------------------------------------------------------
def operations(subscriptions: int, vocabularies: list[int]) -> list[dict[str, Any]]:
    out = []
    for vocab_size in vocabularies:
        vocabulary = zipf_vocabulary(vocab_size)
        for dist in DISTRIBUTIONS:
            subs = generate(vocabulary, subscriptions, uniform_length(1, 6), dist, seed=1)
            items = generate(vocabulary, 2_000, uniform_length(5, 50), dist, seed=2)
            trie: Trie[int] = Trie()
            counting: CountingIndex[int] = CountingIndex()
            compact: CompactTrie[int] = CompactTrie()
            for i, terms in enumerate(subs):
                trie.add(i, terms)
                counting.add(i, terms)
                compact.add(i, terms)
            row: dict[str, Any] = {
                "vocabulary": vocab_size,
                "distribution": dist,
                "subscriptions": subscriptions,
            }
            row["trie_ops_per_item"] = statistics.mean(trie.operations(i) for i in items)
            row["counting_ops_per_item"] = statistics.mean(counting.operations(i) for i in items)
            for name, engine in (("trie", trie), ("compact", compact), ("counting", counting)):
                started = time.perf_counter()
                matched = done = 0
                for item in items:  # capped: the counting index can take minutes here
                    matched += len(engine.match(item))
                    done += 1
                    if done % 100 == 0 and time.perf_counter() - started > 10:
                        break
                row[f"{name}_items_per_s"] = done / (time.perf_counter() - started)
                row["matches_per_item"] = matched / done
            row["trie_nodes"], row["compact_nodes"] = trie.node_count, compact.node_count
            log(
                f"  V={vocab_size:,} {dist:15} trie {row['trie_ops_per_item']:,.0f} ops/item, "
                f"counting {row['counting_ops_per_item']:,.0f}; {row['matches_per_item']:.1f} matches"
            )
            out.append(row)
    return out


# -- QueryNote ------------------------------------------------------------------------------------------
def querynote(
    query_counts: list[int], batch_sizes: list[int], main_count: int, min_pair_df: int
) -> dict[str, Any]:
    docs = long_documents()
    stats = debian_stats(min_pair_df)
    test = docs[15_000:]
    out: dict[str, Any] = {"by_batch_size": [], "by_queries": [], "documents": len(test)}
    costs_by_batch = {}
    # The constants are timed on queries as the engine holds them: by decreasing weight.
    ordering = QueryNoteIndex[int](stats)
    sample = [list(ordering.sort_terms(q)) for q in queries(50_000)[:20_000]]
    for b in sorted(set(batch_sizes) | {600}):
        costs_by_batch[b] = CostModel.measure(test[:b], sample)
    out["costs"] = {b: vars(c) for b, c in costs_by_batch.items()}

    def build(count: int, mode: str, batch: int) -> tuple[QueryNoteIndex[int], float]:
        engine: QueryNoteIndex[int] = QueryNoteIndex(stats, mode, costs_by_batch[batch])
        started = time.perf_counter()
        for i, q in enumerate(queries(count)):
            engine.add(i, q)
        return engine, time.perf_counter() - started

    def time_batches(
        engine: QueryNoteIndex[int], batch: int, limit: float = 60.0
    ) -> tuple[float, int]:
        times, matches = [], 0
        budget = time.perf_counter() + limit
        for start in range(0, len(test) - batch + 1, batch):
            chunk = test[start : start + batch]
            started = time.perf_counter()
            matches += len(engine.match_batch(chunk))
            times.append(time.perf_counter() - started)
            if time.perf_counter() > budget and len(times) >= 3:
                break
        return statistics.median(times), matches // max(len(times), 1)

    for mode in MODES:
        engine = None
        for batch in batch_sizes:
            # Only QueryNote's choice of extra terms depends on the batch size (§5.5.2).
            if engine is None or mode == "querynote":
                engine, built = build(main_count, mode, batch)
            per_batch, matches = time_batches(engine, batch)
            row = {
                "mode": mode,
                "batch": batch,
                "queries": main_count,
                "seconds_per_batch": per_batch,
                "extra_terms": engine.extra_terms_stored,
                "build_s": built,
                "matches_per_batch": matches,
                "distinct_queries": engine.distinct_queries,
            }
            log(
                f"  {mode:14} batch {batch:5} {per_batch * 1000:9.1f} ms/batch, "
                f"{engine.extra_terms_stored:,} extra terms"
            )
            out["by_batch_size"].append(row)
        del engine
        gc.collect()
    for mode in MODES:
        for count in query_counts:
            engine, built = build(count, mode, 600)
            per_batch, matches = time_batches(engine, 600)
            out["by_queries"].append(
                {
                    "mode": mode,
                    "queries": count,
                    "seconds_per_batch": per_batch,
                    "extra_terms": engine.extra_terms_stored,
                    "build_s": built,
                    "matches_per_batch": matches,
                }
            )
            log(f"  {mode:14} {count:>9,} queries {per_batch * 1000:9.1f} ms/batch of 600")
            del engine
            gc.collect()
    at = {r["mode"]: r for r in out["by_batch_size"] if r["batch"] == 600}
    if len(at) == 3:
        out["speedup_querynote_over_luwak_600"] = (
            at["luwak"]["seconds_per_batch"] / at["querynote"]["seconds_per_batch"]
        )
        out["querynote_time_vs_fully_indexed_600"] = (
            at["querynote"]["seconds_per_batch"] / at["fully-indexed"]["seconds_per_batch"]
        )
        out["querynote_extra_terms_vs_fully_indexed"] = (
            at["querynote"]["extra_terms"] / at["fully-indexed"]["extra_terms"]
        )
    return out


def headline(count: int, min_pair_df: int, batch: int = 600, rounds: int = 3) -> dict[str, Any]:
    """Every engine on the same batches of long documents, interleaved, medians of ``rounds``.

    The figures the issue's QueryNote targets and the matcher's choice of engine rest on, measured
    side by side in one run so that the machine's noise hits them all alike.
    """
    test = long_documents()[15_000:]
    stats = debian_stats(min_pair_df)
    ordering = QueryNoteIndex[int](stats)
    sample = [list(ordering.sort_terms(q)) for q in queries(50_000)[:20_000]]
    costs = CostModel.measure(test[:batch], sample)
    engines: dict[str, Any] = {}
    for mode in MODES:
        engines[mode] = QueryNoteIndex(stats, mode, costs)
    engines["compact-trie"] = make_engine("compact:lexicographic")
    engines["trie"] = make_engine("trie")
    for name, engine in engines.items():
        started = time.perf_counter()
        for i, q in enumerate(queries(count)):
            engine.add(i, q)
        log(f"  built {name} in {time.perf_counter() - started:.1f}s")
    batches = [test[k : k + batch] for k in range(0, 10 * batch, batch)]
    times: dict[str, list[float]] = {name: [] for name in engines}
    matches: dict[str, int] = {}
    for _ in range(rounds):
        for name, engine in engines.items():
            started = time.perf_counter()
            if hasattr(engine, "match_batch"):
                found = sum(len(engine.match_batch(b)) for b in batches)
            else:
                found = sum(len(engine.match(doc)) for b in batches for doc in b)
            times[name].append((time.perf_counter() - started) / len(batches))
            matches[name] = found
    assert len(set(matches.values())) == 1, f"engines disagree: {matches}"
    rows: dict[str, dict[str, Any]] = {
        name: {
            "seconds_per_batch": statistics.median(t),
            "rounds": t,
            "extra_terms": getattr(engines[name], "extra_terms_stored", None),
        }
        for name, t in times.items()
    }
    for name, row in rows.items():
        log(f"  {name:14} {row['seconds_per_batch'] * 1000:7.1f} ms per batch of {batch}")
    qn, luwak, full = (
        rows[m]["seconds_per_batch"] for m in ("querynote", "luwak", "fully-indexed")
    )
    return {
        "queries": count,
        "batch": batch,
        "costs": vars(costs),
        "engines": rows,
        "matches_per_batch": next(iter(matches.values())) / len(batches),
        "speedup_querynote_over_luwak": luwak / qn,
        "querynote_time_vs_fully_indexed": qn / full,
        "querynote_extra_terms_vs_fully_indexed": rows["querynote"]["extra_terms"]
        / rows["fully-indexed"]["extra_terms"],
    }


# -- plots -------------------------------------------------------------------------------------------------
def plot(result: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if result.get("streaming"):
        rows = result["streaming"]
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        labels = sorted({r["engine"] for r in rows}, key=[r["engine"] for r in rows].index)
        groups = sorted({(r["workload"], r["size"]) for r in rows})
        width = 0.8 / len(groups)
        for g, (workload, size) in enumerate(groups):
            values = {
                r["engine"]: r for r in rows if (r["workload"], r["size"]) == (workload, size)
            }
            xs = [i + g * width for i in range(len(labels))]
            axes[0].bar(
                xs, [values[e]["items_per_s"] for e in labels], width, label=f"{workload} {size:,}"
            )
            axes[1].bar(
                xs,
                [values[e]["bytes_per_subscription"] for e in labels],
                width,
                label=f"{workload} {size:,}",
            )
        for ax, title in zip(
            axes, ("short posts / s (one core)", "bytes per subscription (RSS)"), strict=True
        ):
            ax.set_xticks(
                [i + 0.4 - width / 2 for i in range(len(labels))], labels, rotation=30, ha="right"
            )
            ax.set_yscale("log")
            ax.set_title(title)
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(RESULTS / "matcher-streaming.png", dpi=120)
    if result.get("operations"):
        rows = result["operations"]
        fig, ax = plt.subplots(figsize=(8, 4))
        names = [f"{r['distribution']}\nV={r['vocabulary']:,}" for r in rows]
        positions = range(len(rows))
        ax.bar(
            [x - 0.2 for x in positions],
            [r["trie_ops_per_item"] for r in rows],
            0.4,
            label="trie probes",
        )
        ax.bar(
            [x + 0.2 for x in positions],
            [r["counting_ops_per_item"] for r in rows],
            0.4,
            label="counting postings",
        )
        ax.set_xticks(list(positions), names, fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("operations per item")
        ax.set_title("Table 4.6: matching operations, trie vs inverted file")
        ax.legend()
        fig.tight_layout()
        fig.savefig(RESULTS / "matcher-table-4-6.png", dpi=120)
    if result.get("querynote"):
        qn = result["querynote"]
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for ax, rows_key, x_key in (
            (axes[0], "by_batch_size", "batch"),
            (axes[1], "by_queries", "queries"),
        ):
            for mode in MODES:
                rows = [r for r in qn[rows_key] if r["mode"] == mode]
                ax.plot(
                    [r[x_key] for r in rows],
                    [r["seconds_per_batch"] * 1000 for r in rows],
                    marker="o",
                    label=mode,
                )
        axes[0].set_xlabel("batch size (documents)")
        axes[0].set_title("Fig. 11: time per batch")
        axes[1].set_xlabel("query-like subscriptions")
        axes[1].set_title("Fig. 16: scalability, batches of 600")
        for ax in axes:
            ax.set_ylabel("ms per batch")
            ax.legend()
        fig.tight_layout()
        fig.savefig(RESULTS / "matcher-querynote.png", dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="streaming,operations,querynote,headline,compiled")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--seconds", type=float, default=8.0, help="time cap per throughput figure")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    quick = args.quick
    result: dict[str, Any] = {"benchmark": "matcher", "machine": machine(), "quick": quick}
    name = "matcher-quick" if quick else "matcher"  # a smoke run leaves the real figures be
    path = RESULTS / f"{name}.json"
    if path.exists():  # keep the parts not rerun
        import json

        result = {**json.loads(path.read_text()), **result}
    if "streaming" in parts:
        log("streaming engines on short posts:")
        result["streaming"] = streaming(
            [10_000, 50_000] if quick else [100_000, 1_000_000], args.seconds
        )
        result["trie_vs_counting"] = trie_vs_counting(20_000 if quick else 800_000, args.seconds)
    if "operations" in parts:
        log("Table 4.6, synthetic workloads:")
        result["operations"] = operations(
            10_000 if quick else 100_000, [10_000] if quick else [10_000, 100_000, 800_000]
        )
    if "querynote" in parts:
        log("QueryNote on long documents:")
        result["querynote"] = querynote(
            [50_000, 100_000] if quick else [500_000, 1_000_000, 1_500_000, 2_000_000],
            [200, 600] if quick else [200, 400, 600, 800, 1000, 1200],
            50_000 if quick else 1_000_000,
            min_pair_df=50,
        )
    if "headline" in parts:
        log("every engine on the same batches of long documents:")
        result["headline"] = headline(50_000 if quick else 1_000_000, min_pair_df=50)
    if "compiled" in parts:
        from .compiled import compiled_part

        log("the compiled core against the Python engines:")
        result["compiled"] = compiled_part(quick)
    write_json(name, result)
    if not quick:
        plot(result)
    log(f"results in {path}")


if __name__ == "__main__":
    main()
