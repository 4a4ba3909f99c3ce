#!/usr/bin/env python
"""Producer benchmark against a real `gregor server` subprocess; prints one JSON object.

Runs (one producer process, one partition, acks=all; the broker's fsync group commit):
  1. throughput, 100-byte values   (target >= 1,000,000 records/s)
  2. throughput, 1 KiB values      (target >= 250 MB/s)
  3. latency at a steady --steady-rate records/s (default 5,000) with per-record futures,
     next to a bare write+fdatasync loop on the same disk (p50/p99), measured in the same run,
     back to back (`bare_fdatasync`, the target's reference) and with 1 ms between fsyncs
     (`bare_fdatasync_paced_1ms`, closer to the broker's spacing: idle gaps slow each one).

    .venv/bin/python scripts/bench/produce_bench.py [--records 1000000] [--bootstrap H:P]
        [--metrics off|on|both]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _idempotence import idempotence_ab  # noqa: E402
from _server import start_server, stop_server  # noqa: E402


def fsync_latency(directory: str, n: int, size: int = 100, gap_s: float = 0.0) -> dict:
    """p50/p99 of a bare append + fdatasync of `size` bytes, n times, back to back or with
    `gap_s` seconds of sleep between (as a broker's fsyncs are spaced by its requests; on this
    VM an idle gap makes each fdatasync slower, see docs/broker.md)."""
    from client.cli.perf import percentiles

    path = Path(directory) / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    data = b"x" * size
    samples = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, data)
            os.fdatasync(fd)
            samples.append(time.perf_counter() - t0)
            if gap_s:
                time.sleep(gap_s)
    finally:
        os.close(fd)
        path.unlink()
    return percentiles(samples)


def round_trips(bootstrap: str, topic: str, n: int) -> dict:
    """p50/p99 of one 100-byte record produced with acks=all and awaited, n times in a row."""

    import uvloop

    from client.aio import Producer
    from client.cli.perf import percentiles

    async def run() -> dict:
        async with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=0) as p:
            await p.send_and_wait(topic, b"x" * 100)
            samples = []
            for _ in range(n):
                t0 = time.perf_counter()
                await p.send_and_wait(topic, b"x" * 100)
                samples.append(time.perf_counter() - t0)
        return percentiles(samples)

    return uvloop.run(run())


def parallel_produce(bootstrap: str, topic: str, procs: int, records: int) -> dict:
    """`procs` `gregor perf produce` processes at once, one partition each: aggregate rec/s."""
    gregor = Path(sys.executable).with_name("gregor")
    cmd = [str(gregor)] if gregor.exists() else [sys.executable, "-m", "client.cli"]
    args = ["perf", "produce", "--topic", topic, "--num-records", str(records),
            "--record-size", "100", "--bootstrap-server", bootstrap,
            "-X", "batch.size=1048576", "-X", "max.request.size=8388608"]  # fmt: skip
    t0 = time.monotonic()
    running = [
        subprocess.Popen([*cmd, *args, "--partition", str(i)], stdout=subprocess.PIPE, text=True)
        for i in range(procs)
    ]
    outs = [json.loads(p.communicate()[0]) for p in running]
    elapsed = time.monotonic() - t0
    return {
        "processes": procs,
        "records_per_s": round(procs * records / elapsed, 1),
        "errors": sum(o["errors"] for o in outs),
    }


def run_suite(bootstrap: str, args: argparse.Namespace, records: int, kib_records: int) -> dict:
    from client import Admin
    from client.cli.perf import run_produce

    tuned = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "batch.size": 1 << 20,
        "linger.ms": 5,
        "max.request.size": 8 << 20,
    }
    suffix = f"{int(time.time() * 1000)}"
    results: dict = {}
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        for name in ("small", "kib", "steady", "rtt", "ab0", "ab1", "ab2", "ab3"):
            admin.create_topic(f"bench-{name}-{suffix}", partitions=1)
        if args.threads:
            admin.create_topic(f"bench-par-{suffix}", partitions=args.parallel)
    results["throughput_100b"] = run_produce(
        tuned, f"bench-small-{suffix}", records, 100, "bulk", 5000
    )
    results["idempotence_100b"] = idempotence_ab(
        tuned, [f"bench-ab{i}-{suffix}" for i in range(4)], records
    )
    results["throughput_1kib"] = run_produce(
        tuned, f"bench-kib-{suffix}", kib_records, 1024, "bulk", 1000
    )
    steady_n = int(args.steady_rate * args.steady_seconds)
    results["steady_latency"] = run_produce(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0},
        f"bench-steady-{suffix}", steady_n, 100, "send", 1, args.steady_rate,
    )  # fmt: skip
    results["round_trip"] = round_trips(bootstrap, f"bench-rtt-{suffix}", 2000)
    if args.threads:
        results["parallel"] = parallel_produce(
            bootstrap, f"bench-par-{suffix}", args.parallel, records // args.parallel
        )
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--kib-records", type=int, default=300_000)
    ap.add_argument("--steady-rate", type=float, default=5000)
    ap.add_argument("--steady-seconds", type=float, default=5)
    ap.add_argument("--bootstrap", help="use a running broker instead of starting one")
    ap.add_argument("--data-dir", help="where the started broker keeps data (default: a temp dir)")
    ap.add_argument("--no-flush-on-ack", action="store_true", help="log.flush.on.ack=false")
    ap.add_argument("--threads", help="sweep: NETxIO,... e.g. 1x1,2x2,3x8")
    ap.add_argument("--parallel", type=int, default=4, help="producer processes in the sweep")
    ap.add_argument(
        "--metrics",
        choices=("off", "on", "both"),
        default="off",
        help="the broker's metrics.listener: off, on (loopback, free port), or both: each run"
        " twice, off then on, in one invocation (their cost, docs/metrics.md)",
    )
    args = ap.parse_args()

    base: dict = {"log.flush.on.ack": "false"} if args.no_flush_on_ack else {}
    threads = (
        [tuple(int(x) for x in c.split("x")) for c in args.threads.split(",")]
        if args.threads
        else [None]
    )
    metrics = {"off": [False], "on": [True], "both": [False, True]}[args.metrics]
    configs = [(conf, m) for conf in threads for m in metrics]
    out: dict = {"load_before": os.getloadavg()[0], "runs": []}
    for conf, metrics_on in configs:
        overrides = dict(base)
        if metrics_on:
            overrides["metrics.listener"] = "http://127.0.0.1:0"
        if conf is not None:
            overrides["num.network.threads"], overrides["num.io.threads"] = conf
        tmp = tempfile.mkdtemp(prefix="gregor-produce-bench-", dir=args.data_dir)
        proc = None
        try:
            if args.bootstrap:
                bootstrap = args.bootstrap
            else:
                proc, bootstrap, _, _ = start_server(str(Path(tmp) / "data"), overrides=overrides)
            scale = 2 if conf is not None else 1  # the sweep runs half-size workloads
            run = {"broker_overrides": overrides, "bootstrap": bootstrap}
            run.update(run_suite(bootstrap, args, args.records // scale, args.kib_records // scale))
            run["bare_fdatasync"] = fsync_latency(tmp, 2000)
            run["bare_fdatasync_paced_1ms"] = fsync_latency(tmp, 1000, gap_s=0.001)
            out["runs"].append(run)
        finally:
            if proc is not None:
                stop_server(proc)
            shutil.rmtree(tmp, ignore_errors=True)
    out["load_after"] = os.getloadavg()[0]
    if len(out["runs"]) == 1:
        out = {**{k: v for k, v in out.items() if k != "runs"}, **out["runs"][0]}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
