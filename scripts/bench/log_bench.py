"""Benchmark broker/log against the raw file-system baseline; prints JSON.

For 1 KiB, 16 KiB and 256 KiB batches, on one file system (a temp dir under --dir):

- append, mode "group": append_as_leader one batch per call (CRC-32C validation, offset and
  epoch rewrite, one pwrite), Log.flush() (fdatasync of data and indexes) after every
  --group-bytes; raw baseline: os.write of the same bytes and os.fdatasync at the same points.
- append, mode "flusher": one thread appends and calls request_flush after every append while the
  Flusher thread group-commits; timed until the last append is reported flushed. Reports how many
  fsync rounds covered the appends.
- read: the whole log with Log.read(offset, --read-bytes) vs raw os.pread of --read-bytes chunks
  of the raw file (page cache warm for both); --read-passes interleaved passes, the best counts.
- crc32c_MBps: crcmod's CRC-32C alone on the same bytes (the validation the raw path skips).

Usage: python scripts/bench/log_bench.py [--dir /tmp] [--mib 64] [--sizes 1024,16384,262144]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import msgpack  # noqa: E402

from broker.log import Flusher, Log, LogConfig  # noqa: E402
from client.records.crc import crc32c, require_c_extension  # noqa: E402
from client.records.header import CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD  # noqa: E402


def make_batch(size: int) -> bytes:
    """One uncompressed v2 batch of about `size` bytes (16 records)."""
    per = max(1, (size - HEADER_SIZE - 16 * 12) // 16)
    body = msgpack.packb(
        [[i, 0, None, os.urandom(per), None] for i in range(16)], use_bin_type=True
    )
    buf = bytearray(
        HEADER.pack(
            0, HEADER_SIZE - LOG_OVERHEAD + len(body), -1, 2, 0, 0, 15, 1, 1, -1, -1, -1, 16
        )
    )
    buf += body
    buf[17:21] = crc32c(memoryview(buf)[CRC_START:]).to_bytes(4, "big")
    return bytes(buf)


def fs_of(path: Path) -> str:
    best = ("?", "?", "")
    for line in Path("/proc/mounts").read_text().splitlines():
        dev, mnt, fstype = line.split()[:3]
        if str(path).startswith(mnt) and len(mnt) >= len(best[2]):
            best = (dev, fstype, mnt)
    return f"{best[0]} ({best[1]}) mounted on {best[2]}"


def raw_append(path: Path, batch: bytes, count: int, group: int) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    for i in range(count):
        os.write(fd, batch)
        if (i + 1) % group == 0:
            os.fdatasync(fd)
    os.fdatasync(fd)
    dt = time.perf_counter() - t0
    os.close(fd)
    return dt


def log_append_group(
    directory: Path, cfg: LogConfig, batch: bytes, count: int, group: int
) -> tuple[float, Log]:
    log = Log(directory, "bench", 0, cfg)
    t0 = time.perf_counter()
    for i in range(count):
        log.append_as_leader(batch, 1)
        if (i + 1) % group == 0:
            log.flush()
    log.flush()
    return time.perf_counter() - t0, log


def log_append_flusher(
    directory: Path, cfg: LogConfig, batch: bytes, count: int
) -> tuple[float, int]:
    log = Log(directory, "bench", 0, cfg)
    done = threading.Event()
    target = count * 16

    def on_flushed(topic: str, partition: int, offset: int) -> None:
        if offset >= target:
            done.set()

    flusher = Flusher("bench", on_flushed).start()
    t0 = time.perf_counter()
    for _ in range(count):
        log.append_as_leader(batch, 1)
        flusher.request_flush(log)
    if not done.wait(120):
        raise RuntimeError("flusher did not catch up within 120 s")
    dt = time.perf_counter() - t0
    flusher.stop()
    log.close()
    return dt, flusher.rounds


def raw_read(path: Path, chunk: int) -> float:
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    t0 = time.perf_counter()
    pos = 0
    while pos < size:
        pos += len(os.pread(fd, chunk, pos))
    dt = time.perf_counter() - t0
    os.close(fd)
    return dt


def log_read(log: Log, chunk: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    offset, total = log.log_start_offset, 0
    end = log.end_offset
    while offset < end:
        r = log.read(offset, chunk)
        total += len(r.data)
        offset = r.next_offset
    return time.perf_counter() - t0, total


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--dir", default="/tmp", help="parent of the temp dir (its file system is measured)"
    )
    ap.add_argument("--mib", type=int, default=64, help="MiB appended per batch size")
    ap.add_argument("--sizes", default="1024,16384,262144")
    ap.add_argument("--group-bytes", type=int, default=1 << 20, help="bytes per group commit")
    ap.add_argument("--read-bytes", type=int, default=1 << 20, help="max_bytes per read")
    ap.add_argument("--read-passes", type=int, default=15, help="read passes (best one counts)")
    ap.add_argument(
        "--crc",
        choices=["crcmod", "google"],
        default="crcmod",
        help="CRC-32C used by validation: crcmod (the project's) or google_crc32c (an experiment: "
        "must be importable, e.g. via PYTHONPATH)",
    )
    args = ap.parse_args()
    require_c_extension()
    if args.crc == "google":
        import google_crc32c

        import client.records.header as header

        # google_crc32c accepts only read-only buffers: the copy is part of the measurement
        header.crc32c = lambda data, crc=0: google_crc32c.extend(crc, bytes(data))
    root = Path(tempfile.mkdtemp(prefix="log-bench-", dir=args.dir))
    cfg = LogConfig(segment_bytes=256 * 1024 * 1024)
    out: dict = {
        "dir": str(root),
        "file_system": fs_of(root),
        "group_commit_bytes": args.group_bytes,
        "read_max_bytes": args.read_bytes,
        "crc_implementation": args.crc,
        "results": [],
    }
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            batch = make_batch(size)
            count = max(1, (args.mib << 20) // len(batch))
            group = max(1, args.group_bytes // len(batch))
            mb = count * len(batch) / 1e6
            raw_path = root / f"raw-{size}.bin"
            raw_dt = raw_append(raw_path, batch, count, group)
            log_dt, log = log_append_group(root / f"group-{size}", cfg, batch, count, group)
            fl_dt, rounds = log_append_flusher(root / f"flusher-{size}", cfg, batch, count)
            t0 = time.perf_counter()
            blob = batch * min(count, max(1, (16 << 20) // len(batch)))
            crc32c(blob)
            crc_mbps = len(blob) / 1e6 / (time.perf_counter() - t0)
            # page cache is warm for both; passes are short, so interleave and keep the best
            raw_times, log_times = [], []
            for _ in range(args.read_passes):
                raw_times.append(raw_read(raw_path, args.read_bytes))
                dt, total = log_read(log, args.read_bytes)
                assert total == count * len(batch)
                log_times.append(dt)
            raw_read_dt, read_dt = min(raw_times), min(log_times)
            log.close()
            out["results"].append(
                {
                    "batch_bytes": len(batch),
                    "batches": count,
                    "raw_append_MBps": round(mb / raw_dt, 1),
                    "log_append_group_MBps": round(mb / log_dt, 1),
                    "log_append_group_batches_per_s": round(count / log_dt),
                    "log_append_flusher_MBps": round(mb / fl_dt, 1),
                    "log_append_flusher_batches_per_s": round(count / fl_dt),
                    "flusher_fsync_rounds": rounds,
                    "append_ratio_group": round(raw_dt / log_dt, 3),
                    "append_ratio_flusher": round(raw_dt / fl_dt, 3),
                    "crc32c_MBps": round(crc_mbps, 1),
                    "raw_pread_MBps": round(mb / raw_read_dt, 1),
                    "log_read_MBps": round(mb / read_dt, 1),
                    "read_ratio": round(raw_read_dt / read_dt, 3),
                }
            )
            shutil.rmtree(root / f"group-{size}")
            shutil.rmtree(root / f"flusher-{size}")
            raw_path.unlink()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
