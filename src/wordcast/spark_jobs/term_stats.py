"""Term statistics for QueryNote and the trie term orders: ``python -m wordcast.spark_jobs.term_stats``.

Computes, with the one wordcast analyser, the document frequency of every term and the pruned
co-occurrence matrix of the Luwak thesis §6.2 (pairs of terms found together in at least
``--min-pair-df`` documents), and writes them as a :class:`wordcast.engines.termstats.TermStats` JSON file
that matchers and benchmarks load.

Input is a corpus file of ``../shared/corpus`` (``pypi`` summaries or ``debian`` descriptions), any
tab-separated file with a header and a text column, or the routers' publication log in Redis
(``--publication-log redis://…``: already analysed term sets). Runs with ``local[*]``; unchanged under
``spark-submit`` on a cluster.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StringType

from wordcast.engines.termstats import TermStats


def _analyse(text: str | None) -> list[str]:
    from wordcast.query.analysis import analyse

    return sorted(analyse(text)) if text else []


# A lambda, so Spark does not try to read an evaluation type from _analyse's annotations.
analyse_udf = F.udf(lambda text: _analyse(text), ArrayType(StringType()))


# -- pure transforms ----------------------------------------------------------------------------
def analysed_documents(raw: DataFrame, text_column: str) -> DataFrame:
    """One row per document with a non-empty ``terms`` array (sorted, distinct)."""
    return (
        raw.select(analyse_udf(F.col(text_column)).alias("terms"))
        .where(F.size("terms") > 0)
        .withColumn("doc", F.monotonically_increasing_id())
    )


def document_frequencies(docs: DataFrame) -> DataFrame:
    """(term, df): in how many documents each term occurs."""
    return (
        docs.select(F.explode("terms").alias("term")).groupBy("term").agg(F.count("*").alias("df"))
    )


def cooccurring_pairs(docs: DataFrame, frequencies: DataFrame, min_pair_df: int) -> DataFrame:
    """(a, b, df) with a < b, for pairs found together in at least ``min_pair_df`` documents.

    A pair can only be that frequent if both its terms are, so rarer terms are dropped before the
    quadratic pair expansion, which keeps it small.
    """
    frequent = frequencies.where(F.col("df") >= min_pair_df).select("term")
    exploded = docs.select("doc", F.explode("terms").alias("term")).join(
        F.broadcast(frequent), "term"
    )
    left, right = exploded.alias("l"), exploded.alias("r")
    return (
        left.join(right, (F.col("l.doc") == F.col("r.doc")) & (F.col("l.term") < F.col("r.term")))
        .groupBy(F.col("l.term").alias("a"), F.col("r.term").alias("b"))
        .agg(F.count("*").alias("df"))
        .where(F.col("df") >= min_pair_df)
    )


def term_stats(docs: DataFrame, min_pair_df: int) -> TermStats:
    """Collect the statistics of analysed documents into a TermStats (driver memory: vocabulary)."""
    docs = docs.cache()
    frequencies = document_frequencies(docs).cache()
    n = docs.count()
    df = {row["term"]: int(row["df"]) for row in frequencies.collect()}
    pairs = {}
    if min_pair_df > 0:
        pairs = {
            (row["a"], row["b"]): int(row["df"])
            for row in cooccurring_pairs(docs, frequencies, min_pair_df).collect()
        }
    return TermStats(n, df, pairs)


def logged_documents(spark: SparkSession, terms: list[tuple[str, ...]]) -> DataFrame:
    """Already analysed term sets (the publication log) as the documents DataFrame."""
    rows = [(sorted(set(t)),) for t in terms if t]
    schema = "terms array<string>"
    return spark.createDataFrame(rows, schema).withColumn("doc", F.monotonically_increasing_id())


def read_publication_log(
    redis_url: str, namespace: str, limit: int | None
) -> list[tuple[str, ...]]:
    """The sampled term sets routers logged (``{namespace}:publications``), oldest first."""
    from wordcast.storage.keys import Keys
    from wordcast.storage.redis import connect_sync, stored_namespace

    client: Any = connect_sync(redis_url)  # one Redis or a cluster, str replies
    key, start = Keys(stored_namespace(redis_url, namespace)).publications, "-"
    out: list[tuple[str, ...]] = []
    while limit is None or len(out) < limit:
        page = client.xrange(key, min=start, count=10_000)
        if not page:
            break
        out.extend(tuple(fields["terms"].split()) for _, fields in page)
        start = f"({page[-1][0]}"
    client.close()
    return out[:limit] if limit else out


# -- entry point --------------------------------------------------------------------------------
def corpus_path(source: str) -> tuple[str, str]:
    """(path, text column) of ``pypi``, ``debian`` or a TSV file; exits naming what is missing.
    The jobs call it before starting Spark, so a wrong name fails at once."""
    from wordcast.corpus.files import DEBIAN, PYPI, CorpusNotFound, corpus_dir

    shared = {"pypi": (PYPI, "summary"), "debian": (DEBIAN, "description")}
    if source in shared:
        name, column = shared[source]
        try:
            path = str(corpus_dir() / name)
        except CorpusNotFound as exc:
            raise SystemExit(f"the {source} corpus: {exc}") from None
    else:
        path, column = source, "text"
        if "://" not in path and not Path(path).exists():
            raise SystemExit(f"no such corpus file: {path} (give pypi, debian or a TSV path)")
    return path, column


def read_corpus(spark: SparkSession, source: str, limit: int | None) -> tuple[DataFrame, str]:
    path, column = corpus_path(source)
    raw = spark.read.csv(path, sep="\t", header=True, quote="", escape="")
    if column not in raw.columns:
        raise SystemExit(f"term_stats: {path} has no column {column!r} (columns: {raw.columns})")
    return (raw.limit(limit) if limit else raw), column


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpus", default="debian", help="pypi, debian, or a TSV path with 'text'"
    )
    parser.add_argument(
        "--publication-log", metavar="REDIS_URL", help="read the routers' log instead"
    )
    parser.add_argument("--namespace", default="wordcast", help="Redis key prefix of the log")
    parser.add_argument("--limit", type=int, help="use only the first N documents")
    parser.add_argument("--min-pair-df", type=int, default=50)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--master", help="Spark master (default local[*] unless spark-submit)")
    args = parser.parse_args(argv)
    if not args.publication_log:
        corpus_path(args.corpus)

    from .session import spark_session

    started = time.perf_counter()
    owned = SparkSession.getActiveSession() is None  # leave a caller's session running
    spark = spark_session("wordcast-term-stats", args.master)
    try:
        if args.publication_log:
            logged = read_publication_log(args.publication_log, args.namespace, args.limit)
            docs = logged_documents(spark, logged)
        else:
            raw, column = read_corpus(spark, args.corpus, args.limit)
            docs = analysed_documents(raw, column)
        stats = term_stats(docs, args.min_pair_df)
    finally:
        if owned:
            spark.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    stats.save(args.out)
    print(
        f"term_stats: {stats.documents:,} documents, {len(stats.df):,} terms, "
        f"{len(stats.pair_df):,} pairs with df >= {args.min_pair_df} -> {args.out} "
        f"({time.perf_counter() - started:.1f}s)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
