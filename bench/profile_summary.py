"""Where a service's CPU went, from py-spy's collapsed stacks (``bench.e2e --profile raw``).

``python -m bench.profile_summary results/profiles/NAME-router.txt [--top 30]`` prints the
functions with the most samples on top of the stack (self) and anywhere in it (total), each as a
share of the samples: the text a flame graph shows, for comparing runs back to back.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path


def summary(path: Path) -> tuple[int, Counter[str], Counter[str]]:
    """Samples in all, and per frame its self and total samples."""
    own: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        frames = [f.split(" (")[0] + " " + f.split("/")[-1].rstrip(")") for f in stack.split(";")]
        total += n
        own[frames[-1]] += n
        for frame in set(frames):
            anywhere[frame] += n
    return total, own, anywhere


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    for path in args.paths:
        total, own, anywhere = summary(path)
        print(f"== {path.name}: {total:,} samples")
        print("-- self")
        for frame, n in own.most_common(args.top):
            print(f"{100 * n / total:5.1f}%  {frame}")
        print("-- total")
        for frame, n in anywhere.most_common(args.top):
            print(f"{100 * n / total:5.1f}%  {frame}")


if __name__ == "__main__":
    main()
