"""``wordcast bench NAME``: the benchmarks ``make bench`` runs, from a source checkout."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from wordcast.cli.common import fail

# The benchmarks `make bench` runs (bench/*.py of a source checkout; BENCHMARKS.md has figures).
BENCHMARKS = (
    "e2e", "matcher", "patterns", "boolean", "explain", "languages", "entities", "backfill",
    "routing", "routing-held", "migration", "shedding",
    "subscribe", "ingest", "scale", "delivery", "stream", "console", "scale-out", "capacity",
)  # fmt: skip


def module_of(name: str) -> str:
    """``make bench-routing-held`` runs ``python -m bench.routing_held``."""
    return f"bench.{name.replace('-', '_')}"


def _source_checkout() -> Path | None:
    """The wordcast source tree the benchmarks live in: around the working directory, or the one
    an editable install runs from. A wheel does not ship them."""
    here = Path.cwd().resolve()
    package = Path(__file__).resolve().parents[3]
    for root in (here, *here.parents, package):
        if (root / "bench" / "__init__.py").is_file() and (root / "pyproject.toml").is_file():
            return root
    return None


def cmd_bench(args: argparse.Namespace) -> int:
    """Run one benchmark as `make bench-NAME` does; its results go to bench/results/."""
    import subprocess

    root = _source_checkout()
    if root is None:
        return fail(
            "the benchmarks run from a source checkout of wordcast (its bench/ directory): "
            "clone the repository and run this there, or make bench"
        )
    command = [sys.executable, "-m", module_of(args.name), *args.options]
    print(f"in {root}: {' '.join(command[1:])}", flush=True)
    return subprocess.run(command, cwd=root).returncode


def register(sub: Any) -> None:
    """Add this module's commands to the ``wordcast`` parser."""
    bench = sub.add_parser(
        "bench",
        help="run a benchmark (from a source checkout), as make bench-NAME does",
        description="Runs python -m bench.NAME in the source checkout; results (JSON, plots) go "
        "to bench/results/ (WORDCAST_BENCH_DIR elsewhere). Options after NAME go to the "
        "benchmark: wordcast bench routing --help.",
    )
    bench.add_argument("name", choices=BENCHMARKS, help="the benchmark")
    bench.add_argument("options", nargs=argparse.REMAINDER, help="the benchmark's own options")
    bench.set_defaults(func=cmd_bench)
