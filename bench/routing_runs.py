"""Medians over several ``bench.routing`` runs: ``python -m bench.routing_runs A.json B.json …``.

One run's throughputs come from timings on a shared machine and from one LDA topic set, so the
claims about SALB against the other mappings are judged on the median, over runs, of SALB's
throughput divided by each alternative's in the same configuration (above 1: SALB is faster).
Writes ``routing-runs.json`` beside the other results and prints a Markdown table; ``--metric``
takes the deterministic throughputs instead (trie lookups counted, or one unit per publication),
which need no median but show how far the timings wander from them.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from .common import write_json

RIVALS = ("hash", "gC", "gFC", "gFCL", "gNFCL")


def ratios(
    run: dict[str, Any], metric: str = "throughput"
) -> dict[tuple[str, int], dict[str, float]]:
    """(workload, N) -> rival -> SALB's ``metric`` / the rival's, for one run's N sweep."""
    by_point: dict[tuple[str, int], dict[str, float]] = {}
    for row in run["nodes"]:
        by_point.setdefault((row["workload"], row["N"]), {})[row["algorithm"]] = row[metric]
    return {
        point: {rival: cells["salb"] / cells[rival] for rival in RIVALS if rival in cells}
        for point, cells in by_point.items()
    }


def medians(runs: list[dict[str, Any]], metric: str = "throughput") -> list[dict[str, Any]]:
    per_run = [ratios(run, metric) for run in runs if all(metric in row for row in run["nodes"])]
    points = sorted(set().union(*per_run))
    rows = []
    for workload, n in points:
        present = [r[(workload, n)] for r in per_run if (workload, n) in r]
        row: dict[str, Any] = {"workload": workload, "N": n, "runs": len(present)}
        for rival in RIVALS:
            values = [r[rival] for r in present if rival in r]
            row[rival] = {"median": statistics.median(values), "runs": values}
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="routing.json files of separate runs")
    parser.add_argument(
        "--metric",
        choices=("throughput", "lookup_throughput", "unit_throughput"),
        default="throughput",
        help="timed matching cost, trie lookups counted, or one unit per publication (Eq. 3.6)",
    )
    args = parser.parse_args(argv)
    runs = [json.loads(path.read_text()) for path in args.runs]
    rows = medians(runs, args.metric)
    if not rows:
        parser.error(f"no run records {args.metric}")
    name = "routing-runs" if args.metric == "throughput" else f"routing-runs-{args.metric}"
    path = write_json(
        name, {"runs": [str(p) for p in args.runs], "metric": args.metric, "points": rows}
    )
    print(
        f"SALB ÷ rival ({args.metric}), median of {max(r['runs'] for r in rows)} runs "
        f"(each run's values in brackets); {path}\n"
    )
    print("| workload | N | " + " | ".join(RIVALS) + " |")
    print("|---|---|" + "---|" * len(RIVALS))
    for row in rows:
        cells = [
            f"{row[r]['median']:.2f} ({', '.join(f'{v:.2f}' for v in row[r]['runs'])})"
            for r in RIVALS
        ]
        print(f"| {row['workload']} | {row['N']} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
