"""PySpark connector for Gregor (docs/architecture.md §11): the `gregor` Python Data Source.

    from client.spark import register
    register(spark)                      # or spark.dataSource.register(GregorDataSource)
    df = spark.read.format("gregor").option("bootstrap.servers", "h:p") \\
        .option("subscribe", "events").load()

Modules: options (option parsing), offsets (offset JSON, data-loss checks, range planning),
planner (driver: cluster state, start/end resolution), task (executor: read one range),
source (DataSource + batch/stream readers), sink (batch/stream writers).
Only this package imports pyspark; importing it requires pyspark and pyarrow.
"""

from __future__ import annotations

from typing import Any

from client.spark.source import GregorDataSource

__all__ = ["GregorDataSource", "register"]


def register(spark: Any) -> None:
    """Register `format("gregor")` with a SparkSession."""
    spark.dataSource.register(GregorDataSource)
