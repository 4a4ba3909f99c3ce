"""Crash-test child for tests/faults/test_log_crash.py (also the batch maker of the log fault tests).

Run as `python log_crash_child.py LOG_DIR SEED REPORTS`: opens a LogManager on LOG_DIR, then
appends 1-4 concatenated batches to topic "crash" partition 0, asks the Flusher to fsync, and
prints each flushed offset reported by the Flusher's on_flushed callback (one line, flushed to
stdout only after the fsync returned), until the parent SIGKILLs it. Record values encode their
own offset (b"<offset>:" repeated) so the parent can check every batch it reads back.

What one run writes is bounded, whatever the disk's speed. Like a producer waiting for its acks,
the child appends on while at most WINDOW records are unflushed (appends keep racing with the
fsync), then waits for a report. Without that wait the appends ran ahead of a slow disk: each
group commit covered what was appended during the previous one, some runs wrote gigabytes, and
the parent's later checks read millions of records. And a run appends at most
budget(REPORTS) records after its start offset (enough for REPORTS reports, see budget()), then
waits to be killed.
"""

from __future__ import annotations

import random
import sys
import threading
from pathlib import Path

import msgpack

from client.records.crc import crc32c
from client.records.header import CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD

CONFIG = {"segment_bytes": 256 * 1024, "index_interval_bytes": 1024}  # a roll every few flushes
WINDOW = 200  # records appended but not yet reported flushed, before the child waits
MAX_APPEND = 4 * 5  # records of one append: 1-4 batches of 1-5 records


def budget(reports: int) -> int:
    """Records one run appends at most: enough for `reports` reports (and one more). Each
    report covers at most WINDOW + MAX_APPEND new records, and once the budget is spent the
    last flush reports everything, so a run reports at least reports + 1 times."""
    return (reports + 1) * (WINDOW + MAX_APPEND)


def make_batch(
    values: list[bytes], base_offset: int = 0, timestamp: int = 1000, epoch: int = -1
) -> bytes:
    """An uncompressed v2 batch; records section = msgpack [[delta, 0, None, value, None], ...]."""
    body = msgpack.packb([[i, 0, None, v, None] for i, v in enumerate(values)], use_bin_type=True)
    n = len(values)
    buf = (
        bytearray(
            HEADER.pack(
                base_offset,
                HEADER_SIZE - LOG_OVERHEAD + len(body),
                epoch,
                2,
                0,
                0,
                n - 1,
                timestamp,
                timestamp,
                -1,
                -1,
                -1,
                n,
            )
        )
        + body
    )
    buf[17:21] = crc32c(memoryview(buf)[CRC_START:]).to_bytes(4, "big")
    return bytes(buf)


def value_for(offset: int, size: int) -> bytes:
    unit = f"{offset}:".encode()
    return (unit * (size // len(unit) + 1))[: max(size, len(unit))]


def main() -> None:
    from broker.log import LogConfig, LogManager

    log_dir, seed, reports = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    mgr = LogManager([log_dir], LogConfig(**CONFIG))
    out_lock = threading.Condition()
    reported = [0]  # the last offset printed (reports come from the flusher thread)

    def on_flushed(topic: str, partition: int, offset: int) -> None:
        with out_lock:
            sys.stdout.write(f"{offset}\n")
            sys.stdout.flush()
            reported[0] = offset
            out_lock.notify_all()

    mgr.start_flushers(on_flushed)
    log = mgr.get_or_create("crash", 0)
    start = log.end_offset
    with out_lock:  # (recovery flushed up to the end)
        reported[0] = max(reported[0], log.flushed_offset)
    print(f"start {start}", flush=True)
    limit = start + budget(reports)
    while log.end_offset + MAX_APPEND <= limit:
        with out_lock:  # (the flush of the previous append reports at least its end)
            out_lock.wait_for(lambda: log.end_offset - reported[0] <= WINDOW)
        offset = log.end_offset
        parts = []
        for _ in range(rng.randint(1, 4)):
            n = rng.randint(1, 5)
            parts.append(
                make_batch([value_for(offset + i, rng.randint(1, 3000)) for i in range(n)])
            )
            offset += n
        log.append_as_leader(b"".join(parts), leader_epoch=1)
        mgr.request_flush(log)
    threading.Event().wait()  # budget spent: the flusher reports the rest, the parent kills


if __name__ == "__main__":
    main()
