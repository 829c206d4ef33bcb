"""A clone that is not beside the project's shared/ folder runs its unit suite and its demo on
the sample corpus the repository carries (corpus/README.md), with nothing from ../shared."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, wordcast_up_until
from wordcast.local.supervisor import free_port


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The repository's files (and the compiled core built in place) copied into a folder with
    no shared/ beside it, and an environment that imports wordcast from the copy."""
    copy = tmp_path_factory.mktemp("elsewhere") / "wordcast"
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = ROOT / name.decode()
        if source.is_file():
            (copy / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name.decode())
    for built in (ROOT / "src" / "wordcast").glob("_core*.so"):
        shutil.copy2(built, copy / "src" / "wordcast" / built.name)
    assert not (copy.parent / "shared").exists()
    env = {k: v for k, v in os.environ.items() if k not in ("WORDCAST_CORPUS_DIR", "REDIS_URL")}
    env["PYTHONPATH"] = str(copy / "src")  # ahead of the checkout's editable install
    return copy, env


def test_the_unit_suite_passes_in_a_clone_with_no_shared_folder(
    alone: tuple[Path, dict[str, str]],
) -> None:
    copy, env = alone
    located = subprocess.run(
        [sys.executable, "-c", "from wordcast.corpus.files import corpus_dir; print(corpus_dir())"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert located.stdout.strip() == str(copy / "corpus"), located.stderr
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "tests/unit"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def test_the_demo_shows_matches_in_a_clone_with_no_shared_folder(
    alone: tuple[Path, dict[str, str]],
) -> None:
    copy, env = alone
    with wordcast_up_until("match  ", "--port", str(free_port()), cwd=copy, env=env) as seen:
        pass
    assert any("match  " in line for line in seen), "".join(seen[-40:])
    assert any("demo:" in line for line in seen)
