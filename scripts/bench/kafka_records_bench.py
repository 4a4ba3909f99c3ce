"""Kafka listener record conversion (broker/kafka/records.py), records/s per codec. Prints JSON.

    .venv/bin/python scripts/bench/kafka_records_bench.py [--records N] [--batch N]
        [--value-bytes N] [--repeat N] [--codecs none,gzip,lz4,zstd]

Batches of `--batch` records (8-byte keys, `--value-bytes` values, one header) built by
Gregor's build_batch, then:

- to_kafka_per_s: Gregor's batches → Kafka's form (what a Fetch through the Kafka listener
  costs the broker per record);
- from_kafka_per_s: Kafka's form → Gregor's (what a Produce through it costs);
- ns_per_record for each, and the bytes per record of each form.

Best of `--repeat` passes (wall clock; the load average at the start is reported).
"converter" says which code converted: c (broker/kafka/_convert.c) or python (not built, or
GREGOR_NO_EXTENSIONS=1).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--codecs", default="none,gzip,lz4,zstd")
    args = ap.parse_args()

    from broker.kafka.records import CONVERTER, from_kafka, to_kafka
    from client.records import build_batch
    from client.records import compression as codecs

    value = os.urandom(args.value_bytes // 2).hex().encode()[: args.value_bytes]
    rows = []
    for codec in args.codecs.split(","):
        if not codecs.is_available(codec):
            rows.append({"codec": codec, "skipped": "codec package not installed"})
            continue
        n_batches = max(1, args.records // args.batch)
        gregor = [
            build_batch(
                [
                    (b"key%05d" % i, value, [("h", b"1")], 1_700_000_000_000 + i)
                    for i in range(args.batch)
                ],
                base_offset=b * args.batch,
                compression=codec,
            )
            for b in range(n_batches)
        ]
        kafka = [to_kafka(g) for g in gregor]
        n = n_batches * args.batch
        best_to = best_from = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            for g in gregor:
                to_kafka(g)
            best_to = min(best_to, time.perf_counter() - t0)
            t0 = time.perf_counter()
            for k in kafka:
                from_kafka(k)
            best_from = min(best_from, time.perf_counter() - t0)
        rows.append(
            {
                "codec": codec,
                "records": n,
                "to_kafka_per_s": round(n / best_to),
                "from_kafka_per_s": round(n / best_from),
                "to_kafka_ns_per_record": round(best_to / n * 1e9),
                "from_kafka_ns_per_record": round(best_from / n * 1e9),
                "gregor_bytes_per_record": round(sum(map(len, gregor)) / n, 1),
                "kafka_bytes_per_record": round(sum(map(len, kafka)) / n, 1),
            }
        )
    print(
        json.dumps(
            {
                "bench": "kafka_records",
                "converter": CONVERTER,
                "batch": args.batch,
                "value_bytes": args.value_bytes,
                "loadavg": os.getloadavg()[0],
                "rows": rows,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
