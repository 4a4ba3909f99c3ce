"""Driver for the exactly-once kill test (tests/spark/test_spark_exactly_once.py, long tier):
a local[2] streaming query copying SRC to DST through the gregor sink with exactlyOnce.

    python tests/spark/eos_stream_job.py BOOTSTRAP SRC DST CHECKPOINT run|drain

`run` keeps going (a 200 ms trigger) until killed; `drain` runs with availableNow and exits 0
once everything in SRC is written. Run with python, it is `local[2,4]` (a task that fails, its
Python worker killed, is retried up to 4 times, as on a cluster); under spark-submit it keeps the
master it is given (tests/spark/test_spark_standalone.py submits it to a standalone cluster).
"""

from __future__ import annotations

import os
import sys


def main(bootstrap: str, src: str, dst: str, ck: str, mode: str) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from client.spark import register

    builder = SparkSession.builder
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: in-process
        builder = builder.master("local[2,4]")
    spark = (
        builder.appName("gregor-eos-kill")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "512m")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    writer = (
        spark.readStream.format("gregor")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "50")
        .load()
        .selectExpr("key", "value")
        .writeStream.format("gregor")
        .option("bootstrap.servers", bootstrap)
        .option("topic", dst)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", ck)
    )
    if mode == "drain":
        q = writer.trigger(availableNow=True).start()
        q.awaitTermination()
        if q.exception() is not None:
            raise SystemExit(f"query failed: {q.exception()}")
        spark.stop()
        return
    writer.trigger(processingTime="200 milliseconds").start().awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:6])
