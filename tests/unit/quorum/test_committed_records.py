"""CommittedRecords: the records, snapshot and listener bookkeeping that LocalMetadataLog and
RemoteMetadataLog both hold (one definition of the rules the module docstring of
controller/quorum/log.py states)."""

from __future__ import annotations

import pytest

from client.errors import OffsetOutOfRangeError, StorageError
from controller.quorum.log import CommittedRecords, LocalMetadataLog
from controller.quorum.remote_log import RemoteMetadataLog


def test_commit_notifies_in_order_and_read_follows_offsets():
    records = CommittedRecords(max_records=10)
    seen: list[list[tuple[int, bytes]]] = []
    records.add_listener(seen.append)
    records.commit([(0, b"a"), (1, b"b")])
    records.commit([(2, b"c")])
    assert seen == [[(0, b"a"), (1, b"b")], [(2, b"c")]]
    assert records.last_offset() == 2
    assert records.read(1, 10) == [(1, b"b"), (2, b"c")]
    assert records.read(1, 1) == [(1, b"b")]
    assert records.read(3, 10) == []
    records.remove_listener(seen.append)
    records.commit([(3, b"d")])
    assert len(seen) == 2, "a removed listener is not called"


def test_failing_listener_does_not_fail_the_commit():
    records = CommittedRecords(max_records=10)
    seen: list[list[tuple[int, bytes]]] = []

    def broken(batch):
        raise RuntimeError("boom")

    records.add_listener(broken)
    records.add_listener(seen.append)
    records.commit([(0, b"a")])
    assert seen == [[(0, b"a")]]
    assert records.read(0, 10) == [(0, b"a")]


def test_bound_on_records_in_memory():
    records = CommittedRecords(max_records=2)
    records.commit([(0, b"a"), (1, b"b")])
    with pytest.raises(StorageError, match="take a snapshot"):
        records.commit([(2, b"c")])
    assert records.last_offset() == 1, "a refused batch is not held"


def test_snapshot_drops_covered_records_and_moves_the_start():
    records = CommittedRecords(max_records=10)
    resets: list[list[tuple[int, bytes]]] = []
    records.commit([(0, b"a"), (1, b"b"), (2, b"c")])
    records.add_listener(resets.append)
    assert records.is_newer_snapshot(1)
    assert records.install_snapshot(1, b"S1") is None
    assert records.start == 2 and records.snapshot == (1, b"S1")
    assert records.read(2, 10) == [(2, b"c")]
    with pytest.raises(OffsetOutOfRangeError):
        records.read(1, 10)
    assert not records.is_newer_snapshot(1)
    assert records.install_snapshot(5, b"S5") == (1, b"S1")
    assert records.last_offset() == 5, "an empty log after a snapshot ends at the snapshot"
    records.reset()
    assert resets == [[]], "a reset is an empty batch"


def test_both_logs_share_the_rules(tmp_path):
    """The local and the observer log give the same answers for the same snapshot."""
    local = LocalMetadataLog(str(tmp_path / "meta"), max_records_in_memory=3)
    remote = RemoteMetadataLog("1@127.0.0.1:1", max_records_in_memory=3)
    try:
        local.append([b"a", b"b", b"c"])
        with pytest.raises(StorageError, match="take a snapshot"):
            local.append([b"d"])
        for log in (local, remote):
            log.write_snapshot(1, b"S")
            log.write_snapshot(0, b"older")  # ignored: not newer
            assert log.latest_snapshot() == (1, b"S")
            assert log.log_start_offset() == 2
            with pytest.raises(OffsetOutOfRangeError):
                log.read(0)
        assert local.read(2) == [(2, b"c")]
        assert remote.read(2) == []
    finally:
        local.close()
        remote.close()
