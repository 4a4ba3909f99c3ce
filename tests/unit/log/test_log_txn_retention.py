"""Retention and DeleteRecords on a real Log with transactions (retention.py): the log start
never passes the last stable offset, so a segment holding an open transaction's first records
stays; a marker the high watermark has not passed keeps its transaction unstable; once the
start moves, the aborted-transaction index keeps only the entries whose marker is at or past
it, and a read_committed read from the new start (the consumer's own decoder with the index's
entries) returns exactly the committed records."""

from __future__ import annotations

import pytest

from broker.log import Log, LogConfig
from client.errors import OffsetOutOfRangeError
from client.records import build_batch
from client.records.control import build_marker
from client.records.reader import decode_partition_records

NOW = 1_000_000
OLD = NOW - 10_000  # older than the retention_ms of these tests


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


def _log(path, clock: Clock, log_start_offset: int | None = None, **cfg) -> Log:
    cfg.setdefault("retention_ms", 5000)
    return Log(path / "t-0", "t", 0, LogConfig(**cfg), clock, log_start_offset=log_start_offset)


def _plain(log: Log, value: bytes) -> int:
    return log.append_as_leader(build_batch([(None, value)], timestamp_ms=OLD), 0).first_offset


def _txn(log: Log, pid: int, seq: int, value: bytes) -> int:
    batch = build_batch(
        [(None, value)],
        timestamp_ms=OLD,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        is_transactional=True,
    )
    return log.append_as_leader(batch, 0).first_offset


def _end(log: Log, pid: int, commit: bool) -> int:
    return log.append_as_leader(build_marker(pid, 0, commit, 0, OLD), 0, control=True).first_offset


def _read_committed(log: Log, high_watermark: int) -> list[bytes]:
    """What a read_committed consumer gets from the log start: the log's reads up to the LSO,
    each with the aborted transactions overlapping it, through the client's decoder."""
    lso = log.producers.last_stable_offset(high_watermark)
    out: list[bytes] = []
    offset = log.log_start_offset
    while offset < lso:
        res = log.read(offset, 1 << 20, max_offset=lso)
        if not res.data:
            break
        aborted = [
            {"producer_id": a.producer_id, "first_offset": a.first_offset}
            for a in log.producers.aborted_transactions(offset, res.next_offset)
        ]
        recs = decode_partition_records(res.data, "t", 0, True, aborted)
        out += [r.value for r in recs if r.offset >= offset]
        offset = res.next_offset
    return out


def test_time_retention_stops_below_an_open_transaction(tmp_path) -> None:
    clock = Clock()
    log = _log(tmp_path, clock)
    try:
        _plain(log, b"a")  # segment 0
        log.roll()
        _plain(log, b"b")  # segment 1
        first = _txn(log, 1, 0, b"t1")  # producer 1 opens here, in segment 1
        log.roll()
        _plain(log, b"c")  # segment 2
        _txn(log, 1, 1, b"t2")
        log.roll()
        _plain(log, b"d")  # segment 3
        log.roll()  # the active segment, empty
        end = log.end_offset
        assert log.producers.last_stable_offset(end) == first
        # every segment is past retention_ms, but only segment 0 lies wholly below the LSO
        assert log.retention.delete_old_segments(end) == 1
        assert log.log_start_offset == log.segment_base_offsets[0] == 1
        assert log.retention.delete_old_segments(end) == 0  # still open: nothing more
        # the commit is appended but not yet replicated: still unstable
        marker = _end(log, 1, commit=True)
        log.roll()
        assert log.retention.delete_old_segments(marker) == 0
        assert log.log_start_offset == 1
        # the high watermark passes the marker: the rest goes (never the active segment)
        end = log.end_offset
        assert log.retention.delete_old_segments(end) == 4
        assert log.log_start_offset == marker + 1 == end
    finally:
        log.close()


def test_size_retention_stops_below_an_open_transaction(tmp_path) -> None:
    clock = Clock()
    log = _log(tmp_path, clock, retention_ms=-1, retention_bytes=1)
    try:
        for i in range(3):
            _plain(log, b"v%d" % i)
            log.roll()
        first = _txn(log, 7, 0, b"open")  # segment 3
        log.roll()
        for i in range(3):
            _plain(log, b"w%d" % i)
            log.roll()
        assert log.retention.delete_old_segments(log.end_offset) == 3
        assert log.log_start_offset == first  # the open transaction's segment is the oldest
        # with no high watermark given, a marker counts as not yet replicated
        _end(log, 7, commit=False)
        log.roll()
        assert log.retention.delete_old_segments() == 0
        assert log.log_start_offset == first
        assert log.retention.delete_old_segments(log.end_offset) > 0
        assert log.log_start_offset > first
    finally:
        log.close()


def test_delete_records_stops_at_the_last_stable_offset(tmp_path) -> None:
    clock = Clock()
    log = _log(tmp_path, clock)
    try:
        for i in range(3):
            _plain(log, b"v%d" % i)  # 0-2
        first = _txn(log, 3, 0, b"open")  # 3
        _plain(log, b"after")  # 4
        hw = log.end_offset
        with pytest.raises(OffsetOutOfRangeError, match="last stable offset 3"):
            log.retention.delete_records_before(first + 1, hw)
        assert log.log_start_offset == 0  # refused: nothing moved
        assert log.retention.delete_records_before(first, hw) == first  # up to the LSO: fine
        with pytest.raises(OffsetOutOfRangeError, match="high watermark 3"):
            log.retention.delete_records_before(4, 3)  # no transaction below: the HW
        # a follower follows its leader's start without the check (its own HW may lag)
        assert log.retention.delete_records_before(first + 1) == first + 1
    finally:
        log.close()


def test_aborted_index_after_the_start_moves_and_read_committed(tmp_path) -> None:
    clock = Clock()
    log = _log(tmp_path, clock)
    try:
        a0 = _txn(log, 1, 0, b"A-aborted-0")  # 0: A opens (aborted later, marker in seg 2)
        _txn(log, 2, 0, b"B-aborted")  # 1: B opens
        _end(log, 2, commit=False)  # 2: B aborted, wholly in segment 0
        _plain(log, b"p0")  # 3
        log.roll()
        _txn(log, 1, 1, b"A-aborted-1")  # 4
        _txn(log, 3, 0, b"C-committed")  # 5
        _end(log, 3, commit=True)  # 6
        _plain(log, b"p1")  # 7
        log.roll()
        a_end = _end(log, 1, commit=False)  # 8: A aborted
        _plain(log, b"p2")  # 9
        log.roll()
        hw = log.end_offset
        assert [
            (a.producer_id, a.last_offset) for a in log.producers.aborted_transactions(0, hw)
        ] == [
            (2, 2),
            (1, a_end),
        ]
        before = _read_committed(log, hw)
        assert before == [b"p0", b"C-committed", b"p1", b"p2"]
        # DeleteRecords to 4: B's entry (marker 2) goes, A's (first 0, marker 8) stays
        assert log.retention.delete_records_before(4, hw) == 4
        assert log.segment_base_offsets[0] == 4
        entries = log.producers.aborted_transactions(0, hw)
        assert [(a.producer_id, a.first_offset, a.last_offset) for a in entries] == [(1, a0, a_end)]
        # read_committed from the new start: A's batch at 4 is dropped by that entry, though
        # A's first record is gone
        assert _read_committed(log, hw) == [b"C-committed", b"p1", b"p2"]
        log.flush()
    finally:
        log.close()
    log = _log(tmp_path, Clock(), log_start_offset=4)  # the index file, reloaded
    try:
        assert [a.producer_id for a in log.producers.aborted_transactions(0, 100)] == [1]
        assert _read_committed(log, log.end_offset) == [b"C-committed", b"p1", b"p2"]
        # time retention up to A's marker: the entry stays (its marker is at the start)
        assert log.retention.delete_old_segments(9) == 1
        assert log.log_start_offset == a_end
        assert [a.producer_id for a in log.producers.aborted_transactions(0, 100)] == [1]
        # past the marker: it goes
        assert log.retention.delete_records_before(a_end + 1, log.end_offset) == a_end + 1
        assert log.producers.aborted_transactions(0, 100) == []
        assert _read_committed(log, log.end_offset) == [b"p2"]
    finally:
        log.close()
