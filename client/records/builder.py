"""Building record batches: `build_batch` for bulk producers, `BatchBuilder` for accumulators.

A batch is the 61-byte header of client/records/header.py followed by the records section:

    records section = msgpack array of records, compressed as a whole (attributes bits 0-2)
    record          = [offset_delta int, timestamp_delta int, key bin|nil, value bin|nil,
                       headers|nil]
    headers         = [[key str, value bin], ...]

offset_delta counts from base_offset (0, 1, 2, ... as built); timestamp_delta is relative to
base_timestamp, the first record's timestamp (deltas may be negative). max_timestamp is the
largest record timestamp. base_offset and partition_leader_epoch are outside the CRC, so the
broker rewrites them in place without re-encoding (header.set_base_offset).

Speed: plain records ((key, value), or (key, value, None, timestamp) with bytes or None) are
packed by the optional C extension (client/records/_speedups.c, `encode_rows`) straight from
the caller's tuples, ~15x faster than building row tuples for msgpack; anything else, or
without the extension (ENCODER == "python", e.g. GREGOR_NO_EXTENSIONS=1), by msgpack's C packer
from row tuples, one call per batch. Both write the same bytes.
Pure code; any thread may call `build_batch`. A BatchBuilder belongs to one thread at a time.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import Any

import msgpack

from client.records.compression import NONE, codec_id, compress
from client.records.crc import crc32c
from client.records.extensions import optional_extension
from client.records.header import (
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    TRANSACTIONAL_BIT,
)

# Most msgpack bytes per record besides key, value and headers: array 1, offset delta 5,
# timestamp delta 5 (9 beyond +-2**31 ms, added per record), key and value 5 each, headers 1.
RECORD_OVERHEAD = 22
_packb = functools.partial(msgpack.packb, use_bin_type=True)  # a Packer per call: thread-safe


_speedups = optional_extension("client.records._speedups")
_c_encode_rows: Any = None if _speedups is None else _speedups.encode_rows
ENCODER = "python" if _c_encode_rows is None else "c"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _headers_size(headers: Any) -> int:
    if not headers:
        return 0
    return sum(len(k.encode()) + len(v) + 11 for k, v in headers) + 5


def _assemble(
    section: bytes,
    n: int,
    last_offset_delta: int,
    base_offset: int,
    attributes: int,
    base_ts: int,
    max_ts: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
) -> bytes:
    header = HEADER.pack(
        base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(section),
        NO_PARTITION_LEADER_EPOCH,
        MAGIC,
        0,
        attributes,
        last_offset_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        n,
    )
    crc = crc32c(section, crc32c(header[CRC_START:]))
    return b"".join((header[:17], crc.to_bytes(4, "big"), header[CRC_START:], section))


def build_batch(
    records: Sequence[Sequence[Any]],
    base_offset: int = 0,
    compression: str | None = "none",
    timestamp_ms: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
) -> bytes:
    """One batch from `records`: each (key, value) or (key, value, headers, timestamp_ms).

    key/value are bytes or None; headers a list of (str, bytes) pairs or None. A record
    without its own timestamp (2-tuple, or timestamp None) gets `timestamp_ms`, else now.
    Raises ValueError for an empty list or an unknown compression name, MissingCodecError when
    the codec's package is not installed.
    """
    n = len(records)
    if n == 0:
        raise ValueError("build_batch: a batch needs at least one record")
    codec = codec_id(compression)
    default_ts = _now_ms() if timestamp_ms is None else timestamp_ms
    encoded = (
        _c_encode_rows(records, default_ts)
        if _c_encode_rows is not None and type(default_ts) is int and -(2**63) <= default_ts < 2**63
        else None
    )
    if encoded is not None:
        # The C encoder: the same bytes as the paths below, for plain (key, value[, None, ts])
        packed, base_ts, max_ts = encoded
    elif len(records[0]) == 2 and all(len(r) == 2 for r in records):
        # Fast path: one timestamp for all, no headers.
        packed = _packb([(i, 0, k, v, None) for i, (k, v) in enumerate(records)])
        base_ts = max_ts = default_ts
    else:
        rows = []
        first_ts: int | None = None
        max_ts = default_ts
        for i, rec in enumerate(records):
            if len(rec) == 2:
                key, value = rec
                headers = None
                ts = default_ts
            elif len(rec) == 4:
                key, value, headers, ts = rec
                if ts is None:
                    ts = default_ts
            else:
                raise ValueError(
                    f"record {i}: expected (key, value) or (key, value, headers, timestamp_ms), "
                    f"got {len(rec)} fields"
                )
            if first_ts is None:
                first_ts = max_ts = ts
            elif ts > max_ts:
                max_ts = ts
            rows.append((i, ts - first_ts, key, value, list(headers) if headers else None))
        packed = _packb(rows)
        assert first_ts is not None
        base_ts = first_ts
    attributes = codec | (TRANSACTIONAL_BIT if is_transactional else 0)
    section = packed if codec == NONE else compress(codec, packed)
    return _assemble(
        section, n, n - 1, base_offset, attributes, base_ts, max_ts,
        producer_id, producer_epoch, base_sequence,
    )  # fmt: skip


class BatchBuilder:
    """Accumulates records for one batch up to `max_bytes` (estimated, before compression).

    `append` returns False when the record would push the batch past `max_bytes`, except for
    the first record, which is always accepted (an oversized single record is the broker's to
    refuse). Not thread-safe: one owner at a time (e.g. the producer's accumulator under its lock).
    """

    __slots__ = (
        "_codec", "producer_id", "producer_epoch", "base_sequence", "max_bytes",
        "is_transactional", "_rows", "_size", "_base_ts", "_max_ts",
    )  # fmt: skip

    def __init__(
        self,
        compression: str | None = "none",
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        max_bytes: int = 1048576,
        is_transactional: bool = False,
    ) -> None:
        self._codec = codec_id(compression)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.max_bytes = max_bytes
        self.is_transactional = is_transactional
        self._rows: list[tuple[Any, ...]] = []
        self._size = HEADER_SIZE + 5
        self._base_ts: int | None = None
        self._max_ts = 0

    def append(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes]] | None = None,
        timestamp_ms: int | None = None,
    ) -> bool:
        """Add a record; False (record not added) when the batch is full."""
        ts = _now_ms() if timestamp_ms is None else timestamp_ms
        base_ts = ts if self._base_ts is None else self._base_ts
        delta = ts - base_ts
        size = (
            RECORD_OVERHEAD
            + (len(key) if key is not None else 0)
            + (len(value) if value is not None else 0)
            + (0 if -(2**31) <= delta < 2**31 else 4)
            + _headers_size(headers)
        )
        if self._rows and self._size + size > self.max_bytes:
            return False
        if self._base_ts is None:
            self._base_ts = self._max_ts = ts
        elif ts > self._max_ts:
            self._max_ts = ts
        self._rows.append((len(self._rows), delta, key, value, list(headers) if headers else None))
        self._size += size
        return True

    @property
    def record_count(self) -> int:
        return len(self._rows)

    @property
    def estimated_size(self) -> int:
        """Bytes of the batch if built uncompressed (an upper-bound estimate)."""
        return self._size

    def build(self, base_offset: int = 0) -> bytes:
        """The finished batch (the builder may be built again; it is not reset)."""
        n = len(self._rows)
        if n == 0:
            raise ValueError("BatchBuilder.build: no records appended")
        assert self._base_ts is not None
        packed = _packb(self._rows)
        section = packed if self._codec == NONE else compress(self._codec, packed)
        attributes = self._codec | (TRANSACTIONAL_BIT if self.is_transactional else 0)
        return _assemble(
            section, n, n - 1, base_offset, attributes, self._base_ts, self._max_ts,
            self.producer_id, self.producer_epoch, self.base_sequence,
        )  # fmt: skip
