"""Crash-test child for tests/faults/test_log_crash.py (also the batch maker of the log fault tests).

Run as `python log_crash_child.py LOG_DIR SEED`: opens a LogManager on LOG_DIR, then forever
appends 1-4 concatenated batches to topic "crash" partition 0, asks the Flusher to fsync, and
prints each flushed offset reported by the Flusher's on_flushed callback (one line, flushed to
stdout only after the fsync returned). Record values encode their own offset
(b"<offset>:" repeated) so the parent can check every batch it reads back.
"""

from __future__ import annotations

import random
import sys
import threading
from pathlib import Path

import msgpack

from client.records.crc import crc32c
from client.records.header import CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD

CONFIG = dict(segment_bytes=1024 * 1024, index_interval_bytes=1024)


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

    log_dir, seed = Path(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    mgr = LogManager([log_dir], LogConfig(**CONFIG))
    out_lock = threading.Lock()

    def on_flushed(topic: str, partition: int, offset: int) -> None:
        with out_lock:
            sys.stdout.write(f"{offset}\n")
            sys.stdout.flush()

    mgr.start_flushers(on_flushed)
    log = mgr.get_or_create("crash", 0)
    print(f"start {log.end_offset}", flush=True)
    while True:
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


if __name__ == "__main__":
    main()
