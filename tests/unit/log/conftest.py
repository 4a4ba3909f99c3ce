"""Test-only batch maker for the log tests (client/records/builder.py may not exist yet).

make_batch(values, base_offset=0, timestamp=1000) builds an uncompressed v2 batch whose
records section is a msgpack array of [offset_delta, timestamp_delta, key, value, None].
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgpack

from client.records.crc import crc32c
from client.records.header import CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD

sys.path.insert(0, str(Path(__file__).parent))


def make_batch(
    values: list[bytes],
    base_offset: int = 0,
    timestamp: int = 1000,
    epoch: int = -1,
    ts_step: int = 0,
) -> bytes:
    recs = [[i, i * ts_step, None, v, None] for i, v in enumerate(values)]
    body = msgpack.packb(recs, use_bin_type=True)
    n = len(values)
    max_ts = timestamp + (n - 1) * ts_step
    header = bytearray(
        HEADER.pack(
            base_offset,
            HEADER_SIZE - LOG_OVERHEAD + len(body),
            epoch,
            2,
            0,
            0,
            n - 1,
            timestamp,
            max_ts,
            -1,
            -1,
            -1,
            n,
        )
    )
    buf = header + body
    crc = crc32c(memoryview(buf)[CRC_START:])
    buf[17:21] = crc.to_bytes(4, "big")
    return bytes(buf)
