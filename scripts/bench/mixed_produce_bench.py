#!/usr/bin/env python
"""acks=all latency next to a bulk writer on the same partition; prints one JSON object.

Starts a `gregor server` subprocess (defaults: log.flush.on.ack=true, so acks wait for the
flusher's fsync), then on partition 0 of one topic runs at once, as `gregor perf produce`
processes:

  bulk    --bulk-records records of 1 KiB, as fast as it goes (batch.size 1 MiB, linger.ms 5,
          acks --bulk-acks)
  steady  --steady-records records of 100 bytes at --steady-rate records/s, acks=all,
          linger.ms 0, each awaited through its future (latency p50/p99/p999/max)

The steady producer's latency is what a small acks=all producer sees while the group commits
of the same log also cover the bulk writer's data. (acks=0 for the bulk writer is not offered:
the client's acks=0 path stalls after max.in.flight requests at the time of writing.)

    .venv/bin/python scripts/bench/mixed_produce_bench.py [--bulk-acks all|1]
        [--bulk-records 3000000] [--steady-records 20000] [--steady-rate 2000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _server import start_server, stop_server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bulk-acks", choices=("all", "1"), default="all")
    ap.add_argument("--bulk-records", type=int, default=3_000_000)
    ap.add_argument("--steady-records", type=int, default=20_000)
    ap.add_argument("--steady-rate", type=float, default=2000)
    ap.add_argument("--dir", default=None, help="parent of the broker's temp data dir")
    args = ap.parse_args()
    gregor = Path(sys.executable).with_name("gregor")
    cmd = [str(gregor)] if gregor.exists() else [sys.executable, "-m", "client.cli"]
    data = tempfile.mkdtemp(prefix="mixed-produce-", dir=args.dir)
    server = start_server(data)
    try:
        base = [*cmd, "perf", "produce", "--topic", "mixed", "--partition", "0",
                "--bootstrap-server", server.bootstrap]  # fmt: skip
        subprocess.run([*base, "--num-records", "10"], check=True, capture_output=True)
        bulk = subprocess.Popen(
            [
                *base,
                "--num-records",
                str(args.bulk_records),
                "--record-size",
                "1024",
                "--acks",
                args.bulk_acks,
                "-X",
                "batch.size=1048576",
                "-X",
                "max.request.size=8388608",
                "-X",
                "linger.ms=5",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        steady = subprocess.run(
            [
                *base,
                "--num-records",
                str(args.steady_records),
                "--record-size",
                "100",
                "--acks",
                "all",
                "--mode",
                "send",
                "--throughput",
                str(args.steady_rate),
                "-X",
                "linger.ms=0",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        t0 = time.monotonic()
        bulk_out = bulk.communicate()[0]
        if bulk.returncode:
            raise SystemExit(f"bulk producer exited {bulk.returncode}")
        s, b = json.loads(steady.stdout), json.loads(bulk_out)
        print(
            json.dumps(
                {
                    "bulk": {
                        "acks": args.bulk_acks,
                        **{k: b[k] for k in ("records", "seconds", "mb_per_s", "errors")},
                    },
                    "steady_acks_all": {
                        k: s[k]
                        for k in ("records", "seconds", "records_per_s", "errors", "latency")
                    },
                    # > 0: the bulk writer ran for the whole steady measurement
                    "bulk_ran_on_after_steady_s": round(time.monotonic() - t0, 1),
                },
                indent=2,
            )
        )
    finally:
        stop_server(server.proc)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
