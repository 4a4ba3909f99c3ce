"""Fetcher: one Fetch answer handled in two steps (next offset from headers; records decoded
when drain() first takes from the chunk)."""

from __future__ import annotations

import pytest

from client.aio.config import resolve_config
from client.aio.fetcher import Fetcher
from client.aio.types import ConsumerRecord, TopicPartition
from client.errors import CorruptRecordError
from client.records import build_batch

TP = TopicPartition("orders", 2)


def _fetcher(**cfg) -> Fetcher:
    f = Fetcher(resolve_config("consumer", None, cfg), cluster=None)  # type: ignore[arg-type]
    f.assign([TP])
    f.seek(TP, 0)
    return f


def _answer(data: bytes) -> dict:
    return {"error_code": 0, "high_watermark": 10, "log_start_offset": 0, "records": data}


def _data() -> bytes:
    a = build_batch([(b"k%d" % i, b"v%d" % i) for i in range(5)], base_offset=0, timestamp_ms=9)
    b = build_batch([(None, b"w%d" % i, [("h", b"x")], 11) for i in range(5)], base_offset=5)
    return a + b


def test_next_offset_is_set_before_decoding_then_records_drain_in_order():
    f = _fetcher()
    data = _data()
    st = f.states[TP]
    got = f._on_partition(TP, _answer(data + data[:40]), (0, st.generation))
    assert got is not None and st.fetch_offset == 10 and st.high_watermark == 10
    assert f.buffered_bytes == len(data) + 40 and not f.buffer  # counted, not yet decoded
    f._buffer_records(*got)
    first = f.drain(3)
    assert first[0] == ConsumerRecord("orders", 2, 0, 9, b"k0", b"v0", ())
    assert [r.offset for r in first] == [0, 1, 2] and st.position == 3
    rest = f.drain(100)
    assert [r.offset for r in rest] == list(range(3, 10)) and st.position == 10
    assert rest[-1].headers == (("h", b"x"),) and rest[-1].timestamp == 11
    assert f.buffered_bytes == 0 and not f.buffer


def test_records_before_the_requested_offset_are_skipped():
    f = _fetcher()
    f.seek(TP, 3)
    st = f.states[TP]
    f._buffer_records(*f._on_partition(TP, _answer(_data()), (3, st.generation)))
    assert [r.offset for r in f.drain(100)] == list(range(3, 10))


def test_corrupt_batch_rolls_the_fetch_offset_back_and_reports():
    f = _fetcher()
    bad = bytearray(_data())
    bad[-1] ^= 0x01  # CRC mismatch in the second batch
    st = f.states[TP]
    got = f._on_partition(TP, _answer(bytes(bad)), (0, st.generation))
    assert got is not None and st.fetch_offset == 10  # the pipelined fetch would ask for 10
    f._buffer_records(*got)
    assert f.buffer and st.fetch_offset == 10  # not decoded yet
    assert f.drain(100) == []
    assert st.fetch_offset == 0 and f.buffered_bytes == 0 and not f.buffer
    with pytest.raises(CorruptRecordError, match="CRC"):
        f.raise_errors()
    # An answer to the fetch sent for offset 10 meanwhile is dropped.
    assert f._on_partition(TP, _answer(_data()), (10, st.generation - 1)) is None


def test_corrupt_chunk_drops_what_was_fetched_after_it():
    f = _fetcher()
    st = f.states[TP]
    good = _data()
    bad = bytearray(good)
    bad[-1] ^= 0x01
    f._buffer_records(*f._on_partition(TP, _answer(bytes(bad)), (0, st.generation)))
    nxt = build_batch([(None, b"later")], base_offset=10)
    f._buffer_records(*f._on_partition(TP, _answer(nxt), (10, st.generation)))
    assert len(f.buffer) == 2 and st.fetch_offset == 11
    assert f.drain(100) == []  # nothing past the corrupt bytes is returned
    assert not f.buffer and f.buffered_bytes == 0 and st.fetch_offset == 0
    with pytest.raises(CorruptRecordError):
        f.raise_errors()
    # Fetched again (fixed bytes here): the records come back from the position.
    f._buffer_records(*f._on_partition(TP, _answer(good), (0, st.generation)))
    assert [r.offset for r in f.drain(100)] == list(range(10))


def test_only_part_of_a_batch_grows_the_fetch_size():
    f = _fetcher(max_partition_fetch_bytes=64)
    st = f.states[TP]
    assert f._on_partition(TP, _answer(_data()[:64]), (0, st.generation)) is None
    assert st.fetch_offset == 0 and st.fetch_bytes == 128 and f.buffered_bytes == 0


def _compacted(base: int, kept: list[int], last_delta: int) -> bytes:
    """A batch as the log cleaner leaves it: offsets base..base+last_delta, only `kept` left."""
    import msgpack

    from client.records.builder import _assemble

    rows = [(d, 0, b"k%d" % d, b"v", None) for d in kept]
    section = msgpack.packb(rows, use_bin_type=True)
    return _assemble(section, len(rows), last_delta, base, 0, 9, 9, -1, -1, -1)


def test_compacted_gaps_and_empty_batches_move_the_position_past_them():
    f = _fetcher()
    st = f.states[TP]
    data = _compacted(0, [1, 3], 4) + _compacted(5, [], 4)  # offsets 0..9: only 1 and 3 left
    f._buffer_records(*f._on_partition(TP, _answer(data), (0, st.generation)))
    assert [r.offset for r in f.drain(100)] == [1, 3]
    assert st.position == 10 and st.fetch_offset == 10  # not stuck at 4 before the empty batch
    f._buffer_records(*f._on_partition(TP, _answer(_compacted(10, [], 2)), (10, st.generation)))
    assert f.drain(100) == [] and st.position == 13
