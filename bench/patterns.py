"""Wildcard pattern engines compared (issue 6): ``make bench-patterns``.

Reproduces REtriever §4.2 with the paper's workload generator (Tables 4–5, in
:mod:`wordcast.testing.synthetic_patterns`) and repeats the comparison on real text:

* ``subscriptions``: matching time per publication against 100 … 100,000 subscriptions (Figs. 2-1
  and 2-2: 3 strings, 1 ``*``, 1 ``?``, 1 general overlap string);
* ``length``: against subscription length, 2 … 8 strings of 4 letters (Fig. 3: 10,000 subscriptions,
  200 overlap strings, 2 overlap strings each);
* ``stars``: against the number of ``*`` (Fig. 4: 6 strings, 3 of them overlaps, 10,000 subs);
* DFA state counts of noSplit, singleSplit and multipleSplit for each of those workloads;
* ``real``: short pypi posts against patterns cut from other pypi posts (1K … 100K), as posts per
  second, with add and delete latency at the largest size.

``--parts`` and ``--engines`` run a subset (``--parts real,add-delete --engines rust,aho-corasick``).

Every figure is one core, single-threaded, median of repeated passes over the same publications.
The ``hyperscan`` package is the outside peer where it installs; it compiles a whole database at
once (no incremental add), which takes minutes at 100,000 patterns, so it runs up to
``--hyperscan-max`` patterns.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable, Hashable
from typing import Any

from wordcast.corpus.workload import post_patterns, sample_posts
from wordcast.engines.ac_retriever import AhoCorasickREtriever
from wordcast.engines.compiled import CompiledPatterns
from wordcast.engines.naive_patterns import NaivePatterns
from wordcast.engines.nfa import NFAMatcher
from wordcast.engines.retriever import REtriever
from wordcast.query.patterns import Pattern, normalise, parse
from wordcast.testing.synthetic_patterns import PatternWorkload

from .common import RESULTS, machine, plot_engines, write_json

ENGINES: dict[str, Callable[[], Any]] = {
    "naive": NaivePatterns,
    "nfa": NFAMatcher,
    "retriever-paper": lambda: REtriever("none", recombination="paper"),
    "retriever": lambda: REtriever("none"),
    "retriever-single": lambda: REtriever("single"),
    "retriever-multiple": lambda: REtriever("multiple"),
    "aho-corasick": AhoCorasickREtriever,
    "compiled": CompiledPatterns,  # the compiled core (issue 9): the matcher's default
}
SPLITS = {"none": "noSplit", "single": "singleSplit", "multiple": "multipleSplit"}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Hyperscan:
    """The hyperscan package behind the engines' interface: one database, rebuilt on demand."""

    def __init__(self) -> None:
        import hyperscan

        self._hs = hyperscan
        self._patterns: list[tuple[Hashable, Pattern]] = []
        self._db: Any = None
        self.compile_s = 0.0

    def add(self, sub_id: Hashable, pattern: Pattern) -> None:
        self._patterns.append((sub_id, pattern))
        self._db = None

    def _compile(self) -> None:
        hs = self._hs
        flags = hs.HS_FLAG_DOTALL | hs.HS_FLAG_SINGLEMATCH | hs.HS_FLAG_UTF8 | hs.HS_FLAG_UCP
        started = time.perf_counter()
        self._db = hs.Database()
        self._db.compile(
            expressions=[p.regex().encode() for _, p in self._patterns],
            ids=list(range(len(self._patterns))),
            elements=len(self._patterns),
            flags=[flags] * len(self._patterns),
        )
        self.compile_s = time.perf_counter() - started

    def match(self, text: str) -> set[Hashable]:
        if self._db is None:
            self._compile()
        found: set[int] = set()

        def on_match(pattern_id: int, start: int, end: int, flags: int, context: Any) -> None:
            found.add(pattern_id)

        self._db.scan(text.encode(), match_event_handler=on_match)
        return {self._patterns[i][0] for i in found}


def hyperscan_available() -> bool:
    try:
        import hyperscan  # noqa: F401
    except ImportError:
        return False
    return True


def timed_engine(
    name: str, patterns: list[Pattern], texts: list[str], passes: int
) -> dict[str, Any]:
    make = Hyperscan if name == "hyperscan" else ENGINES[name]
    index = make()
    gc.collect()
    started = time.perf_counter()
    for sub_id, pattern in enumerate(patterns):
        index.add(sub_id, pattern)
    build_s = time.perf_counter() - started
    index.match("warm up: builds whatever is built lazily")
    seconds = []
    matches = 0
    for _ in range(passes):
        started = time.perf_counter()
        matches = sum(len(index.match(text)) for text in texts)
        seconds.append(time.perf_counter() - started)
    per_text = statistics.median(seconds) / len(texts)
    out = {
        "engine": name,
        "build_s": build_s,
        "ms_per_publication": per_text * 1e3,
        "publications_per_s": 1 / per_text,
        "matches_per_publication": matches / len(texts),
    }
    if isinstance(index, Hyperscan):
        out["compile_s"] = index.compile_s
    if isinstance(index, REtriever):
        out["states"] = index.state_count()
    return out


def compare(
    label: str,
    workloads: list[tuple[Any, PatternWorkload]],
    engines: list[str],
    passes: int,
    hyperscan_max: int,
) -> list[dict[str, Any]]:
    rows = []
    for x, workload in workloads:
        sources, publications = workload.generate()
        patterns = [parse(source, min_anchor=1) for source in sources]
        names = list(engines)
        if hyperscan_available() and workload.num_subscriptions <= hyperscan_max:
            names.append("hyperscan")
        for name in names:
            row = timed_engine(name, patterns, publications, passes)
            row.update({"x": x, "subscriptions": workload.num_subscriptions})
            row["mean_length"] = statistics.mean(len(s) for s in sources)
            rows.append(row)
            log(f"{label} x={x} {name}: {row['ms_per_publication']:.3f} ms/publication")
        check_agreement(rows[-len(names) :])
    return rows


def check_agreement(rows: list[dict[str, Any]]) -> None:
    counts = {round(r["matches_per_publication"], 6) for r in rows}
    if len(counts) != 1:
        raise SystemExit(f"engines disagree on the number of matches: {rows}")


def real_text(
    sizes: list[int],
    posts: int,
    engines: list[str],
    lengths: tuple[int, int],
    passes: int,
    hyperscan_max: int,
) -> list[dict[str, Any]]:
    pool = sample_posts(60_000, seed=5)
    texts = [normalise(p.text) for p in pool[50_000 : 50_000 + posts]]
    rows = []
    for size in sizes:
        sources = post_patterns(
            pool[:50_000], size, seed=6, min_length=lengths[0], max_length=lengths[1]
        )
        patterns = [parse(source) for source in sources]
        names = list(engines)
        if hyperscan_available() and size <= hyperscan_max:
            names.append("hyperscan")
        for name in names:
            # The naive engine tries every pattern on every post: a tenth of the posts will do.
            subset = texts[: max(20, posts // 10)] if name == "naive" else texts
            row = timed_engine(name, patterns, subset, passes)
            row.update({"subscriptions": size, "lengths": list(lengths)})
            rows.append(row)
            log(
                f"real {lengths} n={size} {name}: {row['publications_per_s']:.0f} posts/s, "
                f"{row['matches_per_publication']:.1f} matches/post"
            )
    return rows


def add_delete_latency(size: int, engine: str, samples: int = 1_000) -> dict[str, Any]:
    pool = sample_posts(60_000, seed=5)
    sources = post_patterns(pool[:50_000], size + samples, seed=9)
    patterns = [parse(source) for source in sources]
    index = ENGINES[engine]()
    for sub_id, pattern in enumerate(patterns[:size]):
        index.add(sub_id, pattern)
    adds, deletes = [], []
    for offset, pattern in enumerate(patterns[size:]):
        sub_id = size + offset
        started = time.perf_counter()
        index.add(sub_id, pattern)
        adds.append(time.perf_counter() - started)
    for offset in range(samples):
        started = time.perf_counter()
        index.remove(size + offset)
        deletes.append(time.perf_counter() - started)

    def summary(values: list[float]) -> dict[str, float]:
        ordered = sorted(values)
        return {
            "median_us": statistics.median(ordered) * 1e6,
            "p99_us": ordered[int(0.99 * (len(ordered) - 1))] * 1e6,
            "max_us": ordered[-1] * 1e6,
        }

    result = {"engine": engine, "subscriptions": size}
    result["add"] = summary(adds)
    result["delete"] = summary(deletes)
    log(f"add/delete at {size} ({engine}): {result}")
    return result


def plot(result: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    palette = plt.get_cmap("tab10")
    color = {name: palette(k) for k, name in enumerate(result["engines"])}

    def lines(ax: Any, rows: list[dict[str, Any]], key: str, skip: tuple[str, ...] = ()) -> None:
        plot_engines(ax, rows, "x", key, colors=color, skip=skip)

    fig, axes = plt.subplots(2, 2, figsize=(13, 10))
    subs = result["subscriptions"]
    lines(axes[0][0], subs, "ms_per_publication")
    axes[0][0].set(xscale="log", yscale="log", title="Fig. 2-1: vary number of subscriptions")
    lines(axes[0][1], subs, "ms_per_publication", skip=("naive",))
    axes[0][1].set(xscale="log", title="Fig. 2-2: without naive")
    lines(axes[1][0], result["length"], "ms_per_publication", skip=("naive",))
    axes[1][0].set(title="Fig. 3: vary length (strings of 4 letters), 10K subscriptions")
    lines(axes[1][1], result["stars"], "ms_per_publication", skip=("naive",))
    axes[1][1].set(title="Fig. 4: vary number of * operators, 10K subscriptions")
    for ax in axes.flat:
        ax.set_ylabel("ms per publication")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    axes[0][0].set_xlabel("subscriptions")
    axes[0][1].set_xlabel("subscriptions")
    axes[1][0].set_xlabel("strings per subscription")
    axes[1][1].set_xlabel("* per subscription")
    fig.tight_layout()
    fig.savefig(RESULTS / "patterns-retriever.png", dpi=110)

    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, (key, rows) in zip(axes, result["real"].items(), strict=False):
        plot_engines(ax, rows, "subscriptions", "publications_per_s", colors=color)
        ax.axhline(5_000, color="grey", linestyle="--", label="target at 100K")
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="patterns",
            ylabel="posts per second (one core)",
            title=f"pypi posts, patterns of {key} characters",
        )
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(RESULTS / "patterns-real-text.png", dpi=110)

    fig, ax = plt.subplots(figsize=(8, 4.5))
    states = result["states"]
    labels = list(states)
    width = 0.27
    for k, split in enumerate(SPLITS.values()):
        ax.bar(
            [i + (k - 1) * width for i in range(len(labels))],
            [states[label][split] for label in labels],
            width,
            label=split,
        )
    ax.set_xticks(range(len(labels)), labels, rotation=20, fontsize=8)
    ax.set(ylabel="DFA states", title="DFA size by split variant")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "patterns-states.png", dpi=110)


def state_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    split_of = {"retriever": "noSplit", "retriever-single": "singleSplit"}
    split_of["retriever-multiple"] = "multipleSplit"
    return {split_of[r["engine"]]: r["states"] for r in rows if r["engine"] in split_of}


PARTS = ("synthetic", "real", "add-delete")


def synthetic(
    result: dict[str, Any],
    engines: list[str],
    sizes: list[int],
    mid: int,
    passes: int,
    hyperscan_max: int,
) -> None:
    """REtriever §4.2's figures: against subscriptions, length and stars, and DFA state counts."""
    result["subscriptions"] = compare(
        "subscriptions",
        [(n, PatternWorkload(n, seed=1)) for n in sizes],
        engines,
        passes,
        hyperscan_max,
    )
    result["length"] = compare(
        "length",
        [
            (k, PatternWorkload(mid, num_overlap=200, num_sub_str=k, num_overlap_str=2, seed=2))
            for k in range(2, 9)
        ],
        engines,
        passes,
        hyperscan_max,
    )
    result["stars"] = compare(
        "stars",
        [
            (
                k,
                PatternWorkload(
                    mid, num_overlap=200, num_sub_str=6, num_overlap_str=3, num_star=k, seed=3
                ),
            )
            for k in (1, 2, 3)
        ],
        engines,
        passes,
        hyperscan_max,
    )
    result["states"] = {}
    for n in sizes:
        rows = [r for r in result["subscriptions"] if r["subscriptions"] == n]
        result["states"][f"{n} subs"] = state_counts(rows)
    for k in (2, 5, 8):
        rows = [r for r in result["length"] if r["x"] == k]
        result["states"][f"{k} strings"] = state_counts(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--hyperscan-max", type=int, default=10_000)
    parser.add_argument("--plot-only", action="store_true", help="redraw from patterns.json")
    parser.add_argument(
        "--parts", default=",".join(PARTS), help="comma-separated: " + ",".join(PARTS)
    )
    parser.add_argument("--engines", default="", help="comma-separated (default: all)")
    args = parser.parse_args()
    if args.plot_only:
        plot(json.loads((RESULTS / "patterns.json").read_text()))
        return
    engines = args.engines.split(",") if args.engines else list(ENGINES)
    unknown = set(engines) - set(ENGINES)
    parts = set(args.parts.split(","))
    if unknown or parts - set(PARTS):
        parser.error(f"choose engines from {list(ENGINES)} and parts from {list(PARTS)}")
    sizes = [100, 1_000, 10_000] if args.quick else [100, 1_000, 10_000, 100_000]
    mid = 2_000 if args.quick else 10_000
    passes = args.passes
    result: dict[str, Any] = {"machine": machine(), "engines": [*engines, "hyperscan"]}
    if "synthetic" in parts:
        synthetic(result, engines, sizes, mid, passes, args.hyperscan_max)
    real_engines = [e for e in engines if e != "retriever-multiple"]
    real_sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    posts = 300 if args.quick else 1_000
    if "real" in parts:
        result["real"] = {
            f"{low}-{high}": real_text(
                real_sizes, posts, real_engines, (low, high), passes, args.hyperscan_max
            )
            for low, high in ((8, 24), (12, 32))
        }
    if "add-delete" in parts:
        result["add_delete"] = [
            add_delete_latency(real_sizes[-1], engine)
            for engine in ("retriever", "aho-corasick", "compiled")
            if engine in engines
        ]
    name = "patterns-quick" if args.quick else "patterns"
    if parts != set(PARTS):  # a subset leaves the full run's figures alone
        name += "-" + "-".join(sorted(parts))
    path = write_json(name, result)
    if not args.quick and parts == set(PARTS):
        plot(result)
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
