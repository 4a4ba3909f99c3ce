"""Benchmark the log cleaner (broker/log/cleaner.py); prints JSON.

A compacted log of --mib MiB of keyed records (--value-bytes values, --keys distinct keys, in
batches of --batch records, --segment-mib segments) is written, flushed, rolled, then cleaned
from scratch with Cleaner.clean until nothing is dirty; --rounds fresh logs, the best round
counts. Reported: the cleaner's throughput over the bytes it read (MB/s of the dirty log, map
scan and rewrite together, swaps and fsyncs included) and records/s, the passes needed (a
--dedupe-mib buffer smaller than keys x 112 bytes cleans in several), bytes before and after.

Usage: python scripts/bench/cleaner_bench.py [--dir /tmp] [--mib 64] [--keys 10000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from broker.log import Log, LogConfig
from broker.log.cleaner import Cleaner
from client.records import build_batch


def _fill(log: Log, total: int, keys: int, value_bytes: int, batch: int) -> int:
    value = b"v" * value_bytes
    written = records = 0
    i = 0
    while written < total:
        recs = [(b"key-%08d" % ((i + j) % keys), value) for j in range(batch)]
        i += batch
        data = build_batch(recs)
        log.append_as_leader(data, 0)
        written += len(data)
        records += batch
    log.roll()
    log.flush()
    return records


def one_round(base: Path, args: argparse.Namespace) -> dict:
    d = Path(tempfile.mkdtemp(dir=base))
    try:
        config = LogConfig(segment_bytes=args.segment_mib << 20, cleanup_policy=("compact",))
        log = Log(d / "bench-0", "bench", 0, config)
        records = _fill(log, args.mib << 20, args.keys, args.value_bytes, args.batch)
        before = log.size_bytes
        cleaner = Cleaner(args.dedupe_mib << 20)
        t0 = time.perf_counter()
        passes = read = kept = 0
        while (stats := cleaner.clean(log, log.end_offset)) is not None:
            passes += 1
            read += stats.bytes_read
            kept = stats.records_kept
        elapsed = time.perf_counter() - t0
        after = log.size_bytes
        log.close()
        return {
            "records": records,
            "bytes_before": before,
            "bytes_after": after,
            "passes": passes,
            "bytes_read": read,
            "records_kept_last_pass": kept,
            "seconds": round(elapsed, 3),
            "MBps_of_log": round(before / elapsed / 1e6, 1),
            "records_per_s": round(records / elapsed),
        }
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", default=tempfile.gettempdir())
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--keys", type=int, default=10_000)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--segment-mib", type=int, default=8)
    p.add_argument("--dedupe-mib", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    base = Path(args.dir)
    runs = [one_round(base, args) for _ in range(args.rounds)]
    best = max(runs, key=lambda r: r["MBps_of_log"])
    print(
        json.dumps(
            {
                "config": vars(args),
                "best": best,
                "MBps_runs": [r["MBps_of_log"] for r in runs],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
