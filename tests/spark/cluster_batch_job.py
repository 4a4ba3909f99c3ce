"""Driver for the standalone-cluster test (tests/spark/test_spark_standalone.py), run with
spark-submit: reads a Gregor topic in batch and writes what it saw as JSON.

    spark-submit --master spark://HOST:PORT tests/spark/cluster_batch_job.py BOOTSTRAP TOPIC OUT

OUT gets {"driver_pid", "master", "block_managers", "rows": [[partition, offset, key, value, chain]]}
where `chain` is the pid and parent pids of the Python process that handled the row (an
executor's Python worker), so the test can check which Spark worker ran it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def chain() -> str:
    pid, out = os.getpid(), []
    while pid > 1:
        out.append(pid)
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return ",".join(map(str, out))


def main(bootstrap: str, topic: str, out: str) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import udf

    from client.spark import register

    spark = SparkSession.builder.appName("gregor-cluster-batch").getOrCreate()
    register(spark)
    df = (
        spark.read.format("gregor")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("minPartitions", "4")
        .load()
    )
    rows = df.select(
        "partition", "offset", "key", "value", udf(chain, "string")().alias("chain")
    ).collect()
    sc = spark.sparkContext
    block_managers = sc._jsc.sc().getExecutorMemoryStatus().size()  # executors + driver
    result = {
        "driver_pid": os.getpid(),
        "master": sc.master,
        "block_managers": int(block_managers),
        "rows": [
            [r.partition, r.offset, bytes(r.key).decode(), bytes(r.value).decode(), r.chain]
            for r in rows
        ],
    }
    Path(out).write_text(json.dumps(result))
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
