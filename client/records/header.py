"""Record batch header: the fixed big-endian layout of docs/architecture.md §4 (Kafka's v2).

Byte layout (61 bytes, then the records section):

    off  size  field
    0    8     base_offset             int64   rewritten by the broker (outside the CRC)
    8    4     batch_length            int32   bytes after this field (total = 12 + batch_length)
    12   4     partition_leader_epoch  int32   rewritten by the broker (outside the CRC)
    16   1     magic                   int8    always 2
    17   4     crc                     uint32  CRC-32C of bytes [21, end)
    21   2     attributes              int16   bits 0-2 codec (0 none, 1 gzip, 3 lz4, 4 zstd),
                                               bit 3 timestamp type, bit 4 transactional, bit 5 control
    23   4     last_offset_delta       int32
    27   8     base_timestamp          int64
    35   8     max_timestamp           int64
    43   8     producer_id             int64
    51   2     producer_epoch          int16
    53   4     base_sequence           int32
    57   4     record_count            int32
    61   ...   records section (msgpack array, compressed as a whole per attributes)

Everything here is pure and allocation-light: the broker parses headers, validates CRCs and
patches offsets without decoding records.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

from client.errors import CorruptRecordError
from client.records.crc import crc32c
from client.records.extensions import optional_extension

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base_offset + batch_length: bytes not counted by batch_length
MAGIC = 2
CRC_START = 21  # CRC covers [CRC_START, end)
MAGIC_OFFSET = 16
CRC_OFFSET = 17
_PREFIX = struct.Struct(">qi")  # base_offset, batch_length
_OFFSET_EPOCH = struct.Struct(">q")  # base_offset at 0
_EPOCH = struct.Struct(">i")  # partition_leader_epoch at 12
# base_offset, batch_length, partition_leader_epoch at 0: a leader rewrites the first and the
# last in one pack_into, batch_length with the value it has (Log.append_as_leader)
PREFIX_EPOCH = struct.Struct(">qii")
_U32 = struct.Struct(">I")
_MAX_TS = struct.Struct(">q")  # max_timestamp at 35

_new = tuple.__new__

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
_SEQUENCE_MAX = 2**31 - 1


def seq_add(seq: int, n: int) -> int:
    """`seq` + `n` in the batch sequence space (wraps past 2^31-1 to 0, as Kafka's)."""
    if seq > _SEQUENCE_MAX - n:
        return n - (_SEQUENCE_MAX - seq) - 1
    return seq + n


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch, header included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the header at `pos`. Raises CorruptRecordError if fewer than 61 bytes remain."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(
            f"truncated batch header: {len(buf) - pos} bytes at position {pos}, need {HEADER_SIZE}"
        )
    return _new(BatchHeader, HEADER.unpack_from(buf, pos))  # _make without its length check


def peek_size(buf: bytes | bytearray | memoryview, pos: int = 0) -> int | None:
    """Total size of the batch starting at `pos`, or None if its 12-byte prefix is incomplete."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    length: int = _PREFIX.unpack_from(buf, pos)[1]
    return LOG_OVERHEAD + length


def validate(
    buf: bytes | bytearray | memoryview, pos: int = 0, check_crc: bool = True
) -> BatchHeader:
    """Validate the batch at `pos` (magic, lengths, counts, CRC) and return its header.

    Raises CorruptRecordError with a precise reason. Does not decode records.
    """
    h = parse_header(buf, pos)
    if h.magic != MAGIC:
        raise CorruptRecordError(f"bad magic {h.magic} at position {pos}, expected {MAGIC}")
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(
            f"batch length {h.batch_length} at position {pos} is smaller than the header"
        )
    end = pos + h.size
    if end > len(buf):
        raise CorruptRecordError(
            f"truncated batch at position {pos}: length says {h.size} bytes, "
            f"{len(buf) - pos} present"
        )
    if h.record_count < 0 or h.last_offset_delta < 0:
        raise CorruptRecordError(
            f"count mismatch at position {pos}: record_count={h.record_count}, "
            f"last_offset_delta={h.last_offset_delta}"
        )
    if h.record_count != h.last_offset_delta + 1 and h.record_count != 0:
        # Compaction may leave gaps (count < delta + 1); producers never do.
        if h.record_count > h.last_offset_delta + 1:
            raise CorruptRecordError(
                f"count mismatch at position {pos}: record_count={h.record_count} exceeds "
                f"last_offset_delta+1={h.last_offset_delta + 1}"
            )
    if check_crc:
        actual = crc32c(memoryview(buf)[pos + CRC_START : end])
        if actual != h.crc:
            raise CorruptRecordError(
                f"CRC mismatch at position {pos}: stored {h.crc:#010x}, computed {actual:#010x}"
            )
    return h


_crc_ext = optional_extension("client.records._crc")
# validate_batches(buf, max_bytes or -1, BatchHeader) -> list | None (client/records/_crc.c)
_c_validate_batches: Callable[..., list[tuple[int, BatchHeader]] | None] | None = (
    _crc_ext.validate_batches
    if _crc_ext is not None and _crc_ext.HARDWARE and hasattr(_crc_ext, "validate_batches")
    else None
)


def validate_all(
    buf: bytes | bytearray | memoryview, max_bytes: int | None = None
) -> list[tuple[int, BatchHeader]] | None:
    """[(position, header), ...] of the batches that fill `buf`, each passing `validate` (CRC
    included) and none larger than `max_bytes` (when given), in one call of the C extension
    (client/records/_crc.c); None when `buf` is empty, any batch fails a check, or the
    extension is missing: the caller then runs `validate` batch by batch, which raises the
    precise error (or, when only the extension is missing, gives the same list)."""
    if _c_validate_batches is None:
        return None
    return _c_validate_batches(buf, -1 if max_bytes is None else max_bytes, BatchHeader)


def set_base_offset(buf: bytearray | memoryview, base_offset: int, pos: int = 0) -> None:
    """Rewrite base_offset in place (outside the CRC-covered bytes)."""
    _OFFSET_EPOCH.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, epoch: int, pos: int = 0) -> None:
    """Rewrite partition_leader_epoch in place (outside the CRC-covered bytes)."""
    _EPOCH.pack_into(buf, pos + 12, epoch)


def iter_headers(
    buf: bytes | bytearray | memoryview, check_crc: bool = False
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each whole batch in `buf`; stops at a partial tail."""
    pos = 0
    n = len(buf)
    while n - pos >= HEADER_SIZE:
        size = peek_size(buf, pos)
        assert size is not None
        if pos + size > n:
            return
        h = validate(buf, pos, check_crc=check_crc) if check_crc else parse_header(buf, pos)
        yield pos, h
        pos += h.size
