#!/usr/bin/env python
"""What a follower's catch-up copy costs the producers of the same broker, by the size of its
fetches at a fixed rate (issue 23: producer p99 during a throttled move); prints JSON.

One process, as a broker that leads a producer's partition and adds a replica of a moving one
(the reassign bench's broker 4 during its throttled move), on --dir (one disk, as every broker
of a local cluster):

- the producer: every 5 ms a 100 B batch appended as leader to log `p`, then fdatasync
  (Log.flush, what log.flush.on.ack does before an acks=all answer); its latency is measured;
- a GIL probe: a thread sleeping 1 ms in a loop; its oversleep is how long a thread that
  wants the GIL (the network thread, the flusher) waits;
- the copy: a thread appending --rate-mb MB/s as follower to log `m` in chunks of a given size
  (batches of 100 kB), each chunk copied once (the fetch answer's decode), appended, then
  fdatasynced before the next (the replica fetcher's order), paced evenly.

Modes alternate in rounds (--rounds x --seconds each), so load on the machine falls on every
mode alike: `idle` (no copy), `chunk_<bytes>` for each --chunks size. The defaults compare 5 MB
(a tenth of a second of 50 MB/s: the throttle before the pacing change) and 0.5 MB (10 ms of it:
the throttle since).

    .venv/bin/python scripts/bench/catchup_pacing_bench.py [--rate-mb 50]
        [--chunks 5000000,500000] [--rounds 3] [--seconds 4] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from broker.log import LogConfig, LogManager  # noqa: E402
from client.cli.perf import percentiles  # noqa: E402
from client.records import build_batch  # noqa: E402

_BASE = struct.Struct(">q")


class Copy(threading.Thread):
    """Appends `rate` bytes/s as follower to `log` in chunks of `chunk` bytes, fsynced each."""

    def __init__(self, log, rate: float, chunk: int) -> None:  # type: ignore[no-untyped-def]
        super().__init__(daemon=True)
        self.log, self.rate = log, rate
        self.batch = bytearray(build_batch([(None, b"m" * 10_000) for _ in range(10)]))
        self.per_chunk = max(1, chunk // len(self.batch))
        self.stop = threading.Event()

    def run(self) -> None:
        nxt = time.monotonic()
        while not self.stop.is_set():
            off = self.log.end_offset
            parts = []
            for _ in range(self.per_chunk):
                _BASE.pack_into(self.batch, 0, off)
                parts.append(bytes(self.batch))
                off += 10
            data = b"".join(parts)  # the fetch answer's records, copied once by its decode
            self.log.append_as_follower(data)
            self.log.flush()
            nxt += len(data) / self.rate
            self.stop.wait(max(0.0, nxt - time.monotonic()))


def run(args: argparse.Namespace, directory: Path) -> dict:
    chunks = [int(c) for c in args.chunks.split(",")]
    modes = ["idle"] + [f"chunk_{c}" for c in chunks]
    lat: dict[str, list[float]] = {m: [] for m in modes}
    gil: dict[str, list[float]] = {m: [] for m in modes}
    mode = ["idle"]
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            t = time.monotonic()
            time.sleep(0.001)
            gil.setdefault(mode[0], []).append(time.monotonic() - t - 0.001)

    mgr = LogManager([directory], LogConfig(segment_bytes=256 << 20))
    try:
        p = mgr.get_or_create("p", 0)
        m = mgr.get_or_create("m", 0)
        small = build_batch([(None, b"x" * 100)])
        threading.Thread(target=probe, daemon=True).start()
        for _ in range(args.rounds):
            for i, name in enumerate(modes):
                copy = None if i == 0 else Copy(m, args.rate_mb * 1e6, chunks[i - 1])
                if copy is not None:
                    copy.start()
                mode[0] = name
                end = time.monotonic() + args.seconds
                while time.monotonic() < end:
                    t = time.monotonic()
                    p.append_as_leader(small, leader_epoch=1)
                    p.flush()
                    lat[name].append(time.monotonic() - t)
                    time.sleep(0.005)
                mode[0] = "between"
                if copy is not None:
                    copy.stop.set()
                    copy.join()
        stop.set()
    finally:
        mgr.close(clean=False)
    return {
        "rate_MB_per_s": args.rate_mb,
        "load_before": args.load_before,
        "load_after": round(os.getloadavg()[0], 2),
        "produce_append_fsync_ms": {k: percentiles(v) for k, v in lat.items()},
        "gil_wait_ms": {
            k: {
                "p99": round(sorted(v)[int(0.99 * len(v))] * 1000, 2) if v else None,
                "max": round(max(v) * 1000, 2) if v else None,
            }
            for k, v in gil.items()
            if k in lat
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate-mb", type=float, default=50.0)
    ap.add_argument(
        "--chunks", default="5000000,500000", help="chunk sizes, bytes, comma-separated"
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--dir", default=None, help="where the logs go (default: a temp dir)")
    args = ap.parse_args()
    args.load_before = round(os.getloadavg()[0], 2)
    directory = Path(tempfile.mkdtemp(prefix="gregor-pacing-", dir=args.dir))
    try:
        print(json.dumps(run(args, directory), indent=2))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
