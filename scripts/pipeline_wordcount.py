"""Streaming word count from a Gregor topic to a Gregor topic (example pipeline).

    .venv/bin/python scripts/pipeline_wordcount.py --bootstrap 127.0.0.1:9092 \\
        --input lines --output counts --checkpoint /tmp/wc-ck [--available-now]
    spark-submit --master spark://HOST:7077 scripts/pipeline_wordcount.py --bootstrap ... \\
        (on a Spark cluster: docs/spark.md, "Running on a Spark cluster")

Reads text lines (record values) from --input, splits them into lowercase words, keeps a
running count per word, and after each micro-batch writes the counts to --output as
key=word, value=count (decimal string; "complete" output mode: Python data source sinks do
not support "update", so every word's current count is written each batch; the newest
record per key is the answer, as with a compacted topic). With --available-now it processes what is there and exits;
otherwise it runs until interrupted. The checkpoint makes restarts resume where they stopped.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def build_query(spark: Any, args: argparse.Namespace) -> Any:
    """Start the streaming query on `spark` (the gregor source must be registered)."""
    lines = (
        spark.readStream.format("gregor")
        .option("bootstrap.servers", args.bootstrap)
        .option("subscribe", args.input)
        .option("startingOffsets", "earliest")
        .load()
    )
    counts = (
        lines.selectExpr("explode(split(lower(CAST(value AS STRING)), '[^a-z0-9]+')) AS word")
        .where("word != ''")
        .groupBy("word")
        .count()
        .selectExpr("word AS key", "CAST(count AS STRING) AS value")
    )
    writer = (
        counts.writeStream.format("gregor")
        .outputMode("complete")
        .option("bootstrap.servers", args.bootstrap)
        .option("topic", args.output)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True, help="host:port of a Gregor broker")
    ap.add_argument("--input", required=True, help="topic of text lines")
    ap.add_argument("--output", required=True, help="topic for word counts")
    ap.add_argument("--checkpoint", required=True, help="Spark checkpoint directory")
    ap.add_argument("--available-now", action="store_true", help="process the backlog and exit")
    ap.add_argument(
        "--master",
        help="Spark master URL (default: the one spark-submit was given, else local[2])",
    )
    return ap.parse_args(argv)


NO_PYSPARK = (
    "pipeline_wordcount: pyspark is not installed in {python}. Install Gregor's Spark support "
    "with `scripts/run.sh --with spark --version` (into .venv; or `pip install -e '.[spark]'` "
    "in your own environment; Spark also needs Java 17+), then run this script with that "
    "Python (.venv/bin/python)."
)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print(NO_PYSPARK.format(python=sys.executable), file=sys.stderr)
        return 2
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from client.spark import register
    from client.spark.errors import reason_of

    builder = SparkSession.builder
    if args.master:
        builder = builder.master(args.master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: run in-process
        builder = builder.master("local[2]")
    spark = (
        builder.appName("gregor-wordcount")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    query = build_query(spark, args)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    exc = query.exception()
    spark.stop()
    if exc is not None:
        print(f"query failed: {reason_of(exc)}", file=sys.stderr)  # the reason, on one line
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
