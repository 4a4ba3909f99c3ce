"""INTERIM batch encode/decode for the client until client.records' builder/reader land
(H-records). Same byte layout as client/records/header.py (DESIGN.md section 4):

    61-byte header | records section: msgpack array of
                     [offset_delta, timestamp_delta, key|nil, value|nil, headers|nil]
                     (gzip/lz4/zstd-compressed as a whole per attributes bits 0-2)

Deleted once `client.records.build_batch` / `decode_batch` exist; `client.aio.batches` picks
whichever is present.
"""

from __future__ import annotations

import gzip

import msgpack

from client.errors import CorruptRecordError, MissingCodecError
from client.records.crc import crc32c
from client.records.header import HEADER, HEADER_SIZE, LOG_OVERHEAD, MAGIC, iter_headers, validate

CODECS = {"none": 0, "gzip": 1, "lz4": 3, "zstd": 4}


def _compress(codec: int, data: bytes) -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        return gzip.compress(data, compresslevel=1)
    try:
        if codec == 3:
            import lz4.frame

            return lz4.frame.compress(data)
        if codec == 4:
            import zstandard

            return zstandard.ZstdCompressor(level=1).compress(data)
    except ImportError as exc:
        raise MissingCodecError(f"compression codec {codec} needs {exc.name}") from None
    raise CorruptRecordError(f"unknown compression codec {codec}")


def _decompress(codec: int, data: bytes | memoryview) -> bytes:
    if codec == 0:
        return bytes(data)
    if codec == 1:
        return gzip.decompress(data)
    try:
        if codec == 3:
            import lz4.frame

            return lz4.frame.decompress(data)
        if codec == 4:
            import zstandard

            return zstandard.ZstdDecompressor().decompress(data, max_output_size=1 << 31)
    except ImportError as exc:
        raise MissingCodecError(f"compression codec {codec} needs {exc.name}") from None
    raise CorruptRecordError(f"unknown compression codec {codec}")


def build_batch(entries: list, compression: str = "none", timestamp_ms: int = 0) -> bytes:
    """entries: [(key, value) | (key, value, headers, timestamp_ms)] -> one batch."""
    codec = CODECS[compression]
    entries = [e if len(e) == 4 else (e[0], e[1], None, timestamp_ms) for e in entries]
    base_ts = entries[0][3]
    max_ts = base_ts
    recs = []
    for i, (key, value, headers, ts) in enumerate(entries):
        if ts > max_ts:
            max_ts = ts
        recs.append((i, ts - base_ts, key, value, headers))
    section = _compress(codec, msgpack.packb(recs, use_bin_type=True))
    n = len(entries)
    total = HEADER_SIZE + len(section)
    head = bytearray(
        HEADER.pack(
            0, total - LOG_OVERHEAD, -1, MAGIC, 0, codec, n - 1, base_ts, max_ts, -1, -1, -1, n
        )
    )
    crc = crc32c(section, crc32c(bytes(head[21:])))
    head[17:21] = crc.to_bytes(4, "big")
    return bytes(head) + section


def decode_batches(buf: bytes | memoryview, check_crc: bool = True) -> list[tuple]:
    """Every record of every whole batch in `buf`: [(offset, timestamp, key, value, headers)]."""
    out: list[tuple] = []
    mv = memoryview(buf)
    for pos, h in iter_headers(mv):
        if check_crc:
            validate(mv, pos, check_crc=True)
        section = _decompress(h.compression, mv[pos + HEADER_SIZE : pos + h.size])
        base, bts = h.base_offset, h.base_timestamp
        for od, td, key, value, headers in msgpack.unpackb(section, raw=False, use_list=False):
            out.append((base + od, bts + td, key, value, headers))
    return out
