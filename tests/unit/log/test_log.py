"""Unit tests of broker.log.Log: offsets, reads, follower appends, epochs, truncation, retention."""

from __future__ import annotations

import pytest
from conftest import make_batch

from broker.log import Log, LogConfig, UnexpectedAppendOffsetError
from client.errors import (
    CorruptRecordError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    StorageError,
)
from client.records.header import iter_headers, validate


class FakeClock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batches(data: bytes):
    return [h for _, h in iter_headers(data, check_crc=True)]


@pytest.fixture
def clock():
    return FakeClock()


def open_log(path, clock, **cfg):
    cfg.setdefault("index_interval_bytes", 64)
    return Log(path / "t-0", "t", 0, LogConfig(**cfg), clock)


def test_leader_append_assigns_offsets_and_epoch_in_place(tmp_path, clock):
    log = open_log(tmp_path, clock)
    two = make_batch([b"a", b"b"], base_offset=777) + make_batch([b"c"], base_offset=5)
    info = log.append_as_leader(two, leader_epoch=3)
    assert (info.first_offset, info.last_offset, info.batch_count, info.record_count) == (
        0,
        2,
        2,
        3,
    )
    info = log.append_as_leader(memoryview(make_batch([b"d"] * 4)), leader_epoch=3)
    assert (info.first_offset, info.last_offset) == (3, 6)
    r = log.read(0, 1 << 20)
    hs = batches(r.data)  # CRCs still valid after the rewrite
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in hs] == [
        (0, 1, 3),
        (2, 2, 3),
        (3, 6, 3),
    ]
    assert (r.first_offset, r.next_offset, r.end_offset) == (0, 7, 7)
    assert log.epoch_cache.entries == [(3, 0)]


def test_corrupt_or_oversized_batches_are_refused_whole(tmp_path, clock):
    log = open_log(tmp_path, clock, max_message_bytes=200)
    good = make_batch([b"x"])
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.append_as_leader(good + bytes(bad), 0)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(good[:-3], 0)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(b"", 0)
    with pytest.raises(MessageTooLargeError):
        log.append_as_leader(make_batch([b"y" * 300]), 0)
    assert log.end_offset == 0 and log.size_bytes == 0


def test_an_oversized_batch_is_refused_before_its_crc_is_computed(tmp_path, clock, monkeypatch):
    """Issue 10, item 6: 40 MiB against max.message.bytes 1 MiB, with a broken CRC, is
    MESSAGE_TOO_LARGE (it used to be CORRUPT_MESSAGE, after a 40 MiB CRC pass)."""
    import client.records.header as header

    log = open_log(tmp_path, clock, max_message_bytes=1 << 20)
    big = bytearray(make_batch([b"z" * (40 << 20)]))
    big[-1] ^= 0xFF  # a wrong CRC too

    def no_crc(_data):
        raise AssertionError("CRC computed for a batch refused for its size")

    monkeypatch.setattr(header, "crc32c", no_crc)
    with pytest.raises(MessageTooLargeError, match="exceeds max.message.bytes"):
        log.append_as_leader(big, 0)
    assert log.end_offset == 0 and log.size_bytes == 0


def test_read_returns_whole_batches_first_one_even_if_too_big(tmp_path, clock):
    log = open_log(tmp_path, clock)
    sizes = []
    for i in range(20):
        b = make_batch([bytes([i]) * (10 + 40 * (i % 3))] * 2)
        sizes.append(len(b))
        log.append_as_leader(b, 0)
    r = log.read(5, 1)  # offset 5 is in batch 2 (offsets 4-5): returned whole
    assert [h.base_offset for h in batches(r.data)] == [4] and r.next_offset == 6
    r = log.read(4, sizes[2] + sizes[3] + sizes[4] - 1)
    assert [h.base_offset for h in batches(r.data)] == [4, 6] and len(r.data) == sizes[2] + sizes[3]
    r = log.read(0, 1 << 20, max_offset=9)  # batch 8-9 starts below max_offset: included
    assert r.next_offset == 10 and batches(r.data)[-1].base_offset == 8
    r = log.read(0, 1 << 20, max_offset=8)
    assert r.next_offset == 8
    assert log.read(40, 100).data == b""
    assert log.read(3, 100, max_offset=3).data == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(41, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


def test_reads_cross_rolled_segments(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=500)
    for i in range(30):
        log.append_as_leader(make_batch([b"v" * 50], timestamp=i), 0)
    assert len(log.segment_base_offsets) > 3
    offset, seen = 0, []
    while offset < log.end_offset:
        r = log.read(offset, 300)
        seen += [h.base_offset for h in batches(r.data)]
        offset = r.next_offset
    assert seen == list(range(30))


def test_segment_ms_and_index_full_roll(tmp_path, clock):
    log = open_log(
        tmp_path, clock, segment_ms=1000, index_interval_bytes=0, index_size_max_bytes=24
    )
    for _ in range(3):
        log.append_as_leader(make_batch([b"a"]), 0)
    clock.now += 1000
    log.append_as_leader(make_batch([b"a"]), 0)
    assert len(log.segment_base_offsets) >= 2
    for _ in range(10):
        log.append_as_leader(make_batch([b"a"]), 0)
    assert len(log.segment_base_offsets) >= 4  # two 12-byte time-index entries per segment


def test_follower_append_keeps_offsets_and_refuses_going_back(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_follower(
        make_batch([b"a", b"b"], base_offset=0, epoch=1)
        + make_batch([b"c"], base_offset=2, epoch=2)
    )
    assert log.end_offset == 3
    assert log.epoch_cache.entries == [(1, 0), (2, 2)]
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(make_batch([b"x"], base_offset=2, epoch=2))
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(
            make_batch([b"x", b"y"], base_offset=3) + make_batch([b"y"], base_offset=4)
        )
    assert log.end_offset == 3
    # a compacted leader log has gaps: a batch may start past the end
    log.append_as_follower(make_batch([b"x"], base_offset=5, epoch=2))
    assert log.end_offset == 6
    assert log.read(3, 1 << 20).first_offset == 5


def test_end_offset_for_epoch_kip101(tmp_path, clock):
    log = open_log(tmp_path, clock)
    assert log.end_offset_for_epoch(0) == (-1, -1)
    for epoch, n in ((1, 3), (2, 2), (4, 5)):
        for _ in range(n):
            log.append_as_leader(make_batch([b"x"]), epoch)
    assert log.end_offset_for_epoch(0) == (-1, -1)
    assert log.end_offset_for_epoch(1) == (1, 3)
    assert log.end_offset_for_epoch(2) == (2, 5)
    assert log.end_offset_for_epoch(3) == (2, 5)
    assert log.end_offset_for_epoch(4) == (4, 10)
    assert log.end_offset_for_epoch(9) == (4, 10)
    log.truncate_to(4)
    assert log.end_offset == 4 and log.epoch_cache.entries == [(1, 0), (2, 3)]
    log.close()
    reopened = open_log(tmp_path, clock)
    assert reopened.epoch_cache.entries == [(1, 0), (2, 3)]


def test_truncate_drops_straddling_batch_and_later_segments(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=400)
    for _ in range(20):
        log.append_as_leader(make_batch([b"v" * 40] * 2), 0)
    nseg = len(log.segment_base_offsets)
    log.truncate_to(13)  # batch 12-13 straddles: it goes whole
    assert log.end_offset == 12 and len(log.segment_base_offsets) < nseg
    assert batches(log.read(10, 1 << 20).data)[-1].base_offset == 10
    log.append_as_leader(make_batch([b"new"]), 1)
    assert log.end_offset == 13
    log.truncate_to(0)
    assert log.end_offset == 0 and log.segment_base_offsets == [0] and log.read(0, 100).data == b""


def test_offset_for_timestamp(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=600)
    for i in range(40):
        log.append_as_leader(make_batch([b"v" * 30], timestamp=1000 + 10 * i), 0)
    assert log.offset_for_timestamp(1000).offset == 0
    assert log.offset_for_timestamp(1001).offset == 1
    assert log.offset_for_timestamp(1250).offset == 25
    assert log.offset_for_timestamp(1390).offset == 39
    assert log.offset_for_timestamp(1391) is None
    assert log.offset_for_timestamp(-2).offset == 0
    assert log.offset_for_timestamp(-1).offset == 40


def test_offset_for_timestamp_finds_the_record_inside_a_batch(tmp_path, clock):
    """As Kafka: the first record whose timestamp >= the target, not its batch's base offset
    (librdkafka's 0054_offset_time: two records at 1234 and 999999999999 in one batch)."""
    log = open_log(tmp_path, clock)
    log.append_as_leader(make_batch([b"a", b"b"], timestamp=1234, ts_step=999999998765), 0)
    log.append_as_leader(make_batch([b"c", b"d", b"e"], timestamp=2_000_000_000_000, ts_step=5), 0)
    got = log.offset_for_timestamp(999999999999)
    assert (got.offset, got.timestamp) == (1, 999999999999)
    assert (log.offset_for_timestamp(1234).offset, log.offset_for_timestamp(1235).offset) == (0, 1)
    assert log.offset_for_timestamp(2_000_000_000_001).offset == 3  # the next batch, decoded
    assert log.offset_for_timestamp(2_000_000_000_010).offset == 4
    assert log.offset_for_timestamp(2_000_000_000_011) is None
    log.retention.delete_records_before(
        4
    )  # the log start inside a batch: records before it are gone
    got = log.offset_for_timestamp(2_000_000_000_000)
    assert (got.offset, got.timestamp) == (4, 2_000_000_000_010)


def test_retention_by_bytes_and_time_never_active(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=300, retention_bytes=700)
    for i in range(30):
        log.append_as_leader(make_batch([b"v" * 40], timestamp=clock.now - 10_000 + i), 0)
    deleted = log.retention.delete_old_segments()
    assert deleted > 0 and log.size_bytes <= 700 + 300
    assert log.log_start_offset == log.segment_base_offsets[0]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    log2 = Log(tmp_path / "t-1", "t", 1, LogConfig(segment_bytes=300, retention_ms=5000), clock)
    for _ in range(10):
        log2.append_as_leader(make_batch([b"v" * 40], timestamp=clock.now - 10_000), 0)
    log2.retention.delete_old_segments(high_watermark=3)
    assert log2.log_start_offset <= 3
    log2.retention.delete_old_segments()
    assert len(log2.segment_base_offsets) == 1 and log2.end_offset == 10


def test_delete_records_before(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=300)
    for _ in range(20):
        log.append_as_leader(make_batch([b"v" * 40]), 0)
    assert log.retention.delete_records_before(7) == 7
    assert log.log_start_offset == 7 and log.segment_base_offsets[0] <= 7
    assert batches(log.read(7, 10).data)[0].last_offset >= 7
    with pytest.raises(OffsetOutOfRangeError):
        log.read(6, 10)
    with pytest.raises(OffsetOutOfRangeError):
        log.retention.delete_records_before(21)


def test_flush_tracks_flushed_offset(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=300)
    assert log.flushed_offset == 0
    for _ in range(10):
        log.append_as_leader(make_batch([b"v" * 40]), 0)
    assert log.durability.should_flush() and log.flushed_offset == 0
    assert log.flush() == 10 and log.flushed_offset == 10 and not log.durability.should_flush()
    log.truncate_to(5)
    assert log.flushed_offset == 5


def test_offline_log_refuses_appends_but_reads(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_leader(make_batch([b"x"]), 0)
    log.mark_offline()
    with pytest.raises(StorageError):
        log.append_as_leader(make_batch([b"y"]), 0)
    assert validate(log.read(0, 100).data).base_offset == 0


def test_a_writable_view_is_rewritten_in_place_anything_else_is_copied(tmp_path, clock):
    """A large Produce request's records arrive as a writable memoryview of the request frame
    (client/protocol/views.py): offsets and epochs are assigned in it, without a copy."""
    log = open_log(tmp_path, clock)
    log.append_as_leader(make_batch([b"a"]), leader_epoch=2)
    frame = bytearray(b"head" + make_batch([b"b", b"c"], base_offset=999) + b"tail")
    view = memoryview(frame)[4:-4]
    info = log.append_as_leader(view, leader_epoch=2)
    assert (info.first_offset, info.last_offset) == (1, 2)
    assert validate(view).base_offset == 1 and validate(view).partition_leader_epoch == 2
    original = make_batch([b"d"], base_offset=999)
    for readonly in (original, memoryview(original)):
        assert log.append_as_leader(readonly, leader_epoch=2).first_offset in (3, 4)
    assert validate(original).base_offset == 999  # a read-only buffer is never written to
    assert [h.base_offset for h in batches(log.read(0, 1 << 20).data)] == [0, 1, 3, 4]


def _every_read(log, offsets, max_bytes, max_offsets):
    out = []
    for offset in offsets:
        for mb in max_bytes:
            for mo in max_offsets:
                out.append(((offset, mb, mo), log.read(offset, mb, max_offset=mo)))
    return out


def test_a_read_from_the_last_append_takes_neither_the_index_nor_a_header(
    tmp_path, clock, monkeypatch
):
    """Issue 28: a follower that kept up fetches from where the leader's last append began;
    that read is one pread from the remembered position, not the index lookup and the header
    read of find() first."""
    from broker.log.segment import LogSegment

    log = open_log(tmp_path, clock)
    for i in range(6):
        log.append_as_leader(make_batch([bytes([i]) * 30] * 3), 0)
    last = make_batch([b"p"] * 2) + make_batch([b"q"])
    log.append_as_leader(last, 0)  # two batches in one append: offsets 18-19, 20
    expected = log.read(18, 1 << 20)
    assert [h.base_offset for h in batches(expected.data)] == [18, 20]

    def refused(*args, **kwargs):
        raise AssertionError("find() or header_at() ran")

    monkeypatch.setattr(LogSegment, "find", refused)
    monkeypatch.setattr(LogSegment, "header_at", refused)
    assert log.read(18, 1 << 20) == expected
    assert log.read(18, len(expected.data), max_offset=21) == expected


def test_reads_with_the_last_append_remembered_match_reads_without_it(tmp_path, clock):
    """The shortcut answers exactly what find() and end_position() answer, for every offset,
    byte limit and max offset, after leader and follower appends, a roll, and truncations
    (which forget the position)."""
    log = open_log(tmp_path, clock, segment_bytes=700)

    def check():
        segs = log._segments
        end = log.end_offset
        offsets = range(log.log_start_offset, end + 1)
        limits = (1, 60, 150, 1 << 20)
        max_offsets = (None, max(0, end - 3), end)
        fast = _every_read(log, offsets, limits, max_offsets)
        kept = [s.last_append for s in segs]
        for s in segs:
            s.last_append = None
        slow = _every_read(log, offsets, limits, max_offsets)
        for s, k in zip(segs, kept, strict=True):
            s.last_append = k
        assert fast == slow

    for i in range(8):
        log.append_as_leader(make_batch([bytes([i]) * (10 + 20 * (i % 3))] * 2), 0)
        check()
    two = make_batch([b"a"]) + make_batch([b"b"] * 3)  # offsets 16, 17-19
    log.append_as_leader(two, 1)
    check()
    assert log._segments[-1].last_append == (16, log._segments[-1].size - len(two))
    log.truncate_to(17)  # into the last append: its position is forgotten
    assert log.end_offset == 17 and log._segments[-1].last_append is None
    check()
    follower = make_batch([b"f"] * 2, base_offset=log.end_offset)
    log.append_as_follower(follower)
    check()
    log.truncate_to(log.end_offset - 1)
    for _ in range(3):
        log.append_as_leader(make_batch([b"z" * 50]), 2)
        check()


def test_a_log_config_rebuilt_from_its_dict_after_appends(tmp_path):
    """broker/node.py builds a topic's LogConfig as LogConfig(**{**base.__dict__, **overrides}):
    nothing the log reads per append may cache itself in the instance's __dict__."""
    from client.records import build_batch

    cfg = LogConfig(cleanup_policy=("compact",))
    log = Log(tmp_path / "t-0", "t", 0, cfg)
    try:
        log.append_as_leader(build_batch([(b"k", b"v")]), 0)
    finally:
        log.close()
    assert LogConfig(**{**cfg.__dict__, "segment_bytes": 4096}).compact
