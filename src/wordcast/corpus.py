"""Reading the shared corpora (``../shared/corpus`` beside the project, see its README).

The location is ``WORDCAST_CORPUS_DIR`` if set, else ``shared/corpus`` in the parent of the current
directory or of the source checkout.
"""

from __future__ import annotations

import csv
import gzip
import os
import sys
from collections.abc import Iterator
from pathlib import Path

PYPI = "pypi_summaries.tsv.gz"
DEBIAN = "debian_long_descriptions.tsv.gz"

csv.field_size_limit(sys.maxsize)


class CorpusNotFound(FileNotFoundError):
    pass


def corpus_dir() -> Path:
    configured = os.environ.get("WORDCAST_CORPUS_DIR")
    candidates = [Path(configured)] if configured else []
    candidates += [
        Path.cwd().parent / "shared" / "corpus",
        Path(__file__).resolve().parents[3] / "shared" / "corpus",
    ]
    for candidate in candidates:
        if (candidate / PYPI).exists():
            return candidate
    raise CorpusNotFound(
        "corpus not found; looked in "
        + ", ".join(str(c) for c in candidates)
        + " (set WORDCAST_CORPUS_DIR)"
    )


def _rows(name: str) -> Iterator[list[str]]:
    with gzip.open(corpus_dir() / name, "rt", encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        next(reader, None)
        yield from reader


def pypi_posts(limit: int | None = None) -> Iterator[tuple[str, str, str]]:
    """(name, month, summary) rows with a non-empty summary, in file order."""
    count = 0
    for row in _rows(PYPI):
        if len(row) < 3 or not row[2].strip():
            continue
        yield row[0], row[1], row[2]
        count += 1
        if limit is not None and count >= limit:
            return


def debian_documents(limit: int | None = None) -> Iterator[tuple[str, str]]:
    """(name, description) rows, in file order."""
    for count, row in enumerate(_rows(DEBIAN)):
        if limit is not None and count >= limit:
            return
        if len(row) >= 2:
            yield row[0], row[1]
