"""Benchmark broker/log against the raw file-system baseline; prints JSON.

Appends run --rounds times, raw, group and flusher interleaved; the best round of each is
compared (append_ratio_*), and the ratio of medians is reported too. Each append run starts with
one untimed batch written and synced (raw file and logs alike), so that file creation, the
leader-epoch checkpoint and the directory fsync of a new log are not counted: the figures are
steady-state appends to an existing log.

For 1 KiB, 16 KiB and 256 KiB batches, on one file system (a temp dir under --dir):

- append, mode "group": append_as_leader one batch per call (CRC-32C validation, offset and
  epoch rewrite, one pwrite), Log.flush() (fdatasync of data and indexes) after every
  --group-bytes; raw baseline: os.write of the same bytes and os.fdatasync at the same points.
- append, mode "flusher": one thread appends and calls request_flush after every append while the
  Flusher thread group-commits; timed until the last append is reported flushed. Reports how many
  fsync rounds covered the appends.
- read: the whole log with Log.read(offset, --read-bytes) vs raw os.pread of --read-bytes chunks
  of the raw file (page cache warm for both), interleaved call by call; --read-passes passes,
  the best of each counts.
- crc32c_MBps: the CRC-32C alone on the same bytes (the validation the raw path skips), with the
  backend client/records/crc.py picked (google-crc32c when installed, else crcmod; --crc crcmod
  forces the fallback for comparison).
- records: batch encode and decode of 100-byte records, records/s (scripts/bench/records_bench.py,
  uncompressed: build_batch, and decode_records of 1 MiB fetch buffers with the CRC checked).

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
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import msgpack
import records_bench

import client.records.crc as crc
import client.records.header as header
from broker.log import Flusher, Log, LogConfig
from client.records.crc import require_c_extension
from client.records.header import CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD


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
    buf[17:21] = header.crc32c(memoryview(buf)[CRC_START:]).to_bytes(4, "big")
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
    os.write(fd, batch)  # warm-up, untimed: the file exists and is synced
    os.fdatasync(fd)
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
    log.append_as_leader(batch, 1)  # warm-up, untimed: files, epoch checkpoint, dir synced
    log.flush()
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
    log.append_as_leader(batch, 1)  # warm-up, untimed: files, epoch checkpoint, dir synced
    log.flush()
    done = threading.Event()
    target = (count + 1) * 16

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


def read_pass(path: Path, log: Log, chunk: int) -> tuple[float, float, int]:
    """One pass over the raw file (os.pread of `chunk` bytes) and over the log (Log.read with
    max_bytes `chunk`), interleaved call by call so that other processes' load hits both alike.
    Returns (raw seconds, log seconds, log bytes read)."""
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    clock = time.perf_counter
    raw_dt = log_dt = 0.0
    pos = total = 0
    offset, end = log.log_start_offset, log.end_offset
    while pos < size or offset < end:
        if pos < size:
            t0 = clock()
            pos += len(os.pread(fd, chunk, pos))
            raw_dt += clock() - t0
        if offset < end:
            t0 = clock()
            r = log.read(offset, chunk)
            log_dt += clock() - t0
            total += len(r.data)
            offset = r.next_offset
            del r  # one result buffer alive at a time on both paths (malloc reuses it)
    os.close(fd)
    return raw_dt, log_dt, total


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
    ap.add_argument(
        "--rounds", type=int, default=3, help="interleaved append rounds (best one counts)"
    )
    ap.add_argument("--read-bytes", type=int, default=1 << 20, help="max_bytes per read")
    ap.add_argument("--read-passes", type=int, default=15, help="read passes (best one counts)")
    ap.add_argument(
        "--crc",
        choices=["auto", "crcmod"],
        default="auto",
        help="CRC-32C used by validation: auto (client/records/crc.py's choice) or crcmod "
        "(forces the fallback, for comparison)",
    )
    ap.add_argument("--records", type=int, default=200_000, help="records for encode/decode")
    ap.add_argument("--no-records", action="store_true", help="skip the encode/decode rows")
    args = ap.parse_args()
    require_c_extension()
    crc_backend = crc.BACKEND
    if args.crc == "crcmod":
        header.crc32c = crc.crcmod_crc32c
        crc_backend = "crcmod"
    root = Path(tempfile.mkdtemp(prefix="log-bench-", dir=args.dir))
    cfg = LogConfig(segment_bytes=256 * 1024 * 1024)
    out: dict = {
        "dir": str(root),
        "file_system": fs_of(root),
        "group_commit_bytes": args.group_bytes,
        "append_rounds": args.rounds,
        "read_max_bytes": args.read_bytes,
        "cpus": os.cpu_count(),
        "load_avg_1m_at_start": round(os.getloadavg()[0], 2),
        "crc_backend": crc_backend,
        "results": [],
    }
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            batch = make_batch(size)
            count = max(1, (args.mib << 20) // len(batch))
            group = max(1, args.group_bytes // len(batch))
            mb = count * len(batch) / 1e6
            raw_path = root / f"raw-{size}.bin"
            # Rounds interleave raw, group and flusher so that a burst of I/O from other
            # processes hits all three alike; the best round of each counts (medians reported).
            raw_ts: list[float] = []
            group_ts: list[float] = []
            flusher_ts: list[float] = []
            log: Log | None = None
            for _ in range(args.rounds):
                raw_ts.append(raw_append(raw_path, batch, count, group))
                if log is not None:
                    log.close()
                    shutil.rmtree(root / f"group-{size}")
                    shutil.rmtree(root / f"flusher-{size}")
                dt, log = log_append_group(root / f"group-{size}", cfg, batch, count, group)
                group_ts.append(dt)
                dt, rounds = log_append_flusher(root / f"flusher-{size}", cfg, batch, count)
                flusher_ts.append(dt)
            raw_dt, log_dt, fl_dt = min(raw_ts), min(group_ts), min(flusher_ts)
            assert log is not None
            blob = batch * min(count, max(1, (16 << 20) // len(batch)))
            header.crc32c(blob[: 1 << 20])  # warm
            t0 = time.perf_counter()
            header.crc32c(blob)
            crc_mbps = len(blob) / 1e6 / (time.perf_counter() - t0)
            # page cache is warm for both; passes are short, so interleave and keep the best
            raw_times, log_times = [], []
            for _ in range(args.read_passes):
                raw_read_dt, read_dt, total = read_pass(raw_path, log, args.read_bytes)
                assert total == (count + 1) * len(batch)  # the warm-up batch too
                raw_times.append(raw_read_dt)
                log_times.append(read_dt)
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
                    "append_ratio_group_median": round(median(raw_ts) / median(group_ts), 3),
                    "append_ratio_flusher_median": round(median(raw_ts) / median(flusher_ts), 3),
                    "crc32c_MBps": round(crc_mbps, 1),
                    "raw_pread_MBps": round(total / 1e6 / raw_read_dt, 1),
                    "log_read_MBps": round(total / 1e6 / read_dt, 1),
                    "read_ratio": round(raw_read_dt / read_dt, 3),
                }
            )
            shutil.rmtree(root / f"group-{size}")
            shutil.rmtree(root / f"flusher-{size}")
            raw_path.unlink()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if not args.no_records:
        row = records_bench.run("none", args.records, 1000, 100, 1 << 20, 5)
        out["records"] = {
            k: row[k]
            for k in (
                "records",
                "batch_records",
                "value_bytes",
                "encode_records_per_s",
                "decode_records_per_s",
                "decode_batch_per_s",
                "decode_no_crc_records_per_s",
            )
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
