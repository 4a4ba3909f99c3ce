"""Benchmark the gregor Spark source: batch-read rows/s, Arrow vs tuple path; prints JSON.

    .venv/bin/python scripts/bench/spark_bench.py [--records 1000000] [--size 100]
        [--partitions 4] [--repeat 2] [--bootstrap host:port]

Starts a real `gregor server --port 0` subprocess (unless --bootstrap is given), creates a topic
with --partitions partitions, produces --records values of --size bytes through the client
library, then times a full batch read on local[2]: `count(*), sum(length(value))` over
`spark.read.format("gregor")` (the sum makes every row's value cross from the Python worker
into the JVM), once with useArrow=true and once with useArrow=false. Reported: produce rate, rows/s per
path (best of --repeat), target 400k rows/s for the Arrow path.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from _server import start_server, stop_server
from _spark import local_session


def produce(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> float:
    from client import Admin, Producer

    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topic(topic, partitions=partitions)
    per = records // partitions
    t0 = time.perf_counter()
    with Producer(bootstrap_servers=bootstrap, acks="1", linger_ms=20, batch_size=256 * 1024) as p:
        chunk = 10_000
        futs = []
        for part in range(partitions):
            for start in range(0, per, chunk):
                n = min(chunk, per - start)
                vals = [(start + i).to_bytes(8, "big") * (size // 8) for i in range(n)]
                futs.append(p.send_many(topic, vals, partition=part))
        p.flush(300)
        for f in futs:
            f.result(300)
    return per * partitions / (time.perf_counter() - t0)


def time_read(spark: object, bootstrap: str, topic: str, use_arrow: bool, expected: int) -> float:
    df = (
        spark.read.format("gregor")  # type: ignore[attr-defined]
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("useArrow", "true" if use_arrow else "false")
        .load()
    )
    t0 = time.perf_counter()
    row = df.selectExpr("count(*) AS n", "sum(length(value)) AS b").collect()[0]
    dt = time.perf_counter() - t0
    if row.n != expected:
        raise SystemExit(f"read {row.n} rows, expected {expected}")
    return expected / dt


def main() -> int:
    ap = argparse.ArgumentParser(description="gregor Spark source benchmark (JSON)")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--bootstrap", default=None)
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    proc = None
    tmp = tempfile.TemporaryDirectory(prefix="spark-bench-")
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            proc, bootstrap, _, _ = start_server(tmp.name)
        topic = f"bench-{int(time.time())}"
        produce_rps = produce(bootstrap, topic, args.records, args.size, args.partitions)
        expected = args.records // args.partitions * args.partitions
        spark = local_session()
        time_read(spark, bootstrap, topic, True, expected)  # warm-up: workers, imports
        result = {
            "records": expected,
            "value_bytes": args.size,
            "partitions": args.partitions,
            "produce_records_per_s": round(produce_rps),
            "arrow_rows_per_s": round(
                max(time_read(spark, bootstrap, topic, True, expected) for _ in range(args.repeat))
            ),
            "tuple_rows_per_s": round(
                max(time_read(spark, bootstrap, topic, False, expected) for _ in range(args.repeat))
            ),
            "target_rows_per_s": 400_000,
        }
        spark.stop()
        print(json.dumps(result, indent=2))
    finally:
        if proc is not None:
            stop_server(proc)
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
