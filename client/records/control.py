"""Control records: the COMMIT/ABORT markers that end a transaction on a partition (KIP-98).

A marker is a control batch (attributes bit 5 control + bit 4 transactional, no compression)
of the transaction's producer id and epoch, base_sequence -1, holding one record whose key and
value are Kafka's exact bytes (so the Kafka listener's conversion yields Kafka's record):

    key   = version int16 (0) | type int16 (0 ABORT, 1 COMMIT)
    value = version int16 (0) | coordinator_epoch int32

Only the partition leader writes them (WriteTxnMarkers, sent by the transaction coordinator);
Produce refuses control batches. Pure functions, any thread.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import msgpack

from client.errors import CorruptRecordError
from client.records.builder import _assemble
from client.records.header import (
    CONTROL_BIT,
    HEADER_SIZE,
    NO_SEQUENCE,
    TRANSACTIONAL_BIT,
    BatchHeader,
)

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CONTROL_RECORD_VERSION = 0


class Marker(NamedTuple):
    commit: bool
    coordinator_epoch: int


def marker_key(commit: bool) -> bytes:
    return _KEY.pack(CONTROL_RECORD_VERSION, COMMIT if commit else ABORT)


def build_marker(
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp_ms: int,
    base_offset: int = 0,
) -> bytes:
    """The control batch of one COMMIT (`commit`) or ABORT marker."""
    value = _VALUE.pack(CONTROL_RECORD_VERSION, coordinator_epoch)
    section = msgpack.packb([(0, 0, marker_key(commit), value, None)], use_bin_type=True)
    return _assemble(
        section, 1, 0, base_offset, CONTROL_BIT | TRANSACTIONAL_BIT, timestamp_ms, timestamp_ms,
        producer_id, producer_epoch, NO_SEQUENCE,
    )  # fmt: skip


def parse_marker(h: BatchHeader, batch: bytes | bytearray | memoryview, pos: int = 0) -> Marker:
    """The marker of the control batch `h` at `pos` of `batch` (uncompressed, one record).
    CorruptRecordError for anything else."""
    if not h.attributes & CONTROL_BIT:
        raise CorruptRecordError(f"batch at {h.base_offset} is not a control batch")
    try:
        rows = msgpack.unpackb(bytes(batch[pos + HEADER_SIZE : pos + h.size]), raw=False)
        key, value = rows[0][2], rows[0][3]
        version, kind = _KEY.unpack(key)
        _v, coordinator_epoch = _VALUE.unpack(value[: _VALUE.size])
    except (ValueError, TypeError, IndexError, struct.error, msgpack.UnpackException) as exc:
        raise CorruptRecordError(f"malformed control record at {h.base_offset}: {exc}") from exc
    if version != CONTROL_RECORD_VERSION or kind not in (ABORT, COMMIT):
        raise CorruptRecordError(
            f"control record at {h.base_offset}: version {version} type {kind} unknown"
        )
    return Marker(kind == COMMIT, coordinator_epoch)
