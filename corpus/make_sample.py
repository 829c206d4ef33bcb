"""Make this folder's sample corpus from the full one (``../shared/corpus``, see README.md here).

Every 8th PyPI summary and every 10th Debian long description, in file order (so months stay
ordered), each file's header kept: ``python corpus/make_sample.py [FULL_CORPUS_DIR]``. The
output is deterministic (gzip without a timestamp), so making it again changes nothing.
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

EVERY = {"pypi_summaries.tsv.gz": 8, "debian_long_descriptions.tsv.gz": 10}


def main() -> None:
    here = Path(__file__).resolve().parent
    full = Path(sys.argv[1]) if len(sys.argv) > 1 else here.parent.parent / "shared" / "corpus"
    for name, every in EVERY.items():
        with gzip.open(full / name, "rb") as source:
            header = source.readline()
            kept = [line for k, line in enumerate(source) if k % every == 0]
        with (here / name).open("wb") as raw, gzip.GzipFile(
            fileobj=raw, mode="wb", mtime=0, compresslevel=9
        ) as out:
            out.write(header)
            out.writelines(kept)
        print(f"{name}: {len(kept):,} rows of every {every}")


if __name__ == "__main__":
    main()
