"""The Spark jobs on a Spark standalone cluster (issue 11): a master and two workers started with
pyspark's own ``bin/spark-class``, every process (driver included) bound to and advertising
127.0.0.1. The routing learner and the term-statistics job run unchanged with ``--master
spark://…``, read the routers' publication log from Redis (one Redis, or a Redis Cluster under
``make test-redis-cluster``), and give what the same job gives in ``local`` mode."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    LOOPBACK_SPARK,
    SparkStandalone,
    start_spark_standalone,
)
from wordcast.corpus.workload import sample_posts
from wordcast.engines.termstats import TermStats
from wordcast.query.analysis import analyse
from wordcast.spark_jobs.learn_mapping import learned_mapping
from wordcast.storage import Store
from wordcast.storage.redis import connect_sync


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    cluster = start_spark_standalone(tmp_path_factory.mktemp("spark-standalone"), workers=2)
    yield cluster
    cluster.stop()


def _job(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """A job as spark-submit-less users run it: its module, on the cluster's driver host."""
    env = {"WORDCAST_SPARK_DRIVER_MEMORY": "1g", **LOOPBACK_SPARK}
    return subprocess.run(
        [sys.executable, "-m", f"wordcast.spark_jobs.{module}", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | env,
    )


def _ran_on_every_worker(cluster: SparkStandalone, app: str) -> None:
    """The application finished on the cluster, holding a core of each of its two workers."""
    done = [a for a in cluster.state()["completedapps"] if a["name"] == app]
    assert done, f"{app} never ran on the cluster"
    assert done[-1]["state"] == "FINISHED"
    assert done[-1]["cores"] == 2


def _log_publications(redis_url: str, namespace: str, count: int) -> list[frozenset[str]]:
    """``count`` corpus posts' terms in the routers' publication log, as routers sample them."""
    documents = [analyse(p.text) for p in sample_posts(count, seed=21)]
    documents = [d for d in documents if d]
    client = connect_sync(redis_url, decode_responses=False)
    for terms in documents:
        client.xadd(f"{namespace}:publications", {"at": "1.0", "terms": " ".join(sorted(terms))})
    client.close()
    return documents


def test_term_statistics_on_a_standalone_cluster_equal_the_builders(
    standalone: SparkStandalone, redis_url: str, namespace: str, tmp_path: Path
) -> None:
    documents = _log_publications(redis_url, namespace, 400)
    out = tmp_path / "stats.json"
    args = ["--publication-log", redis_url, "--namespace", namespace, "--min-pair-df", "3"]
    done = _job("term_stats", *args, "--out", str(out), "--master", standalone.master_url)
    assert done.returncode == 0, done.stderr[-3000:]
    _ran_on_every_worker(standalone, "wordcast-term-stats")
    expected = TermStats.from_documents(documents, min_pair_df=3)
    got = TermStats.load(out)
    assert (got.documents, got.df, got.pair_df) == (
        expected.documents,
        expected.df,
        expected.pair_df,
    )


def test_the_learner_on_a_standalone_cluster_publishes_what_local_mode_learns(
    standalone: SparkStandalone, spark: Any, redis_url: str, namespace: str
) -> None:
    _log_publications(redis_url, namespace, 600)
    learn = ["--matchers", "3", "--publication-log", redis_url, "--namespace", namespace]
    done = _job("learn_mapping", *learn, "--publish", redis_url, "--master", standalone.master_url)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "published as version 1" in done.stderr
    _ran_on_every_worker(standalone, "wordcast-learn-mapping")

    async def published() -> Any:
        store = Store.connect(redis_url, namespace)
        try:
            return await store.mappings.load(1, 3)
        finally:
            await store.aclose()

    on_cluster = asyncio.run(published())
    locally, _ = learned_mapping(learn)  # the session-wide local SparkSession
    assert on_cluster.words == locally.words
