"""Topics for topic-based subscriptions (S³-TM §6.1): ``python -m wordcast.spark_jobs.topics``.

Spark MLlib's LDA over the analysed posts (term counts from a CountVectorizer); each topic is
reported as its ``--words`` highest-weighted terms. The paper used Mallet with alpha = beta = 0.1;
MLlib's online LDA takes the same priors as docConcentration and topicConcentration.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from pyspark.ml.clustering import LDA
from pyspark.ml.feature import CountVectorizer
from pyspark.sql import DataFrame, SparkSession

from .term_stats import analysed_documents, read_corpus


def lda_topics(
    docs: DataFrame, topics: int = 100, words: int = 5, iterations: int = 30, seed: int = 0
) -> list[list[str]]:
    """The ``words`` top terms of each of ``topics`` LDA topics over the ``terms`` column."""
    vectorizer = CountVectorizer(inputCol="terms", outputCol="counts", minDF=5.0).fit(docs)
    counted = vectorizer.transform(docs).select("counts")
    model = LDA(
        k=topics,
        maxIter=iterations,
        seed=seed,
        optimizer="online",
        featuresCol="counts",
        docConcentration=[0.1],
        topicConcentration=0.1,
    ).fit(counted)
    vocabulary = vectorizer.vocabulary
    described = model.describeTopics(words).orderBy("topic").collect()
    return [[vocabulary[i] for i in row["termIndices"]] for row in described]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="pypi", help="pypi, debian, or a TSV path with 'text'")
    parser.add_argument("--limit", type=int, default=100_000, help="posts to learn topics from")
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--words", type=int, default=5)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--master", help="Spark master (default local[*] unless spark-submit)")
    args = parser.parse_args(argv)

    from .session import spark_session

    started = time.perf_counter()
    owned = SparkSession.getActiveSession() is None
    spark = spark_session("wordcast-topics", args.master)
    try:
        raw, column = read_corpus(spark, args.corpus, args.limit)
        topics = lda_topics(analysed_documents(raw, column), args.topics, args.words)
    finally:
        if owned:
            spark.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(topics, indent=1))
    print(
        f"topics: {len(topics)} topics of {args.words} words -> {args.out} "
        f"({time.perf_counter() - started:.1f}s)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
