"""LocalMetadataLog: durable appends, listeners, reopen, torn tails, snapshots."""

from __future__ import annotations

import os

import pytest

from client.errors import OffsetOutOfRangeError
from controller.quorum.log import LOG_FILE, LocalMetadataLog


def test_append_read_listeners(tmp_path):
    log = LocalMetadataLog(str(tmp_path))
    seen = []
    log.add_listener(seen.append)
    assert log.committed_offset() == -1 and log.read(0) == []
    assert log.append([b"a", b"b"]) == 1
    assert log.append([b"c"]) == 2
    assert log.append([]) == 2
    assert log.committed_offset() == log.end_offset() == 2
    assert log.read(1) == [(1, b"b"), (2, b"c")]
    assert log.read(0, max_records=1) == [(0, b"a")]
    assert seen == [[(0, b"a"), (1, b"b")], [(2, b"c")]]
    log.close()
    log2 = LocalMetadataLog(str(tmp_path))
    assert log2.read(0) == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert log2.append([b"d"]) == 3
    log2.close()


def test_torn_tail_truncated_at_every_byte(tmp_path):
    d = tmp_path / "full"
    log = LocalMetadataLog(str(d))
    log.append([b"one", b"two"])
    size_two = os.path.getsize(d / LOG_FILE)
    log.append([b"three-longer-payload"])
    log.close()
    data = (d / LOG_FILE).read_bytes()
    for cut in range(size_two, len(data)):
        sub = tmp_path / f"cut{cut}"
        sub.mkdir()
        (sub / LOG_FILE).write_bytes(data[:cut])
        log = LocalMetadataLog(str(sub))
        assert log.read(0) == [(0, b"one"), (1, b"two")], cut
        assert os.path.getsize(sub / LOG_FILE) == size_two
        assert log.append([b"x"]) == 2
        log.close()


def test_corrupt_byte_truncates_from_there(tmp_path):
    log = LocalMetadataLog(str(tmp_path))
    log.append([b"one"])
    log.append([b"two"])
    log.close()
    data = bytearray((tmp_path / LOG_FILE).read_bytes())
    data[-1] ^= 0xFF
    (tmp_path / LOG_FILE).write_bytes(bytes(data))
    assert LocalMetadataLog(str(tmp_path)).read(0) == [(0, b"one")]


def test_snapshot_drops_prefix_and_survives_reopen(tmp_path):
    log = LocalMetadataLog(str(tmp_path))
    log.append([b"a", b"b", b"c", b"d"])
    log.write_snapshot(2, b"SNAP2")
    assert log.latest_snapshot() == (2, b"SNAP2")
    assert log.log_start_offset() == 3
    assert log.read(3) == [(3, b"d")]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0)
    assert log.append([b"e"]) == 4
    log.write_snapshot(3, b"SNAP3")
    log.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("snapshot")) == [
        f"snapshot-{3:020d}.bin"
    ]
    log = LocalMetadataLog(str(tmp_path))
    assert log.latest_snapshot() == (3, b"SNAP3")
    assert log.read(4) == [(4, b"e")]
    assert log.end_offset() == 4
    log.close()


def test_snapshot_then_all_records_covered(tmp_path):
    log = LocalMetadataLog(str(tmp_path))
    log.append([b"a", b"b"])
    log.write_snapshot(1, b"S")
    log.close()
    log = LocalMetadataLog(str(tmp_path))
    assert log.end_offset() == 1 and log.read(2) == []
    assert log.append([b"c"]) == 2
    log.close()
