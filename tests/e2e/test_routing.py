"""Hash routing is stable across processes: never Python's salted ``hash()`` (invariant 3)."""

from __future__ import annotations

import subprocess
import sys

from wordcast.routing.mapping import stable_hash

WORDS = ["white", "hous", "obama", "health", "python", "librari", "数据", "café"]


def test_stable_hash_is_the_same_in_every_process() -> None:
    script = f"from wordcast.routing.mapping import stable_hash; print([stable_hash(w) for w in {WORDS!r}])"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={"PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "random")
    }
    assert outputs == {f"{[stable_hash(w) for w in WORDS]}\n"}
