"""Building the SparkSession the jobs use: ``local[*]`` unless spark-submit says otherwise."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def spark_session(app: str, master: str | None = None) -> SparkSession:
    # Workers must run the interpreter that has wordcast installed (the analyser runs in UDFs);
    # on a cluster, install the package on the executors or ship it with --py-files.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app)
    # Under spark-submit the master comes from the command line; alone we run locally.
    if master or "SPARK_MASTER" in os.environ or not os.environ.get("SPARK_SUBMIT"):
        master = master or os.environ.get("SPARK_MASTER", "local[*]")
        builder = builder.master(master)
        if master.startswith("local"):
            # In one process nothing need reach the driver from elsewhere: keep it on loopback
            # (Spark would otherwise bind the host's first non-loopback address).
            builder = builder.config("spark.driver.host", "127.0.0.1")
            builder = builder.config("spark.driver.bindAddress", "127.0.0.1")
    return (
        builder.config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", os.environ.get("WORDCAST_SPARK_PARTITIONS", "8"))
        .config("spark.driver.memory", os.environ.get("WORDCAST_SPARK_DRIVER_MEMORY", "4g"))
        .getOrCreate()
    )
