#!/usr/bin/env python
"""Producer benchmark against a real `gregor server` subprocess; prints one JSON object.

Runs (one producer process, one partition, acks=all; the broker's fsync group commit):
  1. throughput, 100-byte values   (target >= 1,000,000 records/s)
  2. throughput, 1 KiB values      (target >= 250 MB/s)
  3. latency at a steady --steady-rate records/s (default 5,000) with per-record futures,
     next to a bare write+fdatasync loop on the same disk (p50/p99), measured in the same run.

    .venv/bin/python scripts/bench/produce_bench.py [--records 1000000] [--bootstrap H:P]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

READY = re.compile(r"listening on \[?(?P<host>[^\]\s]+?)\]?:(?P<port>\d+)")


def start_server(data_dir: str) -> tuple[subprocess.Popen, str]:
    gregor = Path(sys.executable).with_name("gregor")
    cmd = [str(gregor)] if gregor.exists() else [sys.executable, "-m", "broker.cli"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GREGOR_")}
    proc = subprocess.Popen(
        [*cmd, "server", "--port", "0", "--data-dir", data_dir],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"gregor server exited ({proc.wait()}) before it was ready")
        m = READY.search(line)
        if m:
            return proc, f"{m['host']}:{m['port']}"
    proc.kill()
    raise SystemExit("gregor server not ready within 30 s")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def fsync_latency(directory: str, n: int, size: int = 100) -> dict:
    """p50/p99 of a bare append + fdatasync of `size` bytes, n times."""
    from client.cli.perf import percentiles

    path = os.path.join(directory, "fsync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    data = b"x" * size
    samples = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, data)
            os.fdatasync(fd)
            samples.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        os.unlink(path)
    return percentiles(samples)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--kib-records", type=int, default=300_000)
    ap.add_argument("--steady-rate", type=float, default=5000)
    ap.add_argument("--steady-seconds", type=float, default=5)
    ap.add_argument("--bootstrap", help="use a running broker instead of starting one")
    ap.add_argument("--data-dir", help="where the started broker keeps data (default: a temp dir)")
    args = ap.parse_args()

    from client import Admin
    from client.cli.perf import run_produce

    tmp = tempfile.mkdtemp(prefix="gregor-produce-bench-", dir=args.data_dir)
    proc = None
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            proc, bootstrap = start_server(os.path.join(tmp, "data"))
        tuned = {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "batch.size": 1 << 20,
            "linger.ms": 5,
            "max.request.size": 8 << 20,
        }
        suffix = str(int(time.time()))
        results: dict = {"bootstrap": bootstrap}
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            for name in ("small", "kib", "steady"):
                admin.create_topic(f"bench-{name}-{suffix}", partitions=1)
        results["throughput_100b"] = run_produce(
            tuned, f"bench-small-{suffix}", args.records, 100, "bulk", 5000
        )
        results["throughput_1kib"] = run_produce(
            tuned, f"bench-kib-{suffix}", args.kib_records, 1024, "bulk", 1000
        )
        steady_n = int(args.steady_rate * args.steady_seconds)
        results["steady_latency"] = run_produce(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0},
            f"bench-steady-{suffix}", steady_n, 100, "send", 1, args.steady_rate,
        )  # fmt: skip
        results["bare_fdatasync"] = fsync_latency(tmp, 2000)
        print(json.dumps(results, indent=2))
    finally:
        if proc is not None:
            stop_server(proc)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
