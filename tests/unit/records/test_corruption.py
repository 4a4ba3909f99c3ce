"""Garbage in → CorruptRecordError, never another exception type."""

from __future__ import annotations

import gzip
import random
import struct

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.errors import CorruptRecordError
from client.records import (
    build_batch,
    decode_batch,
    decode_partition_records,
    decode_records,
    validate,
)
from client.records.crc import crc32c
from client.records.header import (
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    set_base_offset,
    set_partition_leader_epoch,
)
from client.records.record import Record

CODECS = ["none", "gzip", "lz4", "zstd"]


def _small(codec: str = "none") -> bytes:
    return build_batch(
        [(b"k1", b"v1", [("h", b"x")], 100), (None, b"v2", None, 101)],
        compression=codec,
    )


def test_every_single_bit_flip_in_crc_region_is_detected():
    batch = _small()
    flips = 0
    for i in range(CRC_START, len(batch)):
        for bit in range(8):
            buf = bytearray(batch)
            buf[i] ^= 1 << bit
            with pytest.raises(CorruptRecordError):
                decode_batch(buf)
            flips += 1
    assert flips == (len(batch) - CRC_START) * 8


def test_flips_in_the_crc_field_itself_are_detected():
    batch = _small()
    for i in range(17, 21):
        for bit in range(8):
            buf = bytearray(batch)
            buf[i] ^= 1 << bit
            with pytest.raises(CorruptRecordError, match="CRC"):
                decode_batch(buf)


@pytest.mark.parametrize("codec", CODECS)
def test_truncation_at_every_length(codec):
    batch = _small(codec)
    for n in range(len(batch)):
        with pytest.raises(CorruptRecordError):
            decode_batch(batch[:n])
        assert decode_records(batch[:n]) == []  # partial tail: no whole batch


def test_rewriting_base_offset_and_epoch_keeps_crc_valid():
    buf = bytearray(_small("zstd"))
    set_base_offset(buf, 123_456_789)
    set_partition_leader_epoch(buf, 17)
    h = validate(buf)
    assert (h.base_offset, h.partition_leader_epoch) == (123_456_789, 17)
    assert [r.offset for r in decode_batch(buf)] == [123_456_789, 123_456_790]


def _forge(section: bytes, record_count: int, attributes: int = 0) -> bytes:
    """A batch with a valid CRC around an arbitrary records section."""
    head = bytearray(
        HEADER.pack(
            0,
            HEADER_SIZE - LOG_OVERHEAD + len(section),
            -1,
            2,
            0,
            attributes,
            max(record_count - 1, 0),
            0,
            0,
            -1,
            -1,
            -1,
            record_count,
        )
    )
    struct.pack_into(">I", head, 17, crc32c(section, crc32c(bytes(head[CRC_START:]))))
    return bytes(head) + section


@pytest.mark.parametrize(
    "section,count,reason",
    [
        (b"\xc1", 1, "not valid msgpack"),
        (msgpack.packb([[0, 0, b"k", b"v", None]]) + b"\x00", 1, "not valid msgpack"),
        (msgpack.packb({"a": 1}), 1, "not an array"),
        (msgpack.packb([[0, 0, b"k", b"v", None]]), 2, "count mismatch"),
        (msgpack.packb([[0, 0, b"k", b"v"]]), 1, "malformed record"),
        (msgpack.packb([5]), 1, "malformed record"),
        (msgpack.packb([["a", 0, b"k", b"v", None]]), 1, "malformed record"),
    ],
)
def test_wrong_shapes_name_the_reason(section, count, reason):
    with pytest.raises(CorruptRecordError, match=reason):
        decode_batch(_forge(section, count))
    with pytest.raises(CorruptRecordError, match=reason):
        decode_partition_records(_forge(section, count), "t", 0)


@pytest.mark.parametrize("attributes", [1, 3, 4])
def test_undecompressable_sections(attributes):
    with pytest.raises(CorruptRecordError, match="decompress|truncated|after"):
        decode_batch(_forge(b"definitely not compressed", 1, attributes))


def test_unknown_codec_and_trailing_gzip_data():
    with pytest.raises(CorruptRecordError, match="unknown compression"):
        decode_batch(_forge(b"x", 1, attributes=2))
    section = gzip.compress(msgpack.packb([[0, 0, None, None, None]])) + b"junk"
    with pytest.raises(CorruptRecordError, match="after the gzip"):
        decode_batch(_forge(section, 1, attributes=1))


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300), check_crc=st.booleans())
def test_garbage_bytes_only_raise_corrupt(data, check_crc):
    try:
        records = decode_batch(data, check_crc=check_crc)
    except CorruptRecordError:
        return
    _assert_well_formed(records)


@settings(max_examples=300, deadline=None)
@given(
    section=st.binary(max_size=200), count=st.integers(0, 5), attrs=st.sampled_from([0, 1, 3, 4, 7])
)
def test_garbage_sections_with_valid_crc_only_raise_corrupt(section, count, attrs):
    try:
        records = decode_batch(_forge(section, count, attrs))
    except CorruptRecordError:
        return
    _assert_well_formed(records)


def test_random_mutations_of_real_batches_seeded():
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    rng = random.Random(seed)
    batches = [_small(c) for c in CODECS]
    for _ in range(2000):
        buf = bytearray(rng.choice(batches))
        for _ in range(rng.randint(1, 4)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        try:
            records = decode_records(bytes(buf), check_crc=rng.random() < 0.5)
        except CorruptRecordError:
            continue
        _assert_well_formed(records)


def _assert_well_formed(records: list[Record]) -> None:
    """What a decode that did not raise returns, CRC checked or not: Records whose offsets and
    timestamps are ints, keys and values bytes, str (a batch built from str: a flipped bin8
    marker reads as str8) or None, headers ((str, bytes | None), ...); never an int or a map."""
    assert isinstance(records, list)
    for r in records:
        assert type(r) is Record, r
        assert type(r.offset) is int and type(r.timestamp) is int, r
        assert r.key is None or type(r.key) in (bytes, str), r
        assert r.value is None or type(r.value) in (bytes, str), r
        assert r.headers is None or type(r.headers) is tuple, r
        for h in r.headers or ():
            assert type(h) is tuple and len(h) == 2 and type(h[0]) is str, r
            assert h[1] is None or type(h[1]) is bytes, r
