"""Helpers the benchmarks share: where results go, medians, a JSON + PNG writer."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

RESULTS = Path(os.environ.get("WORDCAST_BENCH_DIR", Path(__file__).resolve().parent / "results"))


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def write_json(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return path


def plot_engines(
    ax: Any,
    rows: list[dict[str, Any]],
    x: str,
    y: str,
    *,
    labels: dict[str, str] | None = None,
    colors: dict[str, Any] | None = None,
    skip: tuple[str, ...] = (),
) -> None:
    """One line per ``engine`` of ``rows`` (in order of first appearance): ``y`` against ``x``."""
    for name in dict.fromkeys(r["engine"] for r in rows):
        if name in skip:
            continue
        mine = [r for r in rows if r["engine"] == name]
        style = {"color": colors[name]} if colors else {}
        label = (labels or {}).get(name, name)
        ax.plot([r[x] for r in mine], [r[y] for r in mine], marker="o", label=label, **style)
