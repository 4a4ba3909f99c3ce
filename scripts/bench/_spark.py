"""The local Spark session the Spark benchmarks share (spark_bench.py, spark_sink_bench.py)."""

from __future__ import annotations

from typing import Any


def local_session() -> Any:
    """A local[2] SparkSession with the connector registered: no UI, 2 shuffle partitions, UTC,
    Spark's own logging at ERROR."""
    from pyspark.sql import SparkSession

    from client.spark import register

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
