"""Round trips of build_batch / BatchBuilder through decode_batch / decode_records."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.errors import CorruptRecordError, MissingCodecError
from client.records import (
    BatchBuilder,
    ConsumerRecord,
    Record,
    build_batch,
    decode_batch,
    decode_partition_records,
    decode_records,
    is_available,
    iter_batches,
    next_offset,
    parse_header,
    validate,
)
from client.records import compression as comp
from client.records.header import TRANSACTIONAL_BIT

CODECS = ["none", "gzip", "lz4", "zstd"]

maybe_bytes = st.none() | st.binary(max_size=64)
headers = st.none() | st.lists(st.tuples(st.text(max_size=8), st.binary(max_size=16)), max_size=3)
timestamps = st.integers(min_value=-1, max_value=2**62)
records = st.lists(
    st.tuples(maybe_bytes, maybe_bytes, headers, timestamps), min_size=1, max_size=20
)


def _norm(hs):
    return tuple(tuple(h) for h in hs) if hs else None


def test_all_codecs_installed_here():
    assert all(is_available(c) for c in CODECS)


@settings(max_examples=60, deadline=None)
@given(recs=records, codec=st.sampled_from(CODECS), base=st.integers(0, 2**62))
def test_build_batch_round_trip(recs, codec, base):
    batch = build_batch(recs, base_offset=base, compression=codec, producer_id=7, producer_epoch=2)
    h = validate(batch)
    assert h.record_count == len(recs) and h.last_offset_delta == len(recs) - 1
    assert h.base_timestamp == recs[0][3]
    assert h.max_timestamp == max(r[3] for r in recs)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 2, -1)
    assert h.compression == comp.codec_id(codec)
    got = decode_batch(batch)
    want = [Record(base + i, ts, k, v, _norm(hs)) for i, (k, v, hs, ts) in enumerate(recs)]
    assert got == want


@settings(max_examples=40, deadline=None)
@given(recs=records, codec=st.sampled_from(CODECS))
def test_builder_round_trip_matches_build_batch(recs, codec):
    b = BatchBuilder(compression=codec, max_bytes=1 << 30)
    for k, v, hs, ts in recs:
        assert b.append(k, v, hs, ts)
    assert b.record_count == len(recs)
    assert b.build(base_offset=3) == build_batch(recs, base_offset=3, compression=codec)


def test_two_tuples_share_the_given_timestamp():
    batch = build_batch([(b"a", b"1"), (None, None)], timestamp_ms=1234, base_offset=10)
    assert decode_batch(batch) == [
        Record(10, 1234, b"a", b"1", None),
        Record(11, 1234, None, None, None),
    ]


def test_builder_max_bytes_accepts_first_record_then_refuses():
    b = BatchBuilder(max_bytes=200)
    assert b.append(b"k", b"x" * 500, timestamp_ms=1)  # first record always fits
    assert not b.append(b"k", b"y", timestamp_ms=1)
    assert b.record_count == 1
    b2 = BatchBuilder(max_bytes=400)
    n = 0
    while b2.append(None, b"z" * 50, timestamp_ms=1):
        n += 1
    assert n == b2.record_count and 3 <= n <= 6
    assert len(b2.build()) <= 400
    assert b2.estimated_size >= len(b2.build())


def test_transactional_bit_and_sequence():
    b = BatchBuilder(producer_id=5, producer_epoch=1, base_sequence=42, is_transactional=True)
    b.append(b"k", b"v", timestamp_ms=1)
    h = parse_header(b.build())
    assert h.attributes & TRANSACTIONAL_BIT and h.base_sequence == 42 and h.producer_id == 5


def test_empty_and_bad_arguments():
    with pytest.raises(ValueError):
        build_batch([])
    with pytest.raises(ValueError, match="compression"):
        build_batch([(b"k", b"v")], compression="snappy")
    with pytest.raises(ValueError):
        BatchBuilder().build()
    with pytest.raises(ValueError, match="fields"):
        build_batch([(b"k", b"v", None)])


def test_iter_batches_and_decode_records_over_many_batches():
    bufs = [
        build_batch([(b"%d" % i, b"v")] * 3, base_offset=i * 3, compression=c, timestamp_ms=i)
        for i, c in enumerate(CODECS)
    ]
    joined = b"".join(bufs)
    assert [h.base_offset for h, _ in iter_batches(joined)] == [0, 3, 6, 9]
    assert [bytes(mv) for _, mv in iter_batches(joined)] == bufs
    recs = decode_records(joined + bufs[0][:40])  # a partial trailing batch is ignored
    assert [r.offset for r in recs] == list(range(12))


def test_missing_codec_names_codec_and_package(monkeypatch):
    monkeypatch.delitem(comp._modules, comp.LZ4, raising=False)
    import builtins

    real_import = builtins.__import__

    def no_lz4(name, *args, **kwargs):
        if name.startswith("lz4"):
            raise ImportError(name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_lz4)
    with pytest.raises(MissingCodecError, match="'lz4'.*pip install lz4"):
        build_batch([(b"k", b"v")], compression="lz4")
    assert not is_available("lz4")


@settings(max_examples=40, deadline=None)
@given(recs=records)
def test_estimated_size_bounds_the_uncompressed_batch(recs):
    b = BatchBuilder(max_bytes=1 << 30)
    for k, v, hs, ts in recs:
        b.append(k, v, hs, ts)
    assert len(b.build()) <= b.estimated_size


def test_decode_leaves_the_gc_state_alone_even_on_error():
    good = build_batch([(b"k", b"v")] * 5, timestamp_ms=7)
    bad = bytearray(good)
    bad[-1] ^= 0x01  # CRC mismatch
    try:
        for enabled in (True, False):
            gc.enable() if enabled else gc.disable()
            assert len(decode_batch(good)) == 5 and len(decode_records(good * 2)) == 10
            assert gc.isenabled() is enabled
            with pytest.raises(CorruptRecordError, match=f"position {len(good)}"):
                decode_records(good + bytes(bad))
            with pytest.raises(CorruptRecordError):
                decode_batch(bytes(bad))
            assert gc.isenabled() is enabled
    finally:
        gc.enable()


def test_nonzero_and_zero_timestamp_deltas_decode_to_absolute_timestamps():
    recs = [(b"a", b"1", None, 1000), (b"b", b"2", None, 1000), (b"c", b"3", None, 999)]
    got = decode_batch(build_batch(recs, base_offset=2**40))
    assert [(r.offset, r.timestamp) for r in got] == [
        (2**40, 1000),
        (2**40 + 1, 1000),
        (2**40 + 2, 999),
    ]


@settings(max_examples=40, deadline=None)
@given(recs=records, codec=st.sampled_from(CODECS), base=st.integers(0, 2**62))
def test_decode_partition_records_matches_decode_records(recs, codec, base):
    half = len(recs) // 2 or 1
    buf = build_batch(recs[:half], base_offset=base, compression=codec)
    if recs[half:]:
        buf += build_batch(recs[half:], base_offset=base + half, compression=codec)
    got = decode_partition_records(buf + buf[:30], "orders", 3)  # partial tail ignored
    assert all(type(r) is ConsumerRecord for r in got)
    assert got == [
        ConsumerRecord("orders", 3, r.offset, r.timestamp, r.key, r.value, r.headers or ())
        for r in decode_records(buf)
    ]
    assert got[0].topic == "orders" and got[-1].offset == base + len(recs) - 1
    assert next_offset(buf + buf[:30]) == base + len(recs)


def test_next_offset_reads_headers_only():
    b = build_batch([(b"k", b"v")] * 3, base_offset=10)
    assert next_offset(b"") is None and next_offset(b[:-1]) is None
    assert next_offset(b) == 13 and next_offset(b + b[:70]) == 13
    bad = bytearray(b)
    bad[-1] ^= 0x01  # a CRC mismatch is the decoder's business, not next_offset's
    assert next_offset(bytes(bad)) == 13
    with pytest.raises(CorruptRecordError, match="below the header"):
        next_offset(b"\0" * 8 + (10).to_bytes(4, "big") + b"\0" * 60)


def test_decode_partition_records_errors_and_gc_state():
    good = build_batch([(b"k", b"v")] * 5, timestamp_ms=7)
    bad = bytearray(good)
    bad[-1] ^= 0x01
    try:
        for enabled in (True, False):
            gc.enable() if enabled else gc.disable()
            assert len(decode_partition_records(good * 2, "t", 0)) == 10
            with pytest.raises(CorruptRecordError, match=f"position {len(good)}"):
                decode_partition_records(good + bytes(bad), "t", 0)
            assert gc.isenabled() is enabled
            assert gc.get_freeze_count() == 0
    finally:
        gc.enable()


# Run in a fresh interpreter: in the test process, threads left by other tests (Spark's, loop
# threads) allocate and free objects meanwhile.
_GC_PROBE = """
import gc, sys
calls = []
for name in ("disable", "enable", "freeze", "unfreeze", "set_threshold", "collect"):
    real = getattr(gc, name)
    setattr(gc, name, (lambda real, name: lambda *a: (calls.append(name), real(*a))[1])(real, name))
from client.records import build_batch, decode_partition_records, decode_records, reader
assert reader.DECODER == sys.argv[1], reader.DECODER
plain = build_batch([(b"k", b"v")] * 2000, timestamp_ms=7)
headed = build_batch([(b"k", b"v", [("h", b"1")], 7)] * 10)
got = decode_partition_records(plain, "t", 0) + decode_records(plain)
with_headers = decode_partition_records(headed, "t", 0)
assert calls == [], calls  # the library never touches the collector
tracked = {gc.is_tracked(r) for r in got}
if sys.argv[1] == "c":  # born untracked: nothing for a collection to traverse
    assert tracked == {False}, tracked
    assert not gc.is_tracked(with_headers[0]) and not gc.is_tracked(with_headers[0].headers)
else:
    assert tracked == {True}, tracked
print("ok")
"""


def test_decoding_never_touches_the_gc_and_c_records_are_untracked(records_decoder):
    """The library calls no gc function (issue 10, item 12: it used to freeze and disable the
    host's collector); the C decoder's records are created untracked instead, which is what
    kept a large fetch from costing young-generation collections."""
    env = {k: v for k, v in os.environ.items() if k != "GREGOR_NO_EXTENSIONS"}
    if records_decoder == "python":
        env["GREGOR_NO_EXTENSIONS"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", _GC_PROBE, records_decoder],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0 and out.stdout == "ok\n", out.stderr
