"""Reading the shared corpora (``../shared/corpus`` beside the project, see its README).

The location is ``WORDCAST_CORPUS_DIR`` if set (and then only there: a wrong setting is reported,
not silently replaced by another copy), else ``shared/corpus`` in the parent of the current
directory or of the source checkout, else, in a source checkout, the sample the repository
carries (``corpus/``: every 8th PyPI summary and every 10th Debian description), so that a clone
anywhere runs its demo and its tests. A pip-installed wordcast ships no corpus.
"""

from __future__ import annotations

import csv
import gzip
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from wordcast.errors import CorpusNotFound

PYPI = "pypi_summaries.tsv.gz"
DEBIAN = "debian_long_descriptions.tsv.gz"

csv.field_size_limit(sys.maxsize)


def corpus_dir() -> Path:
    configured = os.environ.get("WORDCAST_CORPUS_DIR")
    if configured:
        candidates = [Path(configured)]
    else:
        candidates = [Path.cwd().parent / "shared" / "corpus"]
        source = Path(__file__).resolve().parents[2]  # src/ in a checkout
        if source.name == "src":  # a source checkout, not site-packages
            candidates.append(source.parent.parent / "shared" / "corpus")
            # A clone anywhere else: the sample the repository carries (corpus/README.md).
            candidates.append(source.parent / "corpus")
    for candidate in candidates:
        if (candidate / PYPI).exists():
            return candidate
    where = " or ".join(dict.fromkeys(str(c) for c in candidates))
    if configured:
        raise CorpusNotFound(f"no {PYPI} in {where} (WORDCAST_CORPUS_DIR)")
    raise CorpusNotFound(
        f"the text corpora ({PYPI}, …) are not in {where}: "
        "set WORDCAST_CORPUS_DIR to the directory that holds them"
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
