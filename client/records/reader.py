"""Reading record batches: validate a batch's header and CRC, then decode its records.

Layout: see client/records/header.py (header) and client/records/builder.py (records section).
A record decodes to Record(offset, timestamp, key, value, headers) with absolute offset and
timestamp (base + delta); headers is None or a tuple of (str key, bytes value) tuples.

Errors: any malformed input (bad header, CRC, truncation, undecompressable or non-msgpack
section, wrong record shape, record count not matching the header) raises CorruptRecordError
with the reason, never another exception type. A missing codec package raises MissingCodecError.

Pure code; any thread may call.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import msgpack

from client.errors import CorruptRecordError
from client.records.compression import decompress
from client.records.header import HEADER_SIZE, BatchHeader, peek_size, validate

Buffer = bytes | bytearray | memoryview


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] | None


_new = tuple.__new__


def _unpack(section: Any, pos: int) -> Any:
    try:
        return msgpack.unpackb(section, raw=False, use_list=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several types (ExtraData, FormatError, ValueError...)
        raise CorruptRecordError(
            f"batch at position {pos}: records section is not valid msgpack: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _records(h: BatchHeader, section: Any, pos: int) -> list[Record]:
    rows = _unpack(section, pos)
    if type(rows) is not tuple:
        raise CorruptRecordError(
            f"batch at position {pos}: records section is a {type(rows).__name__}, not an array"
        )
    if len(rows) != h.record_count:
        raise CorruptRecordError(
            f"batch at position {pos}: record count mismatch: header says {h.record_count}, "
            f"records section holds {len(rows)}"
        )
    base, bts = h.base_offset, h.base_timestamp
    try:
        out = [_new(Record, (base + od, bts + td, k, v, hd)) for od, td, k, v, hd in rows]
    except (TypeError, ValueError) as exc:
        raise CorruptRecordError(
            f"batch at position {pos}: malformed record (expected "
            f"[offset_delta, timestamp_delta, key, value, headers]): {exc}"
        ) from exc
    if out and (type(rows[0][0]) is not int or type(rows[-1][0]) is not int):
        raise CorruptRecordError(f"batch at position {pos}: offset deltas are not integers")
    return out


def decode_batch(buf: Buffer, pos: int = 0, check_crc: bool = True) -> list[Record]:
    """All records of the one batch starting at `pos` in `buf` (trailing bytes ignored)."""
    h = validate(buf, pos, check_crc=check_crc)
    mv = memoryview(buf)[pos + HEADER_SIZE : pos + h.size]
    return _records(h, decompress(h.compression, mv), pos)


def iter_batches(buf: Buffer, check_crc: bool = True) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Yield (header, batch bytes) for each whole batch of `buf`, validated.

    A partial batch at the end (as a size-limited fetch may return) ends the iteration; a
    corrupt whole batch raises CorruptRecordError.
    """
    mv = memoryview(buf)
    n = len(mv)
    pos = 0
    while n - pos >= HEADER_SIZE:
        size = peek_size(mv, pos)
        assert size is not None
        if size < HEADER_SIZE:
            raise CorruptRecordError(f"batch at position {pos}: size {size} is below the header")
        if pos + size > n:
            return
        h = validate(mv, pos, check_crc=check_crc)
        yield h, mv[pos : pos + size]
        pos += size


def decode_records(buf: Buffer, check_crc: bool = True) -> list[Record]:
    """Every record of every whole batch in `buf` (a partial trailing batch is ignored)."""
    out: list[Record] = []
    for h, mv in iter_batches(buf, check_crc):
        section = decompress(h.compression, mv[HEADER_SIZE:])
        out.extend(_records(h, section, 0))
    return out
