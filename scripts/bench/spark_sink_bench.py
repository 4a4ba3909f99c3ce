"""Benchmark the gregor Spark sink: exactly-once against at-least-once, in one run; prints JSON.

    .venv/bin/python scripts/bench/spark_sink_bench.py [--records 100000] [--size 100]
        [--partitions 2] [--rounds 2] [--max-offsets-per-trigger 25000] [--bootstrap host:port]

Starts a real `gregor server --port 0` subprocess (unless --bootstrap is given), produces
--records values of --size bytes to one input topic of --partitions partitions, then on
local[2] runs the same streaming query once per mode and round, modes alternating (the first
mode swaps every round): `spark.readStream.format("gregor")` from the input's earliest offsets
(--max-offsets-per-trigger rows per micro-batch, availableNow) `.writeStream.format("gregor")`
to a fresh output topic with a fresh checkpoint, with `exactlyOnce=true` (one transaction per
task and micro-batch, docs/spark.md) or without (the at-least-once sink: an idempotent
producer per task). The time is start() to awaitTermination(); afterwards the output is read
back (read_committed) and must hold exactly --records rows. Reported: rows/s per mode (best
and median over the rounds), the exactly-once cost (1 - eos/alo on the medians), and the load
average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _server import start_server, stop_server
from _spark import local_session

MODES = ("at_least_once", "exactly_once")


def produce(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> None:
    from client import Admin, Producer

    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topic(topic, partitions=partitions)
    per = records // partitions
    with Producer(bootstrap_servers=bootstrap, acks="1", linger_ms=20, batch_size=256 * 1024) as p:
        futs = []
        for part in range(partitions):
            for start in range(0, per, 10_000):
                n = min(10_000, per - start)
                vals = [(start + i).to_bytes(8, "big") * (size // 8) for i in range(n)]
                futs.append(p.send_many(topic, vals, partition=part))
        p.flush(300)
        for f in futs:
            f.result(300)


def run_query(
    spark: object,
    bootstrap: str,
    src: str,
    dst: str,
    checkpoint: str,
    exactly_once: bool,
    per_trigger: int,
) -> float:
    """Seconds from start() to the end of an availableNow query copying `src` to `dst`."""
    writer = (
        spark.readStream.format("gregor")  # type: ignore[attr-defined]
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(per_trigger))
        .load()
        .selectExpr("key", "value")
        .writeStream.format("gregor")
        .option("bootstrap.servers", bootstrap)
        .option("topic", dst)
        .option("checkpointLocation", checkpoint)
    )
    if exactly_once:
        writer = writer.option("exactlyOnce", "true")
    t0 = time.perf_counter()
    q = writer.trigger(availableNow=True).start()
    q.awaitTermination()
    dt = time.perf_counter() - t0
    if q.exception() is not None:
        raise SystemExit(f"query failed: {q.exception()}")
    return dt


def count_committed(spark: object, bootstrap: str, topic: str) -> int:
    df = (
        spark.read.format("gregor")  # type: ignore[attr-defined]
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", "read_committed")
        .load()
    )
    return int(df.count())


def main() -> int:
    ap = argparse.ArgumentParser(description="gregor Spark sink: exactly-once vs at-least-once")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-offsets-per-trigger", type=int, default=25_000)
    ap.add_argument("--bootstrap", default=None)
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    proc = None
    tmp = tempfile.TemporaryDirectory(prefix="spark-sink-bench-")
    load_before = os.getloadavg()
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            proc, bootstrap, _, _ = start_server(str(Path(tmp.name) / "data"))
        stamp = int(time.time())
        src = f"sink-bench-in-{stamp}"
        produce(bootstrap, src, args.records, args.size, args.partitions)
        expected = args.records // args.partitions * args.partitions
        spark = local_session()
        n = 0

        def one(mode: str) -> float:
            nonlocal n
            n += 1
            dst = f"sink-bench-out-{stamp}-{n}"
            ck = str(Path(tmp.name) / f"ck-{n}")
            from client import Admin

            with Admin(bootstrap_servers=bootstrap) as admin:
                admin.create_topic(dst, partitions=args.partitions)
            dt = run_query(
                spark, bootstrap, src, dst, ck, mode == "exactly_once", args.max_offsets_per_trigger
            )
            got = count_committed(spark, bootstrap, dst)
            if got != expected:
                raise SystemExit(f"{mode}: the output holds {got} rows, expected {expected}")
            return expected / dt

        for mode in MODES:  # warm-up: Python workers, imports, the coordinator's topic
            one(mode)
        rates: dict[str, list[float]] = {m: [] for m in MODES}
        for r in range(args.rounds):
            order = MODES if r % 2 == 0 else MODES[::-1]
            for mode in order:
                rates[mode].append(one(mode))
        spark.stop()
        med = {m: statistics.median(v) for m, v in rates.items()}
        result = {
            "records": expected,
            "value_bytes": args.size,
            "partitions": args.partitions,
            "max_offsets_per_trigger": args.max_offsets_per_trigger,
            "rounds": args.rounds,
            "rows_per_s": {m: [round(x) for x in v] for m, v in rates.items()},
            "best_rows_per_s": {m: round(max(v)) for m, v in rates.items()},
            "median_rows_per_s": {m: round(x) for m, x in med.items()},
            "exactly_once_cost": round(1 - med["exactly_once"] / med["at_least_once"], 3),
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        }
        print(json.dumps(result, indent=2))
    finally:
        if proc is not None:
            stop_server(proc)
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
