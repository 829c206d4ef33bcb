"""The Spark term-statistics job computes exactly what the pure-Python builder computes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from wordcast.corpus.files import debian_documents
from wordcast.engines.termstats import TermOrder, TermStats
from wordcast.query.analysis import analyse
from wordcast.spark_jobs import term_stats
from wordcast.storage.redis import connect_sync


def test_transforms_agree_with_the_pure_builder(spark: Any) -> None:
    texts = [text for _, text in debian_documents(limit=400)] + ["", "the and of", "😀"]
    raw = spark.createDataFrame([(t,) for t in texts], ["description"])
    docs = term_stats.analysed_documents(raw, "description")
    got = term_stats.term_stats(docs, min_pair_df=15)
    expected = TermStats.from_documents([analyse(t) for t in texts if analyse(t)], min_pair_df=15)
    assert got.documents == expected.documents == 400
    assert got.df == expected.df
    assert got.pair_df == expected.pair_df
    assert len(got.pair_df) > 50
    assert all(a < b and count >= 15 for (a, b), count in got.pair_df.items())


def test_entry_point_writes_loadable_stats(tmp_path: Path) -> None:
    source = tmp_path / "posts.tsv"
    source.write_text("id\ttext\n1\tRunning fast\n2\truns and running\n3\tslow walk\n")
    out = tmp_path / "stats.json"
    assert (
        term_stats.main(
            [
                "--corpus",
                str(source),
                "--min-pair-df",
                "1",
                "--out",
                str(out),
                "--master",
                "local[1]",
            ]
        )
        == 0
    )
    stats = TermStats.load(out)
    assert stats.documents == 3
    assert stats.df == {"run": 2, "fast": 1, "slow": 1, "walk": 1}
    assert stats.pair_df == {("fast", "run"): 1, ("slow", "walk"): 1}
    assert json.loads(out.read_text())["documents"] == 3
    order = TermOrder("rare-first", stats)
    assert order.sort(["run", "fast", "unseen"])[:2] == ["fast", "run"]


def test_statistics_from_the_routers_publication_log(
    spark: Any, redis_url: str, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`wordcast termstats` on the routers' log equals the pure builder on the same texts."""

    from wordcast.cli import main as wordcast

    texts = [text for _, text in debian_documents(limit=200)]
    client = connect_sync(redis_url, decode_responses=False)
    for text in texts:
        client.xadd(
            f"{namespace}:publications", {"at": "1.0", "terms": " ".join(sorted(analyse(text)))}
        )
    out = tmp_path / "log-stats.json"
    monkeypatch.setenv("WORDCAST_NAMESPACE", namespace)
    args = ["termstats", "--redis-url", redis_url, "--min-pair-df", "10", "--out", str(out)]
    assert wordcast(args) == 0
    expected = TermStats.from_documents([analyse(t) for t in texts if analyse(t)], min_pair_df=10)
    got = TermStats.load(out)
    assert (got.documents, got.df, got.pair_df) == (
        expected.documents,
        expected.df,
        expected.pair_df,
    )


def test_termstats_refuses_unclear_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from wordcast.cli import main as wordcast

    out = str(tmp_path / "stats.json")
    both = ["termstats", "--corpus", "pypi", "--redis-url", "redis://127.0.0.1:1", "--out", out]
    assert wordcast(both) == 2
    assert "not both" in capsys.readouterr().err
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("WORDCAST_STATE_DIR", str(tmp_path / "no-local-cluster"))
    assert wordcast(["termstats", "--out", out]) == 2
    assert "give --corpus, or --redis-url" in capsys.readouterr().err
    assert not Path(out).exists()


def test_a_missing_corpus_stops_the_job_before_spark_with_the_place_looked_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORDCAST_CORPUS_DIR", str(tmp_path))
    missing = f"the pypi corpus: no pypi_summaries.tsv.gz in {tmp_path} (WORDCAST_CORPUS_DIR)"
    with pytest.raises(SystemExit, match=re.escape(missing)):
        term_stats.corpus_path("pypi")
    with pytest.raises(SystemExit, match=r"no such corpus file: .*missing\.tsv"):
        term_stats.main(["--corpus", str(tmp_path / "missing.tsv"), "--out", str(tmp_path / "o")])
    # A file of one's own needs no shared corpus.
    own = tmp_path / "own.tsv"
    own.write_text("id\ttext\n1\thello\n")
    assert term_stats.corpus_path(str(own)) == (str(own), "text")
