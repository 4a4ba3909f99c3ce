"""Idempotent appends on a real Log (broker/log/producer_state.py): a retried batch is stored
once and answered with its first offsets; sequence gaps, fenced epochs and unknown producers
are refused; the state is rebuilt from the log after a restart and after truncation, and
followers keep it as they replicate."""

from __future__ import annotations

import pytest

from broker.log import Log, LogConfig
from client.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    OutOfOrderSequenceNumberError,
    UnknownProducerIdError,
)
from client.records import build_batch, decode_records
from client.records.header import seq_add


def _log(path, name: str = "t-0") -> Log:
    return Log(path / name, "t", 0, LogConfig(segment_bytes=1024), lambda: 1_000_000)


def _batch(pid: int, epoch: int, seq: int, n: int = 3, tag: bytes = b"v") -> bytes:
    return build_batch(
        [(None, b"%s%d" % (tag, seq + i)) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def _values(log: Log) -> list[bytes]:
    return [r.value for r in decode_records(log.read(0, 1 << 24).data)]


def test_a_retried_batch_is_stored_once(tmp_path) -> None:
    log = _log(tmp_path)
    try:
        a = log.append_as_leader(_batch(7, 0, 0), 0)
        other = log.append_as_leader(build_batch([(None, b"plain")]), 0)  # not idempotent
        b = log.append_as_leader(_batch(7, 0, 3), 0)
        again = log.append_as_leader(_batch(7, 0, 0), 0)  # a retry of the first batch
        assert (again.first_offset, again.last_offset) == (a.first_offset, a.last_offset) == (0, 2)
        assert (other.first_offset, b.first_offset) == (3, 4)
        assert log.end_offset == 7
        assert _values(log) == [b"v0", b"v1", b"v2", b"plain", b"v3", b"v4", b"v5"]
        with pytest.raises(OutOfOrderSequenceNumberError, match="sequence 9, expected 6"):
            log.append_as_leader(_batch(7, 0, 9), 0)
        with pytest.raises(UnknownProducerIdError):
            log.append_as_leader(_batch(8, 0, 5), 0)
        log.append_as_leader(_batch(7, 1, 0, tag=b"e1-"), 0)  # a new epoch starts at 0
        with pytest.raises(InvalidProducerEpochError, match="fenced"):
            log.append_as_leader(_batch(7, 0, 6), 0)
        # one request, several consecutive batches: appended whole; its retry is a duplicate
        run = _batch(9, 0, 0) + _batch(9, 0, 3, n=2) + _batch(9, 0, 5)
        first = log.append_as_leader(run, 0)
        again = log.append_as_leader(run, 0)
        assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset)
        assert again.last_offset - again.first_offset == 7
        with pytest.raises(InvalidRecordError, match="consecutive sequences"):
            log.append_as_leader(_batch(9, 0, 8) + _batch(9, 0, 20), 0)
        with pytest.raises(InvalidRecordError, match="one producer"):
            log.append_as_leader(_batch(9, 0, 8) + build_batch([(None, b"plain")]), 0)
        # its first batch appended before, its last not: only partly a retry
        with pytest.raises(OutOfOrderSequenceNumberError, match="partly appended"):
            log.append_as_leader(_batch(9, 0, 5) + _batch(9, 0, 8), 0)
    finally:
        log.close()


def test_the_state_survives_a_restart_and_follows_truncation(tmp_path) -> None:
    log = _log(tmp_path)
    for seq in range(0, 60, 3):  # several segments (segment_bytes 1024)
        log.append_as_leader(_batch(7, 0, seq), 0)
    assert len(log.segment_base_offsets) > 1
    log.close()
    log = _log(tmp_path)
    try:
        assert log.append_as_leader(_batch(7, 0, 57), 0).first_offset == 57  # rebuilt: a dup
        assert log.end_offset == 60
        log.truncate_to(30)  # e.g. a follower cut back to its leader
        assert log.append_as_leader(_batch(7, 0, 30), 0).first_offset == 30  # no longer a dup
        with pytest.raises(OutOfOrderSequenceNumberError):
            log.append_as_leader(_batch(7, 0, 57), 0)
    finally:
        log.close()


def test_followers_keep_the_state_they_replicate(tmp_path) -> None:
    leader, follower = _log(tmp_path, "l-0"), _log(tmp_path, "f-0")
    try:
        follower.append_as_leader(_batch(5, 0, 0), 0)  # loads the follower's (empty) state
        follower.truncate_to(0)
        follower.producers.state_locked()
        for seq in (0, 3):
            leader.append_as_leader(_batch(5, 0, seq), 0)
        follower.append_as_follower(leader.read(0, 1 << 20).data)
        # the follower becomes leader: the producer's retry of its last batch is a duplicate
        assert follower.append_as_leader(_batch(5, 0, 3), 1).first_offset == 3
        assert follower.end_offset == 6
    finally:
        leader.close()
        follower.close()


def test_sequences_wrap() -> None:
    assert seq_add(2**31 - 1, 1) == 0
    assert seq_add(2**31 - 2, 3) == 1
    assert seq_add(5, 2) == 7


def test_check_and_update_across_the_sequence_wrap() -> None:
    """A batch whose sequences wrap past 2^31-1, one ending exactly there, and the next."""
    from broker.log.producer_state import ProducerStateManager
    from client.records.header import parse_header

    def h(seq: int, n: int):  # noqa: ANN202
        return parse_header(_batch(9, 0, seq, n))

    top = 2**31 - 1
    state = ProducerStateManager()
    state.update(h(top - 4, 3), 0)  # sequences top-4 .. top-2
    assert state.check(h(top - 1, 3)) is None  # top-1, top, 0
    state.update(h(top - 1, 3), 3)
    assert tuple(state.producers[9].batches[-1]) == (top - 1, 0, 3, 5)
    dup = state.check(h(top - 1, 3))  # its retry
    assert dup is not None and dup.first_offset == 3
    assert state.check(h(1, 2)) is None
    with pytest.raises(OutOfOrderSequenceNumberError):
        state.check(h(2, 1))
    ends_at_top = ProducerStateManager()
    ends_at_top.update(h(top - 2, 3), 0)  # top-2 .. top
    assert ends_at_top.check(h(0, 4)) is None
    with pytest.raises(OutOfOrderSequenceNumberError):
        ends_at_top.check(h(1, 1))


def test_snapshots_at_rolls_bound_the_scan_after_a_restart(tmp_path, monkeypatch) -> None:
    """While the state is loaded, each segment roll writes `<offset>.snapshot`; a restart
    rebuilds from the latest one and the headers after it only; a truncation below a snapshot
    deletes it; a damaged snapshot is skipped."""
    from broker.log.segment import LogSegment

    log = _log(tmp_path)
    for seq in range(0, 90, 3):
        log.append_as_leader(_batch(7, 0, seq), 0)
    bases = log.segment_base_offsets
    snaps = sorted(p.name for p in (tmp_path / "t-0").glob("*.snapshot"))
    assert len(bases) >= 3 and snaps == [f"{b:020d}.snapshot" for b in bases[-2:]]
    log.close()

    scanned: list[int] = []
    real = LogSegment.headers

    def counting(self):
        for h in real(self):
            scanned.append(h.base_offset)
            yield h

    monkeypatch.setattr(LogSegment, "headers", counting)
    log = _log(tmp_path)
    try:
        assert log.append_as_leader(_batch(7, 0, 87), 0).first_offset == 87  # a duplicate
        assert min(scanned) >= bases[-1]  # only the active segment was read
        log.truncate_to(bases[-1] - 3)  # below the latest snapshot: it goes
        snaps = sorted(p.name for p in (tmp_path / "t-0").glob("*.snapshot"))
        assert snaps == [f"{bases[-2]:020d}.snapshot"]
        (tmp_path / "t-0" / snaps[0]).write_bytes(b"\x00garbage")  # damaged: skipped
        scanned.clear()
        assert log.append_as_leader(_batch(7, 0, bases[-1] - 6), 0).first_offset == bases[-1] - 6
        assert min(scanned) == 0  # no readable snapshot: the whole log
    finally:
        log.close()


def test_describe_and_the_last_timestamp_in_snapshots() -> None:
    """DescribeProducers' rows: last sequence and the max timestamp of the latest batch; the
    snapshot keeps the timestamp, and one written before it was kept (four fields a producer)
    reads as -1."""
    import zlib

    import msgpack

    from broker.log.producer_state import ProducerInfo, ProducerStateManager
    from client.records.header import parse_header

    state = ProducerStateManager()
    for seq, ts in ((0, [500, 900, 700]), (3, [950])):
        raw = build_batch([(None, b"v", None, t) for t in ts], producer_id=4, producer_epoch=1,
                          base_sequence=seq, is_transactional=True)  # fmt: skip
        state.update(parse_header(raw), 10 + seq)
    assert state.describe() == [ProducerInfo(4, 1, 3, 950, -1, 10)]
    again = ProducerStateManager.from_bytes(state.to_bytes())
    assert again.describe() == state.describe()

    old = msgpack.packb({4: [1, [[0, 2, 10, 12], [3, 3, 13, 13]], 10, 2]})
    older = ProducerStateManager.from_bytes(old + zlib.crc32(old).to_bytes(4, "big"))
    assert older.describe() == [ProducerInfo(4, 1, 3, -1, 2, 10)]
