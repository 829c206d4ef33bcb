"""What a console learning run shows of its job's output: the job's own lines, not Spark's."""

from __future__ import annotations

import pytest

from wordcast.services.router.learning import _spark_noise


@pytest.mark.parametrize(
    "line",
    [
        "26/11/29 09:51:00 WARN NativeCodeLoader: Unable to load native-hadoop library",
        "26/11/29 09:51:02 INFO SparkContext: Running Spark version 3.5.1",
        'Setting default log level to "WARN".',
        "To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel.",
        "WARNING: Using incubator modules: jdk.incubator.vector",
        "[Stage 3:=====>                                   (2 + 2) / 4]",
        "",
    ],
)
def test_spark_and_its_jvm_are_left_out(line: str) -> None:
    assert _spark_noise(line)


@pytest.mark.parametrize(
    "line",
    [
        "published mapping version 2 for 2 matchers (spread 1.42, imbalance 1.03)",
        "wordcast learn: error: the publication log is empty",
        "  WARN is a word here too",
    ],
)
def test_the_jobs_own_lines_are_kept(line: str) -> None:
    assert not _spark_noise(line)
