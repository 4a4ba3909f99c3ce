"""Record batches between Kafka's records section (varints) and Gregor's (msgpack).

Both formats share the 61-byte v2 batch header byte for byte (docs/record-format.md); only the
records section after it differs:

    Kafka (per record)                          Gregor (the whole section, one msgpack array)
    length          varint (zigzag)             [offset_delta, timestamp_delta, key, value,
    attributes      int8 (unused, 0)             headers]
    timestamp_delta varlong                      headers: nil | [[key str, value bin|nil], ...]
    offset_delta    varint
    key_length      varint (-1: null), key
    value_length    varint (-1: null), value
    header_count    varint, then per header: key_length varint, key (UTF-8),
                                             value_length varint (-1: null), value

Conversion happens at the Kafka listener (docs/decisions.md): a produced batch is turned into
Gregor's form before it reaches the replica manager, so logs hold one format and the native
path pays nothing; a fetched batch is turned back on its way out. Every header field is kept
(offsets, timestamps and their type, producer id/epoch/sequence, the codec); the CRC and
batch_length are recomputed for the new section. Compressed sections are decompressed and
recompressed with the same codec (gzip, lz4, zstd: the same containers in both formats);
snappy, which Gregor does not build, is refused (`UnsupportedCodec`, Kafka's
UNSUPPORTED_COMPRESSION_TYPE).

Pure functions; any thread may call.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator, Sequence
from typing import Protocol

import msgpack

from client.errors import CorruptRecordError
from client.records import compression
from client.records.crc import crc32c
from client.records.header import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    parse_header,
    peek_size,
)

SNAPPY = 2

# A row of Gregor's records section: [offset_delta, ts_delta, key, value, headers], where a
# header is [key, value]
Header = list[str | bytes | None]
Row = list[int | bytes | list[Header] | None]


class _Converter(Protocol):
    """broker/kafka/_convert.c: None means "left to the Python reference"."""

    def kafka_to_msgpack(self, section: bytes | memoryview, count: int, /) -> bytes | None: ...

    def msgpack_to_kafka(self, section: bytes | memoryview, count: int, /) -> bytes | None: ...


def _load_convert() -> _Converter | None:
    """The optional C transcoder (broker/kafka/_convert.c), or None: not built, or
    GREGOR_NO_EXTENSIONS set (as for client.records' extensions)."""
    if os.environ.get("GREGOR_NO_EXTENSIONS", "") not in ("", "0"):
        return None
    try:
        from broker.kafka import _convert  # type: ignore[attr-defined]
    except ImportError:
        return None
    converter: _Converter = _convert
    return converter


_C = _load_convert()
CONVERTER = "c" if _C is not None else "python"
_CRC = struct.Struct(">I")
_LENGTH = struct.Struct(">i")


class UnsupportedCodec(Exception):
    """A batch compressed with a codec Gregor does not build (snappy)."""


# -- varints (Kafka's zigzag encoding) ---------------------------------------------------------
def _write_varint(out: bytearray, value: int) -> None:
    v = (value << 1) ^ (value >> 63)
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _varint_size(value: int) -> int:
    v = (value << 1) ^ (value >> 63)
    n = 1
    while v > 0x7F:
        v >>= 7
        n += 1
    return n


def _read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    raw = 0
    while True:
        if pos >= len(buf):
            raise CorruptRecordError("truncated varint in records section")
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes in records section")


def _read_bytes(buf: bytes | memoryview, pos: int) -> tuple[bytes | None, int]:
    n, pos = _read_varint(buf, pos)
    if n < 0:
        return None, pos
    end = pos + n
    if end > len(buf):
        raise CorruptRecordError("record field runs past the end of the records section")
    return bytes(buf[pos:end]), end


# -- sections ----------------------------------------------------------------------------------
def kafka_rows(section: bytes | memoryview, count: int) -> list[Row]:
    """Kafka's records section → Gregor's rows `[offset_delta, ts_delta, key, value, headers]`."""
    rows: list[Row] = []
    pos = 0
    for _ in range(count):
        length, pos = _read_varint(section, pos)
        end = pos + length
        if length < 0 or end > len(section):
            raise CorruptRecordError(f"record length {length} runs past the records section")
        pos += 1  # attributes
        ts_delta, pos = _read_varint(section, pos)
        offset_delta, pos = _read_varint(section, pos)
        key, pos = _read_bytes(section, pos)
        value, pos = _read_bytes(section, pos)
        n_headers, pos = _read_varint(section, pos)
        headers: list[Header] | None = None
        if n_headers > 0:
            headers = []
            for _ in range(n_headers):
                hkey, pos = _read_bytes(section, pos)
                hvalue, pos = _read_bytes(section, pos)
                if hkey is None:
                    raise CorruptRecordError("record header with a null key")
                try:
                    headers.append([hkey.decode(), hvalue])
                except UnicodeDecodeError as exc:
                    raise CorruptRecordError(f"record header key is not UTF-8: {exc}") from exc
        elif n_headers < 0:
            raise CorruptRecordError(f"negative header count {n_headers}")
        if pos != end:
            raise CorruptRecordError(f"record of {length} bytes has {end - pos} trailing bytes")
        rows.append([offset_delta, ts_delta, key, value, headers])
    if pos != len(section):
        raise CorruptRecordError(f"{len(section) - pos} bytes after the last record")
    return rows


def kafka_section(rows: Sequence[object]) -> bytes:
    """Gregor's rows (as msgpack decodes them) → Kafka's records section."""
    out = bytearray()
    body = bytearray()
    for row in rows:
        if not isinstance(row, (list, tuple)) or len(row) != 5:
            raise CorruptRecordError("records section row is not [od, td, key, value, headers]")
        offset_delta, ts_delta, key, value, headers = row
        body.clear()
        body.append(0)  # attributes
        _write_varint(body, ts_delta)
        _write_varint(body, offset_delta)
        for field in (key, value):
            if field is None:
                body.append(1)  # zigzag(-1)
            else:
                raw = field.encode() if isinstance(field, str) else bytes(field)
                _write_varint(body, len(raw))
                body += raw
        if headers:
            _write_varint(body, len(headers))
            for hkey, hvalue in headers:
                raw = hkey.encode() if isinstance(hkey, str) else bytes(hkey)
                _write_varint(body, len(raw))
                body += raw
                if hvalue is None:
                    body.append(1)
                else:
                    hraw = hvalue.encode() if isinstance(hvalue, str) else bytes(hvalue)
                    _write_varint(body, len(hraw))
                    body += hraw
        else:
            body.append(0)
        _write_varint(out, len(body))
        out += body
    return bytes(out)


# -- batches -----------------------------------------------------------------------------------
def _rebuild(batch: bytes | memoryview, section: bytes) -> bytes:
    """`batch`'s header with `section` as its records section: new batch_length and CRC."""
    out = bytearray(batch[:HEADER_SIZE])
    out += section
    _LENGTH.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    _CRC.pack_into(out, 17, crc32c(bytes(memoryview(out)[CRC_START:])))
    return bytes(out)


def _iter_batches(buf: bytes | memoryview, whole_only: bool) -> Iterator[memoryview]:
    view = memoryview(buf)
    pos = 0
    while pos < len(view):
        size = peek_size(view, pos)
        if size is None or size < HEADER_SIZE or pos + size > len(view):
            if whole_only:
                return  # a partial last batch (fetch): the client asks again from there
            raise CorruptRecordError(f"truncated record batch at position {pos}")
        yield view[pos : pos + size]
        pos += size


def _codec(batch: memoryview) -> int:
    if batch[MAGIC_OFFSET] != MAGIC:
        raise CorruptRecordError(f"record batch magic {batch[MAGIC_OFFSET]}, expected {MAGIC}")
    codec = parse_header(batch).attributes & COMPRESSION_MASK
    if codec == SNAPPY:
        raise UnsupportedCodec("snappy compression is not supported: use gzip, lz4 or zstd")
    if codec not in compression.CODEC_NAMES:
        raise UnsupportedCodec(f"unknown compression codec id {codec}")
    return codec


def from_kafka(records: bytes | memoryview) -> bytes:
    """A Produce request's record batches (Kafka's form) → Gregor's form.

    CorruptRecordError for a malformed batch (the replica manager checks what is left: CRC of
    the new section, counts, sequences); UnsupportedCodec for snappy."""
    out = []
    for batch in _iter_batches(records, whole_only=False):
        h = parse_header(batch)
        if h.attributes & CONTROL_BIT:
            raise CorruptRecordError("control batches cannot be produced")
        if crc32c(bytes(batch[CRC_START:])) != h.crc:
            raise CorruptRecordError("record batch CRC mismatch")
        codec = _codec(batch)
        section = compression.decompress(codec, batch[HEADER_SIZE:])
        packed = _C.kafka_to_msgpack(section, h.record_count) if _C is not None else None
        if packed is None:  # no C, or input it leaves to the reference (which says why)
            packed = msgpack.packb(kafka_rows(section, h.record_count), use_bin_type=True)
        out.append(_rebuild(batch, compression.compress(codec, packed)))
    return b"".join(out)


def to_kafka(records: bytes | memoryview) -> bytes:
    """A Fetch answer's record batches (Gregor's form) → Kafka's form; a trailing partial
    batch is dropped (the consumer asks again from its offset)."""
    out = []
    for batch in _iter_batches(records, whole_only=True):
        codec = _codec(batch)
        section = compression.decompress(codec, batch[HEADER_SIZE:])
        count = parse_header(batch).record_count
        converted = _C.msgpack_to_kafka(section, count) if _C is not None else None
        if converted is None:
            converted = _section_from_msgpack(section, count)
        out.append(_rebuild(batch, compression.compress(codec, converted)))
    return b"".join(out)


def _section_from_msgpack(section: bytes | memoryview, count: int) -> bytes:
    """The Python reference of msgpack_to_kafka: CorruptRecordError for what it cannot take."""
    try:
        rows = msgpack.unpackb(section, raw=False, use_list=True)
    except Exception as exc:
        raise CorruptRecordError(f"stored records section is not msgpack: {exc}") from exc
    if not isinstance(rows, list) or len(rows) != count:
        raise CorruptRecordError(f"stored records section does not hold {count} records")
    try:
        return kafka_section(rows)
    except (TypeError, ValueError, AttributeError) as exc:
        raise CorruptRecordError(f"stored record of an unexpected shape: {exc}") from exc
