"""Transactions on a real Log (producer_state.py, txn_index.py): transactional batches open a
producer's transaction, markers (client/records/control.py) close it; the last stable offset
stops at the first undecided one (and at a marker the high watermark has not passed); ABORT
markers fill the aborted-transaction index, which survives restarts, truncation and a lost
index file; the cleaner cleans below the LSO only and drops aborted records."""

from __future__ import annotations

import pytest

from broker.log import Log, LogConfig
from broker.log.cleaner import Cleaner
from broker.log.txn_index import TXN_INDEX_FILE, AbortedTxn
from client.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    TransactionCoordinatorFencedError,
)
from client.records import build_batch, decode_records
from client.records.control import build_marker, parse_marker
from client.records.header import parse_header


def _log(path, compact: bool = False, segment_bytes: int = 1 << 20) -> Log:
    cfg = LogConfig(
        segment_bytes=segment_bytes, cleanup_policy=("compact",) if compact else ("delete",)
    )
    return Log(path / "t-0", "t", 0, cfg, lambda: 1_000_000)


def _txn(pid: int, seq: int, n: int = 2, epoch: int = 0, key: bytes | None = None) -> bytes:
    return build_batch(
        [(key or b"k%d" % (seq + i), b"p%d-%d" % (pid, seq + i)) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )


def _end(log: Log, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> int:
    marker = build_marker(pid, epoch, commit, coordinator_epoch, 1_000_000)
    return log.append_as_leader(marker, 0, control=True).first_offset


def _all(log: Log) -> list:
    out, offset = [], log.log_start_offset
    while offset < log.end_offset:
        res = log.read(offset, 1 << 20)
        out += decode_records(res.data)
        offset = res.next_offset
    return out


def test_marker_round_trip() -> None:
    batch = build_marker(5, 2, True, 9, 123)
    h = parse_header(batch)
    assert h.is_control and h.attributes & 0x10 and h.base_sequence == -1
    assert parse_marker(h, batch) == (True, 9)
    (rec,) = decode_records(batch)
    assert rec.key == b"\x00\x00\x00\x01" and rec.value == b"\x00\x00\x00\x00\x00\x09"


def test_lso_and_aborted_index(tmp_path) -> None:
    log = _log(tmp_path)
    try:
        log.append_as_leader(build_batch([(b"a", b"plain")]), 0)  # 0
        log.append_as_leader(_txn(1, 0), 0)  # 1-2 (producer 1 opens)
        log.append_as_leader(_txn(2, 0), 0)  # 3-4 (producer 2 opens)
        log.append_as_leader(_txn(1, 2), 0)  # 5-6
        assert log.producers.last_stable_offset(7) == 1
        assert log.producers.last_stable_offset(0) == 0  # never above the HW
        abort_at = _end(log, 1, commit=False)  # 7
        # decided, but the HW has not passed the marker: still unstable
        assert log.producers.last_stable_offset(7) == 1
        assert log.producers.last_stable_offset(8) == 3  # producer 2 still open
        commit_at = _end(log, 2, commit=True)  # 8
        assert log.producers.last_stable_offset(9) == 9
        assert (abort_at, commit_at) == (7, 8)
        assert log.producers.aborted_transactions(0, 9) == [AbortedTxn(1, 1, 7, 3)]
        assert log.producers.aborted_transactions(8, 9) == []  # marker below the range
        assert log.producers.aborted_transactions(0, 1) == []  # first offset past it
        log.flush()
    finally:
        log.close()
    # a restart: the index file and the state (rebuilt from the log) agree
    log = _log(tmp_path)
    try:
        assert log.producers.aborted_transactions(0, 100) == [AbortedTxn(1, 1, 7, 3)]
        log.append_as_leader(_txn(1, 4), 0)  # 9: producer 1 opens again
        assert log.producers.last_stable_offset(11) == 9
        log.flush()
    finally:
        log.close()
    (tmp_path / "t-0" / TXN_INDEX_FILE).unlink()  # lost: the rebuild from the log re-adds it
    log = _log(tmp_path)
    try:
        assert log.producers.last_stable_offset(11) == 9  # ongoing survives the restart
        assert log.producers.aborted_transactions(0, 100) == [AbortedTxn(1, 1, 7, 3)]
        log.truncate_to(7)  # the ABORT marker goes, and with it the entry
        assert log.producers.aborted_transactions(0, 100) == []
        assert log.producers.last_stable_offset(7) == 1
    finally:
        log.close()


def test_ongoing_transaction_survives_a_snapshot(tmp_path) -> None:
    log = _log(tmp_path, segment_bytes=300)
    try:
        log.append_as_leader(_txn(1, 0), 0)
        for _i in range(6):  # rolls segments: snapshots hold producer 1's open transaction
            log.append_as_leader(build_batch([(b"x", b"y" * 100)]), 0)
        assert len(log.segments) > 2
        log.flush()
    finally:
        log.close()
    snaps = sorted((tmp_path / "t-0").glob("*.snapshot"))
    assert snaps, "no producer-state snapshot written"
    log = _log(tmp_path, segment_bytes=300)
    try:
        assert log.producers.last_stable_offset(100) == 0
        _end(log, 1, commit=True)
        assert log.producers.last_stable_offset(log.end_offset) == log.end_offset
    finally:
        log.close()


def test_marker_checks_and_refused_control_batches(tmp_path) -> None:
    log = _log(tmp_path)
    try:
        with pytest.raises(InvalidRecordError, match="control"):
            log.append_as_leader(build_marker(1, 0, True, 0, 1), 0)  # a client's control batch
        with pytest.raises(InvalidRecordError, match="producer id"):
            log.append_as_leader(_txn(-1, -1), 0)
        log.append_as_leader(_txn(1, 0, epoch=3), 0)
        with pytest.raises(InvalidProducerEpochError):
            _end(log, 1, commit=True, epoch=2)
        _end(log, 1, commit=False, epoch=3, coordinator_epoch=5)
        with pytest.raises(TransactionCoordinatorFencedError):
            _end(log, 1, commit=True, epoch=3, coordinator_epoch=4)
        # a bumped epoch's ABORT (a fencing coordinator) closes what the old epoch opened
        log.append_as_leader(_txn(1, 2, epoch=3), 0)
        _end(log, 1, commit=False, epoch=4, coordinator_epoch=5)
        assert log.producers.last_stable_offset(log.end_offset) == log.end_offset
        assert [e.first_offset for e in log.producers.aborted_transactions(0, 100)] == [0, 3]
    finally:
        log.close()


def test_follower_appends_keep_the_index(tmp_path) -> None:
    leader = _log(tmp_path / "l")
    follower = _log(tmp_path / "f")
    try:
        leader.append_as_leader(_txn(1, 0), 0)
        _end(leader, 1, commit=False)
        follower.producers.last_stable_offset(0)  # loaded: it follows the appends
        follower.append_as_follower(leader.read(0, 1 << 20).data)
        assert follower.producers.aborted_transactions(0, 10) == [AbortedTxn(1, 0, 2, 3)]
    finally:
        leader.close()
        follower.close()


def test_cleaner_stops_at_the_lso_and_drops_aborted_records(tmp_path) -> None:
    log = _log(tmp_path, compact=True)
    try:
        log.append_as_leader(build_batch([(b"k", b"committed")]), 0)  # 0
        log.append_as_leader(_txn(1, 0, n=1, key=b"k"), 0)  # 1: aborted below
        _end(log, 1, commit=False)  # 2
        log.append_as_leader(build_batch([(b"j", b"v1")]), 0)  # 3
        log.roll()  # [0, 4): cleanable
        log.append_as_leader(_txn(2, 0, n=1, key=b"j"), 0)  # 4: open (the LSO)
        for i in range(4):
            log.append_as_leader(build_batch([(b"j", b"later%d" % i)]), 0)
        log.roll()  # [4, 9): closed, but not below the LSO
        log.append_as_leader(build_batch([(b"z", b"active")]), 0)
        cleaner = Cleaner(1 << 20)
        assert cleaner.clean(log, log.end_offset) is not None
        recs = {r.offset: (r.key, r.value) for r in _all(log)}
        # the aborted record neither stays nor shadows the committed value of its key
        assert recs[0] == (b"k", b"committed") and 1 not in recs
        assert 2 in recs  # the marker stays
        # below the open transaction only: offset 3 is dirty but shadowed past the LSO: kept
        assert recs[3] == (b"j", b"v1") and all(o in recs for o in range(4, 9))
    finally:
        log.close()


def test_index_file_torn_tail_duplicates_and_order(tmp_path) -> None:
    from broker.log.txn_index import ENTRY_SIZE, AbortedTxnIndex

    index = AbortedTxnIndex(tmp_path)
    index.add(AbortedTxn(1, 0, 5, 0))
    index.add(AbortedTxn(2, 3, 9, 3))
    index.add(AbortedTxn(1, 0, 5, 0))  # already there (a rebuild): ignored
    index.add(AbortedTxn(3, 6, 7, 6))  # an older marker found by a rebuild: put in order
    assert [e.last_offset for e in index.entries] == [5, 7, 9]
    path = tmp_path / TXN_INDEX_FILE
    assert path.stat().st_size == 3 * ENTRY_SIZE
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x01")  # a torn append
    again = AbortedTxnIndex(tmp_path)
    assert again.entries == index.entries
    assert path.stat().st_size == 3 * ENTRY_SIZE  # the tail was cut
    assert [e.producer_id for e in again.collect(6, 8)] == [3, 2]  # markers >= 6, first < 8
    again.drop_below(8)
    again.truncate_to(9)
    assert again.entries == [] and not path.exists()
