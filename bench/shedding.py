"""Load shedding (S³-TM §6.5): ``make bench-shedding`` / ``python -m bench.shedding``.

Fig. 6.22: the accuracy of matching (the share of the oracle's matches still produced) and the load
shed (the share of publication copies not sent) against the shedding threshold m, the most
matchers a publication is sent to, for consensus and subscription shedding, and for keeping m of
its matchers at random as the baseline the utilities must beat. SALB with hot-word splitting maps
N = 16 matchers, learned on the history's posts; tweet-based subscriptions are placed with LASP on
each matcher's trie, and every routed post is matched there, so a match counts as kept exactly when
its subscription's matcher is among those the post still goes to.

Fig. 6.23: the shedding level of one router as its input rate steps 16,000 → 32,000 → 2,000 →
16,000 publications/s, simulated: :class:`wordcast.routing.shedding.Controller` adapts every second on the
router's buffer, which fills at the input rate and drains at the matchers' capacity (chosen so
16,000/s fits without shedding) divided by the copies each publication costs at the current
level, with |K(P, M)| drawn from the same routed pypi posts. The accuracy over time is Fig. 6.22's
at the level in force.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections.abc import Sequence
from typing import Any

from wordcast.routing.lasp import LinearCost
from wordcast.routing.mapping import random_draw, route, word_votes
from wordcast.routing.shedding import (
    Controller,
    Levels,
    SpreadHistogram,
    consensus_scores,
    keep,
    subscription_scores,
)

from .common import RESULTS, machine, write_json
from .routing import Post, corpus, deploy, learn, shuffled_history, tweet_subscriptions

STRATEGIES = ("consensus", "subscription", "random")
# LASP's f as fitted by bench.routing on this corpus (the router's defaults).
COST = LinearCost(0.00037, 16.1)


def routed_matches(
    mapping: Any, subs: Sequence[Post], posts: Sequence[Post], seed: int
) -> tuple[list[tuple[Post, dict[str, int], dict[int, int]]], list[dict[str, int]]]:
    """For every post that reaches a matcher: its terms, the hot-word copies it drew and the
    matches each of its targets finds; and each matcher's word map H(i) with counts."""
    deployment = deploy(mapping, subs, COST)
    draw = random_draw(random.Random(seed))
    routed = []
    for terms in posts:
        targets, drawn = route(terms, deployment.subscribed, mapping, draw)
        if targets:
            found = {
                matcher: sum(len(trie.match(terms)) for trie in deployment.meets(matcher, drawn))
                for matcher in targets
            }
            routed.append((terms, drawn, found))
    return routed, [dict(counts) for counts in deployment.word_counts]


def accuracy_curve(
    routed: Sequence[tuple[Post, dict[str, int], dict[int, int]]],
    word_maps: list[dict[str, int]],
    mapping: Any,
    subscribed: set[str],
    thresholds: Sequence[float],
    seed: int,
) -> list[dict[str, Any]]:
    total_matches = sum(sum(found.values()) for _, _, found in routed)
    total_copies = sum(len(found) for _, _, found in routed)
    word_map_of = dict(enumerate(word_maps))
    rows = []
    for strategy in STRATEGIES:
        rng = random.Random(seed)
        for m in thresholds:
            kept_matches = kept_copies = 0
            for terms, drawn, found in routed:
                targets = list(found)
                if strategy == "consensus":
                    scores = consensus_scores(
                        word_votes(terms, subscribed, mapping, drawn), targets
                    )
                elif strategy == "subscription":
                    scores = subscription_scores(terms, targets, word_map_of)
                else:
                    scores = dict.fromkeys(targets, 0.0)  # all tied: keep() draws at random
                kept = keep(scores, m, rng.random)
                kept_copies += len(kept)
                kept_matches += sum(found[matcher] for matcher in kept)
            rows.append(
                {
                    "strategy": strategy,
                    "threshold": m,
                    "accuracy": kept_matches / total_matches,
                    "load_shed": 1 - kept_copies / total_copies,
                }
            )
    return rows


def simulate_spike(
    sizes: Sequence[int], matchers: int, buffer: int, seconds_per_phase: int, seed: int
) -> dict[str, Any]:
    """Fig. 6.23: the controller driven by a fluid model of one router's buffer."""
    levels = Levels(k=7, step=1, matchers=matchers)
    controller = Controller(levels, buffer=buffer)
    histogram = SpreadHistogram()
    mean_copies = sum(sizes) / len(sizes)
    capacity = 1.1 * 16_000 * mean_copies  # copies/s: 16,000/s fits, 32,000/s does not
    phases = [16_000, 32_000, 2_000, 16_000]
    rng = random.Random(seed)
    step = 0.1  # the buffer moves in tenths of a second; the level adapts every second
    timeline = []
    fullness = 0.0
    for second in range(len(phases) * seconds_per_phase):
        rate = phases[second // seconds_per_phase]
        for _ in range(round(1 / step)):
            sample = rng.choices(sizes, k=200)
            for size in sample:
                histogram.record(size, rate * step / len(sample))
            threshold = controller.threshold
            copies = sum(min(size, threshold) for size in sample) / len(sample)
            fullness = max(0.0, fullness + rate * step - capacity * step / copies)
        loads = [histogram.load(levels.threshold(lv)) for lv in range(levels.max_level + 1)]
        level = controller.adapt(fullness, loads)
        histogram.decay(0.5)
        timeline.append(
            {
                "second": second,
                "input_rate": rate,
                "level": level,
                "threshold": None if math.isinf(controller.threshold) else controller.threshold,
                "fullness": fullness / buffer,
                "ratio": controller.ratio,
            }
        )
    return {
        "capacity_copies_per_s": capacity,
        "mean_copies": mean_copies,
        "buffer": buffer,
        "max_level": levels.max_level,
        "timeline": timeline,
    }


def plot(results: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.6))
    styles = {"consensus": "tab:blue", "subscription": "tab:orange", "random": "tab:gray"}
    shed_axis = left.twinx()
    for strategy, colour in styles.items():
        rows = [r for r in results["accuracy"] if r["strategy"] == strategy]
        xs = [r["threshold"] for r in rows]
        left.plot(xs, [r["accuracy"] for r in rows], "-o", color=colour, label=strategy)
        shed_axis.plot(xs, [r["load_shed"] for r in rows], "--", color=colour)
    left.set_xlabel("shedding threshold m (most matchers per publication)")
    left.set_ylabel("accuracy (solid)")
    shed_axis.set_ylabel("load shed (dashed)")
    left.invert_xaxis()
    left.legend(loc="lower left")
    left.set_title(f"Fig. 6.22: accuracy and load shed, N = {results['matchers']}")
    spike = results["spike"]
    seconds = [p["second"] for p in spike["timeline"]]
    right.plot(seconds, [p["input_rate"] for p in spike["timeline"]], color="tab:blue")
    right.set_xlabel("time (s)")
    right.set_ylabel("input rate (publications/s, solid)")
    level_axis = right.twinx()
    level_axis.plot(seconds, [p["level"] for p in spike["timeline"]], "--", color="tab:red")
    level_axis.set_ylabel("shedding level (dashed)")
    level_axis.set_ylim(0, spike["max_level"] + 0.5)
    right.set_title("Fig. 6.23: input rate and shedding level (simulated router)")
    fig.tight_layout()
    fig.savefig(RESULTS / "shedding.png", dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=int, default=100_000, help="posts SALB learns on")
    parser.add_argument("--eval", type=int, default=20_000, help="posts routed and matched")
    parser.add_argument("--subs", type=int, default=100_000)
    parser.add_argument("--matchers", type=int, default=16)
    parser.add_argument("--buffer", type=int, default=100_000, help="the simulated router's b")
    parser.add_argument("--phase-seconds", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.train, args.eval, args.subs, args.phase_seconds = 5_000, 2_000, 2_000, 60
        args.buffer = 20_000
    started = time.perf_counter()
    history = shuffled_history(corpus())
    training = history[: args.train]
    evaluation = history[args.train : args.train + args.eval]
    subs = tweet_subscriptions(history[args.train + args.eval :], args.subs, 1)
    mapping = learn("salb", training, args.matchers, None)
    print(
        f"SALB learned for N = {args.matchers} ({time.perf_counter() - started:.0f}s)", flush=True
    )
    routed, word_maps = routed_matches(mapping, subs, evaluation, seed=11)
    subscribed = set().union(*subs)
    spread = sum(len(found) for _, _, found in routed) / len(evaluation)
    print(f"routed and matched: spread {spread:.2f} ({time.perf_counter() - started:.0f}s)")
    thresholds = [float(m) for m in range(args.matchers - 1, 0, -1)]
    accuracy = accuracy_curve(routed, word_maps, mapping, subscribed, thresholds, seed=5)
    sizes = [len(found) for _, _, found in routed]
    spike = simulate_spike(sizes, args.matchers, args.buffer, args.phase_seconds, seed=9)
    results = {
        "machine": machine(),
        "matchers": args.matchers,
        "train": args.train,
        "eval": args.eval,
        "subscriptions": args.subs,
        "spread": spread,
        "matches": sum(sum(found.values()) for _, _, found in routed),
        "accuracy": accuracy,
        "spike": spike,
        "seconds": time.perf_counter() - started,
    }
    name = "shedding-quick" if args.quick else "shedding"
    path = write_json(name, results)
    plot(results)
    print(f"wrote {path} and {RESULTS / 'shedding.png'}")
    for row in accuracy:
        print(
            f"  {row['strategy']:>12} m = {row['threshold']:>4g}: accuracy {row['accuracy']:.3f}, "
            f"load shed {row['load_shed']:.3f}"
        )
    levels = [p["level"] for p in spike["timeline"]]
    phase = args.phase_seconds
    for k, rate in enumerate((16_000, 32_000, 2_000, 16_000)):
        window = levels[k * phase : (k + 1) * phase]
        print(f"  spike phase {rate:>6,}/s: level max {max(window)}, at its end {window[-1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
