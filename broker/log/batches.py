"""What goes into and comes out of a `Log` (log.py): the check of an append's batches, and the
results of appends, reads and timestamp lookups."""

from __future__ import annotations

from typing import Any, NamedTuple

from client.errors import CorruptRecordError, MessageTooLargeError, OffsetOutOfRangeError
from client.records.header import peek_size, validate, validate_all


class UnexpectedAppendOffsetError(OffsetOutOfRangeError):
    """append_as_follower got batches that do not continue the log end offset."""


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    batch_count: int
    record_count: int
    size_bytes: int
    log_start_offset: int


class ReadResult(NamedTuple):
    data: bytes  # whole batches; b"" when nothing is available
    first_offset: int  # base offset of the first batch (may be < the requested offset)
    next_offset: int  # offset after the last returned batch (= requested offset when empty)
    log_start_offset: int
    end_offset: int  # log end offset when the read ran


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int


def validate_batches(
    buf: bytearray | memoryview, max_bytes: int | None, prefix: str
) -> list[tuple[Any, ...]]:
    """(position, header) of every batch of `buf`, CRCs checked; none larger than `max_bytes`
    (when given)."""
    headers = validate_all(buf, max_bytes)  # the C extension's one call, when it has no doubt
    if headers is not None:
        return headers
    if not len(buf):
        raise CorruptRecordError(f"{prefix} empty records")
    headers = []
    pos, n = 0, len(buf)
    while pos < n:
        if max_bytes is not None:  # from the header alone: no CRC time on a batch refused anyway
            size = peek_size(buf, pos)
            if size is not None and size > max_bytes:
                raise MessageTooLargeError(
                    f"batch of {size} bytes exceeds max.message.bytes {max_bytes}"
                )
        h = validate(buf, pos, True)
        headers.append((pos, h))
        pos += h.size
    return headers
