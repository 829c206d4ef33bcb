"""The `wordcast` command line's own plumbing: `wordcast bench` runs what `make bench` runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from wordcast.cli.bench import BENCHMARKS, module_of

ROOT = Path(__file__).resolve().parent.parent


def test_bench_offers_exactly_the_benchmarks_make_bench_runs() -> None:
    makefile = (ROOT / "Makefile").read_text()
    found = re.search(r"^bench:(.*)$", makefile, re.MULTILINE)
    assert found is not None
    targets = [name.removeprefix("bench-") for name in found.group(1).split()]
    assert sorted(targets) == sorted(BENCHMARKS)
    for name in BENCHMARKS:
        assert f"-m {module_of(name)}\n" in makefile, name


def test_bench_runs_the_benchmark_of_the_checkout_from_anywhere(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "wordcast", "bench", "migration", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert f"in {ROOT}: -m bench.migration --help" in result.stdout
    assert "usage: migration.py" in result.stdout


def test_bench_refuses_an_unknown_benchmark_naming_the_known_ones() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "wordcast", "bench", "speed"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "invalid choice: 'speed'" in result.stderr
    assert all(f"'{name}'" in result.stderr for name in BENCHMARKS)
