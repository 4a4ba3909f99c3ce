"""broker/kafka/records.py: Gregor batch <-> Kafka batch, checked against kio's own record-batch
reader and writer (an implementation of Kafka's format nobody here wrote)."""

from __future__ import annotations

import datetime
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, RecordHeader
from kio.records.schema import Record as KioRecord
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from broker.kafka import records
from client.errors import CorruptRecordError
from client.records import build_batch, decode_batch
from client.records import compression as codecs
from client.records.header import parse_header

_bytes = st.one_of(st.none(), st.binary(max_size=40))
_header = st.tuples(st.text(max_size=8), st.one_of(st.binary(max_size=12)))
_record = st.tuples(
    _bytes,
    _bytes,
    st.one_of(st.none(), st.lists(_header, min_size=1, max_size=3)),
    st.integers(min_value=0, max_value=2**41),
)
_codec = st.sampled_from(["none", "gzip"] + [c for c in ("lz4", "zstd") if codecs.is_available(c)])


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(_record, min_size=1, max_size=20), codec=_codec, base=st.integers(0, 2**40))
def test_round_trip_keeps_every_field(rows: list, codec: str, base: int) -> None:
    batch = build_batch(
        rows, base_offset=base, compression=codec, producer_id=7, producer_epoch=2,
        base_sequence=11,
    )  # fmt: skip
    kafka = records.to_kafka(batch)
    back = records.from_kafka(kafka)
    assert decode_batch(back) == decode_batch(batch)
    h, hk, hb = parse_header(batch), parse_header(kafka), parse_header(back)
    for field in ("base_offset", "attributes", "last_offset_delta", "base_timestamp",
                  "max_timestamp", "producer_id", "producer_epoch", "base_sequence",
                  "record_count"):  # fmt: skip
        assert getattr(h, field) == getattr(hk, field) == getattr(hb, field), field
    if codec == "none":
        assert back == batch  # the same msgpack, so the same bytes


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(_record, min_size=1, max_size=20), base=st.integers(0, 2**40))
def test_kafka_form_reads_with_kio(rows: list, base: int) -> None:
    batch = build_batch(rows, base_offset=base)
    ours = decode_batch(batch)
    theirs, size = read_batch(memoryview(records.to_kafka(batch)), 0)
    assert size == len(records.to_kafka(batch))
    assert [(r.offset, r.key, r.value) for r in theirs.records] == [
        (r.offset, r.key, r.value) for r in ours
    ]
    assert [tuple((h.key.decode(), h.value) for h in r.headers) for r in theirs.records] == [
        tuple(r.headers or ()) for r in ours
    ]


def _kio_batch(rows: list[tuple[bytes | None, bytes | None, tuple]], ts_ms: int) -> bytes:
    kio_rows = tuple(
        KioRecord(
            attributes=i8(0),
            timestamp=TZAwareMicros.parse(
                datetime.datetime.fromtimestamp((ts_ms + i) / 1000, datetime.UTC)
            ),
            offset=i64(i),
            key=k,
            value=v,
            headers=tuple(RecordHeader(key=hk.encode(), value=hv) for hk, hv in hs),
        )
        for i, (k, v, hs) in enumerate(rows)
    )
    buf = io.BytesIO()
    new = NewRecordBatch(
        producer_id=i64(5), producer_epoch=i16(0), base_sequence=i32(0), records=kio_rows,
        attributes=i16(0),
    )  # fmt: skip
    write_new_batch(buf, new)
    return buf.getvalue()


def test_batch_written_by_kio_converts_to_gregor() -> None:
    rows = [
        (b"k1", b"v1", (("h", b"x"),)),
        (None, b"v2", ()),
        (b"k3", None, (("a", b"1"), ("b", b""))),
    ]
    kafka = _kio_batch(rows, 1_700_000_000_000)
    got = decode_batch(records.from_kafka(kafka))
    assert [(r.offset, r.key, r.value, tuple(r.headers or ())) for r in got] == [
        (i, k, v, hs) for i, (k, v, hs) in enumerate(rows)
    ]
    assert [r.timestamp for r in got] == [1_700_000_000_000 + i for i in range(3)]
    h = parse_header(records.from_kafka(kafka))
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (5, 0, 0)


def test_snappy_is_refused_and_garbage_is_corrupt() -> None:
    batch = bytearray(records.to_kafka(build_batch([(b"k", b"v")])))
    batch[22] = (batch[22] & ~0x07) | records.SNAPPY  # attributes low byte
    with pytest.raises(records.UnsupportedCodec, match="snappy"):
        records.to_kafka(bytes(batch))
    kafka = records.to_kafka(build_batch([(b"k", b"v")]))
    with pytest.raises(CorruptRecordError):
        records.from_kafka(kafka[:-1])  # truncated
    broken = bytearray(kafka)
    broken[-3] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        records.from_kafka(bytes(broken))


def test_fetch_drops_a_trailing_partial_batch() -> None:
    one = build_batch([(b"k", b"v")], base_offset=0)
    two = build_batch([(b"k2", b"v2")], base_offset=1)
    out = records.to_kafka(one + two[:30])
    assert out == records.to_kafka(one)
