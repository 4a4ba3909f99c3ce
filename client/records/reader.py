"""Reading record batches: validate a batch's header and CRC, then decode its records.

Layout: see client/records/header.py (header) and client/records/builder.py (records section).
A record decodes to Record(offset, timestamp, key, value, headers) with absolute offset and
timestamp (base + delta); headers is None or a tuple of (str key, bytes value) tuples.
decode_partition_records builds the consumer's ConsumerRecord(topic, partition, offset,
timestamp, key, value, headers or ()) directly in the same single pass (one tuple per record).
next_offset reads only headers: the offset after the last whole batch (the next fetch offset).

Errors: any malformed input (bad header, CRC, truncation, undecompressable or non-msgpack
section, wrong record shape, record count not matching the header) raises CorruptRecordError
with the reason, never another exception type. A missing codec package raises MissingCodecError.

Speed: two decoders build the same records. DECODER == "c" when the optional C extension
client.records._speedups (client/records/_speedups.c) is built and GREGOR_NO_EXTENSIONS is unset
or "0": it parses the plain records-section shape straight into the named tuples (~0.13 us per
record against ~0.45 us in Python, allocation and freeing included) and returns None for
anything else (other msgpack types, wrong shapes or counts, trailing bytes...); that batch is
then decoded by the Python path, which raises the precise CorruptRecordError. DECODER ==
"python" otherwise: one msgpack C call per batch, then one pass building the tuples. Both share
the base timestamp's int for a record whose timestamp delta is 0.

GC: decoding pauses the cyclic garbage collector for the batch (the objects made are acyclic
tuples, bytes and ints; with the collector on, a pass every 700 new tuples slows decoding
~1.5-2x); the previous state is restored at once, and objects still alive are seen by the next
collection as usual. decode_partition_records also moves the young objects to the oldest
generation when it resumes the collector (see its docstring): the consumer's hot path, where the
young-generation pass over every fresh record was ~18% of the consumer's time.

Pure code; any thread may call (the GC pause is process-global for the milliseconds it lasts).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import msgpack

from client.errors import CorruptRecordError
from client.records.compression import decompress
from client.records.extensions import optional_extension
from client.records.header import (
    CONTROL_BIT,
    HEADER_SIZE,
    TRANSACTIONAL_BIT,
    BatchHeader,
    parse_header,
    peek_size,
    validate,
)
from client.records.record import ConsumerRecord, Record

Buffer = bytes | bytearray | memoryview


_new = tuple.__new__
_ZERO = 0  # the cached small int msgpack returns for a 0 delta (identity test, add otherwise)


_speedups = optional_extension("client.records._speedups")
_c_decode_rows: Any = None if _speedups is None else _speedups.decode_rows
DECODER = "python" if _c_decode_rows is None else "c"


def _unpack(section: Any, pos: int) -> Any:
    try:
        return msgpack.unpackb(section, raw=False, use_list=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several types (ExtraData, FormatError, ValueError...)
        raise CorruptRecordError(
            f"batch at position {pos}: records section is not valid msgpack: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _rows(h: BatchHeader, section: Any, pos: int) -> tuple[Any, ...]:
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
    return rows


def _malformed(pos: int, exc: Exception) -> Exception:
    return CorruptRecordError(
        f"batch at position {pos}: malformed record (expected "
        f"[offset_delta, timestamp_delta, key, value, headers]): {exc}"
    )


_KEY_TYPES = frozenset((bytes, str, type(None)))


def _check_types(rows: tuple[Any, ...], pos: int) -> None:
    """The types the C decoder insists on (the Python path runs when it declines a section,
    or without the extension): int deltas, keys and values bytes, str (a batch built from str)
    or None, headers ((str, bytes | None), ...). Without the CRC check a flipped byte can give
    any msgpack type; it is refused here rather than handed to the caller as a key."""
    for od, td, k, v, hd in rows:
        if type(od) is not int or type(td) is not int:
            raise CorruptRecordError(f"batch at position {pos}: record deltas are not integers")
        if type(k) not in _KEY_TYPES or type(v) not in _KEY_TYPES:
            raise CorruptRecordError(
                f"batch at position {pos}: a key or value is a {type(k).__name__}/"
                f"{type(v).__name__}, not bin, str or nil"
            )
        if hd is not None and (
            type(hd) is not tuple
            or not all(
                type(h) is tuple and len(h) == 2 and type(h[0]) is str
                and (h[1] is None or type(h[1]) is bytes)
                for h in hd
            )
        ):  # fmt: skip
            raise CorruptRecordError(f"batch at position {pos}: malformed headers {hd!r:.80}")


def _c_rows(
    h: BatchHeader, section: Any, record_type: type, prefix: tuple[Any, ...], no_headers: Any
) -> list[Any] | None:
    """The batch's records from the C decoder; None when it is not in use or declines the
    section (the caller then runs the Python path)."""
    if _c_decode_rows is None:
        return None
    rows: list[Any] | None = _c_decode_rows(
        section, record_type, prefix, h.base_offset, h.base_timestamp, h.record_count, no_headers
    )
    return rows


def _records(h: BatchHeader, section: Any, pos: int) -> list[Record]:
    out = _c_rows(h, section, Record, (), None)
    return out if out is not None else _py_records(h, section, pos)


def _py_records(h: BatchHeader, section: Any, pos: int) -> list[Record]:
    rows = _rows(h, section, pos)
    base, bts = h.base_offset, h.base_timestamp
    try:
        out = [
            _new(Record, (base + od, bts if td is _ZERO else bts + td, k, v, hd))
            for od, td, k, v, hd in rows
        ]
    except (TypeError, ValueError) as exc:
        raise _malformed(pos, exc) from exc
    _check_types(rows, pos)
    return out


def _consumer_records(
    h: BatchHeader, section: Any, pos: int, topic: str, partition: int
) -> list[ConsumerRecord]:
    out = _c_rows(h, section, ConsumerRecord, (topic, partition), ())
    return out if out is not None else _py_consumer_records(h, section, pos, topic, partition)


def _py_consumer_records(
    h: BatchHeader, section: Any, pos: int, topic: str, partition: int
) -> list[ConsumerRecord]:
    rows = _rows(h, section, pos)
    base, bts = h.base_offset, h.base_timestamp
    try:
        out = [
            _new(
                ConsumerRecord,
                (topic, partition, base + od, bts if td is _ZERO else bts + td, k, v, hd or ()),
            )
            for od, td, k, v, hd in rows
        ]
    except (TypeError, ValueError) as exc:
        raise _malformed(pos, exc) from exc
    _check_types(rows, pos)
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
    for pos, size in _whole_batches(mv):
        yield validate(mv, pos, check_crc=check_crc), mv[pos : pos + size]


def _whole_batches(mv: memoryview) -> Iterator[tuple[int, int]]:
    """(position, size) of each whole batch from the start of `mv`, by the size fields alone;
    stops at a partial batch; CorruptRecordError when a size is below the header size."""
    n = len(mv)
    pos = 0
    while n - pos >= HEADER_SIZE:
        size = peek_size(mv, pos)
        assert size is not None
        if size < HEADER_SIZE:
            raise CorruptRecordError(f"batch at position {pos}: size {size} is below the header")
        if pos + size > n:
            return
        yield pos, size
        pos += size


def next_offset(buf: Buffer) -> int | None:
    """The offset after the last whole batch of `buf` (its base_offset + last_offset_delta + 1),
    from the headers alone: no CRC check, no decoding. None when `buf` holds no whole batch.
    Raises CorruptRecordError when a batch's size field is below the header size."""
    got = next_offset_and_epoch(buf)
    return None if got is None else got[0]


def next_offset_and_epoch(buf: Buffer) -> tuple[int, int] | None:
    """(next_offset(buf), the partition leader epoch of its last whole batch), or None."""
    mv = memoryview(buf)
    last = -1
    for last, _ in _whole_batches(mv):  # noqa: B007 (the last whole batch is wanted)
        pass
    if last < 0:
        return None
    h = parse_header(mv, last)
    return h.base_offset + h.last_offset_delta + 1, h.partition_leader_epoch


def decode_records(buf: Buffer, check_crc: bool = True) -> list[Record]:
    """Every record of every whole batch in `buf` (a partial trailing batch is ignored)."""
    return _decode_all(buf, check_crc, _records)


def decode_partition_records(
    buf: Buffer,
    topic: str,
    partition: int,
    check_crc: bool = True,
    aborted: Sequence[Mapping[str, int]] | None = None,
) -> list[ConsumerRecord]:
    """Every record of every whole batch in `buf` as ConsumerRecord(topic, partition, offset,
    timestamp, key, value, headers or ()), in one pass (what a consumer's fetch needs).
    Control batches (transaction markers) are never returned. `aborted` (read_committed: the
    Fetch answer's aborted_transactions, [{producer_id, first_offset}]) drops the records of
    those transactions, as Kafka's consumer does: a producer's transactional batches from its
    first_offset on are dropped until its ABORT marker.

    GC: the host's collector settings are never touched. The C decoder creates records that
    the cyclic GC does not track (their fields are ints, bytes, str, None and untracked header
    tuples, so they cannot be part of a cycle: `untrack_if_atomic` in _speedups.c), so a large
    fetch adds nothing for young-generation collections to traverse. The Python decoder's
    records are tracked like any named tuple.
    """

    def batch(h: BatchHeader, section: Any, pos: int) -> list[ConsumerRecord]:
        return _consumer_records(h, section, pos, topic, partition)

    return _decode_all(buf, check_crc, batch, True, _AbortedFilter(aborted) if aborted else None)


class _AbortedFilter:
    """Which batches of a read_committed fetch belong to aborted transactions (Kafka's
    Fetcher: producers enter the aborted set when a batch reaches their first offset, and
    leave it at their ABORT marker)."""

    def __init__(self, aborted: Sequence[Mapping[str, int]]) -> None:
        self._pending = sorted(
            ((int(a["first_offset"]), int(a["producer_id"])) for a in aborted), reverse=True
        )
        self._open: set[int] = set()

    def skip(self, h: BatchHeader, section: Buffer) -> bool:
        """True when the batch `h` (its records `section`) is not to be returned."""
        last = h.base_offset + h.last_offset_delta
        pending = self._pending
        while pending and pending[-1][0] <= last:
            self._open.add(pending.pop()[1])
        if h.attributes & CONTROL_BIT:
            if h.producer_id in self._open and _is_abort(section):
                self._open.discard(h.producer_id)
            return True
        return bool(h.attributes & TRANSACTIONAL_BIT) and h.producer_id in self._open


def _is_abort(section: Buffer) -> bool:
    try:
        key = msgpack.unpackb(bytes(section), raw=False)[0][2]
        return bytes(key[2:4]) == b"\x00\x00"  # type 0 ABORT (key: version int16, type int16)
    except (ValueError, TypeError, IndexError, msgpack.UnpackException):
        return False


def _decode_all(
    buf: Buffer,
    check_crc: bool,
    batch: Callable[[BatchHeader, Any, int], list[Any]],
    skip_control: bool = False,
    aborted: _AbortedFilter | None = None,
) -> list[Any]:
    """`batch(header, records section, position)` for every whole batch of `buf`,
    concatenated; `skip_control`: control batches left out, and with `aborted`, aborted
    transactions' batches too."""
    out: list[Any] = []
    pos = 0
    for h, mv in iter_batches(buf, check_crc):
        if skip_control and (h.attributes & CONTROL_BIT or aborted is not None):
            section = decompress(h.compression, mv[HEADER_SIZE:])
            if (aborted is not None and aborted.skip(h, section)) or h.attributes & CONTROL_BIT:
                pos += h.size
                continue
            out += batch(h, section, pos)
        else:
            out += batch(h, decompress(h.compression, mv[HEADER_SIZE:]), pos)
        pos += h.size
    return out
