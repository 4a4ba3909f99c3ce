#!/usr/bin/env python
"""How far the Flusher's reports lag appends, with the appends open-loop or awaiting acks;
prints one JSON object.

One thread appends to one log (broker/log, a LogManager and its Flusher on --dir) what
tests/faults/log_crash_child.py appends: 1-4 uncompressed batches of 1-5 records of 1-3000
bytes per append, request_flush after each, for --seconds. --mode picks when it appends:

  open    as fast as it can, never waiting (what the crash-test child did before it was bounded)
  window  while at most --window records are unflushed, else it waits for a report (the child now)
  ack     each append waits until it is reported flushed (a producer with acks and one in flight)

Reported: MB/s appended; lag = time from an append to the report covering it (p50/p99/max);
rounds (Log.flush calls on the flusher thread) with their duration, records and dirty
segments; every fdatasync's duration. --fsync-delay-ms adds a sleep after each fdatasync the
log does, a stand-in for a disk busy with other writers (a simulation, labelled as such in
the output); 0 measures the real disk. Timing wraps Log.flush and os.fdatasync in this process
only.

    .venv/bin/python scripts/bench/flush_lag_bench.py [--mode open|window|ack] [--seconds 10]
        [--segment-kib 1024] [--fsync-delay-ms 0] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from broker.log import LogConfig, LogManager  # noqa: E402
from broker.log.log import Log  # noqa: E402
from client.cli.perf import percentiles  # noqa: E402
from client.records import build_batch  # noqa: E402


def run(args: argparse.Namespace, directory: Path) -> dict:
    rng = random.Random(args.seed)
    fsyncs: list[tuple[float, float]] = []  # (start, seconds)
    rounds: list[tuple[float, float, int, int]] = []  # (start, seconds, records, dirty segments)
    real_fdatasync, real_flush = os.fdatasync, Log.flush
    delay = args.fsync_delay_ms / 1000

    def timed_fdatasync(fd: int) -> None:
        t = time.monotonic()
        real_fdatasync(fd)
        if delay:
            time.sleep(delay)
        fsyncs.append((t, time.monotonic() - t))

    def timed_flush(log: Log) -> int:
        t, before, dirty = time.monotonic(), log.flushed_offset, log.durability.dirty_segments
        after = real_flush(log)
        rounds.append((t, time.monotonic() - t, after - before, dirty))
        return after

    os.fdatasync, Log.flush = timed_fdatasync, timed_flush  # type: ignore[method-assign]
    cond = threading.Condition()
    reports: list[tuple[float, int]] = []

    def on_flushed(topic: str, partition: int, offset: int) -> None:
        with cond:
            reports.append((time.monotonic(), offset))
            cond.notify_all()

    def reported() -> int:
        return reports[-1][1] if reports else 0

    cfg = LogConfig(segment_bytes=args.segment_kib * 1024, index_interval_bytes=1024)
    mgr = LogManager([directory], cfg)
    appends: list[tuple[float, int, int]] = []  # (time, end offset after, bytes)
    try:
        mgr.start_flushers(on_flushed)
        log = mgr.get_or_create("lag", 0)
        end_t = time.monotonic() + args.seconds
        while time.monotonic() < end_t:
            if args.mode == "window":
                with cond:
                    cond.wait_for(lambda: log.end_offset - reported() <= args.window)
            parts = [
                build_batch([(None, b"v" * rng.randint(1, 3000)) for _ in range(rng.randint(1, 5))])
                for _ in range(rng.randint(1, 4))
            ]
            data = b"".join(parts)
            info = log.append_as_leader(data, leader_epoch=1)
            appends.append((time.monotonic(), info.last_offset + 1, len(data)))
            mgr.request_flush(log)
            if args.mode == "ack":
                with cond:
                    cond.wait_for(lambda last=info.last_offset: reported() > last)
        with cond:  # the last appends' reports, so that every lag is measured
            cond.wait_for(lambda: reported() >= log.end_offset)
    finally:
        mgr.close(clean=True)
        os.fdatasync, Log.flush = real_fdatasync, real_flush  # type: ignore[method-assign]
    offsets = [o for _, o in reports]
    lags = [reports[bisect.bisect_left(offsets, end)][0] - t for t, end, _ in appends]
    written = sum(n for *_, n in appends)
    return {
        "mode": args.mode,
        "window_records": args.window if args.mode == "window" else None,
        "segment_kib": args.segment_kib,
        "simulated_fsync_delay_ms": args.fsync_delay_ms,
        "seconds": args.seconds,
        "appends": len(appends),
        "records": appends[-1][1] if appends else 0,
        "MB_per_s": round(written / 1e6 / args.seconds, 1),
        "lag": percentiles(lags),
        "rounds": len(rounds),
        "round": percentiles([r[1] for r in rounds]),
        "round_records_p50": sorted(r[2] for r in rounds)[len(rounds) // 2],
        "round_records_max": max(r[2] for r in rounds),
        "round_dirty_segments_max": max(r[3] for r in rounds),
        "round_seconds_in_fdatasync": round(
            sum(d for _, d in fsyncs) / max(1e-9, sum(r[1] for r in rounds)), 3
        ),
        "fdatasyncs": len(fsyncs),
        "fdatasync": percentiles([d for _, d in fsyncs]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=("open", "window", "ack"), default="open")
    ap.add_argument("--window", type=int, default=200, help="unflushed records (--mode window)")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--segment-kib", type=int, default=1024)
    ap.add_argument("--fsync-delay-ms", type=float, default=0, help="simulated slow disk")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", default=None, help="parent of the temp log dir")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="flush-lag-", dir=args.dir))
    try:
        print(json.dumps(run(args, tmp / "logs"), indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
