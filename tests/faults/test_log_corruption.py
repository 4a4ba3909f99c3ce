"""Corrupt or cut segment and index files, then reopen: recovery truncates only the damaged tail
(logged at WARNING with offset and reason) and rebuilds indexes; everything before is intact."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from log_crash_child import make_batch

from broker.log import LogConfig, LogManager
from broker.log.manager import CLEAN_SHUTDOWN_MARKER
from client.records.header import iter_headers

CFG = LogConfig(segment_bytes=2000, index_interval_bytes=100)
N = 60  # batches of 2 records, ~100 bytes each: several segments


def build(root: Path, clean: bool, checkpoint: bool = False) -> list[bytes]:
    mgr = LogManager([root], CFG)
    log = mgr.get_or_create("t", 0)
    for i in range(N):
        log.append_as_leader(make_batch([b"v%03d" % i * 10, b"w"], timestamp=1000 + i), 1)
    data = log.read(0, 1 << 30)
    batches = []
    offset = 0
    while offset < log.end_offset:
        r = log.read(offset, 1 << 20)
        batches += [r.data[p : p + h.size] for p, h in iter_headers(r.data)]
        offset = r.next_offset
    assert data.data and len(batches) == N
    if checkpoint:
        log.flush()
        mgr.checkpoint_recovery_points()
    mgr.close(clean=clean)
    return batches


def segments(root: Path) -> list[Path]:
    return sorted((root / "t-0").glob("*.log"))


def reopen_and_read(root: Path) -> tuple[LogManager, list[bytes]]:
    mgr = LogManager([root], CFG)
    log = mgr.get("t", 0)
    out, offset = [], log.log_start_offset
    while offset < log.end_offset:
        r = log.read(offset, 1 << 20)
        out += [r.data[p : p + h.size] for p, h in iter_headers(r.data, check_crc=True)]
        offset = r.next_offset
    return mgr, out


@pytest.mark.parametrize("where", ["records", "crc", "magic", "length"])
def test_flipped_bytes_in_last_batch_truncate_only_it(tmp_path, caplog, where):
    batches = build(tmp_path, clean=False)
    last = segments(tmp_path)[-1]
    size = last.stat().st_size
    pos = {
        "records": size - 3,
        "crc": size - len(batches[-1]) + 18,
        "magic": size - len(batches[-1]) + 16,
        "length": size - len(batches[-1]) + 9,
    }[where]
    with open(last, "r+b") as f:
        f.seek(pos)
        byte = f.read(1)
        f.seek(pos)
        f.write(bytes([byte[0] ^ 0x5A]))
    with caplog.at_level(logging.WARNING, logger="broker.log"):
        mgr, got = reopen_and_read(tmp_path)
    assert got == batches[:-1]
    assert mgr.get("t", 0).end_offset == 2 * (N - 1)
    assert any(
        "recovery truncated" in r.message and f"offset {2 * (N - 1)}" in r.message
        for r in caplog.records
    )
    mgr.get("t", 0).append_as_leader(make_batch([b"again"]), 2)  # the log goes on
    mgr.close()
    mgr, got = reopen_and_read(tmp_path)
    assert got[:-1] == batches[:-1] and len(got) == N
    mgr.close()


@pytest.mark.parametrize("cut", [1, 11, 60, -1])
def test_segment_cut_mid_batch(tmp_path, caplog, cut):
    batches = build(tmp_path, clean=False)
    last = segments(tmp_path)[-1]
    size = last.stat().st_size
    keep = size - len(batches[-1]) + cut if cut > 0 else size - 1
    os.truncate(last, keep)
    with caplog.at_level(logging.WARNING, logger="broker.log"):
        mgr, got = reopen_and_read(tmp_path)
    assert got == batches[:-1]
    assert any("torn" in r.message for r in caplog.records)
    mgr.close()


def test_corrupt_middle_segment_deletes_later_ones(tmp_path):
    batches = build(tmp_path, clean=False)
    segs = segments(tmp_path)
    assert len(segs) >= 3
    middle = segs[1]
    first_in_middle = int(middle.stem)
    with open(middle, "r+b") as f:
        f.seek(middle.stat().st_size - 2)
        f.write(b"\xff\xff")
    mgr, got = reopen_and_read(tmp_path)
    assert [p.name for p in segments(tmp_path)] == [s.name for s in segs[:2]]
    n_ok = len(got)
    assert got == batches[:n_ok] and n_ok * 2 >= first_in_middle
    mgr.close()


def test_recovery_point_skips_checked_segments_but_still_recovers_tail(tmp_path):
    batches = build(tmp_path, clean=False, checkpoint=True)
    last = segments(tmp_path)[-1]
    os.truncate(last, last.stat().st_size - 5)
    mgr, got = reopen_and_read(tmp_path)
    assert got == batches[:-1]
    mgr.close()


@pytest.mark.parametrize("clean", [True, False])
@pytest.mark.parametrize("damage", ["delete", "garble", "short", "time"])
def test_missing_or_garbled_indexes_are_rebuilt(tmp_path, caplog, clean, damage):
    batches = build(tmp_path, clean=clean)
    assert (tmp_path / CLEAN_SHUTDOWN_MARKER).exists() == clean
    for seg in segments(tmp_path):
        index = seg.with_suffix(".index")
        tindex = seg.with_suffix(".timeindex")
        if damage == "delete":
            index.unlink()
            tindex.unlink()
        elif damage == "garble":
            index.write_bytes(os.urandom(index.stat().st_size or 16))
        elif damage == "short":
            index.write_bytes(index.read_bytes()[:-3] or b"\x00")
        else:
            tindex.write_bytes(os.urandom(24))
    mgr, got = reopen_and_read(tmp_path)
    assert got == batches
    log = mgr.get("t", 0)
    for offset in range(0, log.end_offset, 7):  # index lookups land on the right batch
        first = next(iter_headers(log.read(offset, 1).data))[1]
        assert first.base_offset <= offset <= first.last_offset
    assert log.offset_for_timestamp(1000 + 33).offset == 66
    mgr.close()
    for seg in segments(tmp_path)[:-1]:
        assert seg.with_suffix(".index").stat().st_size % 8 == 0
        assert seg.with_suffix(".index").stat().st_size > 0


@pytest.mark.parametrize("lost", ["last batch", "whole segment"])
def test_a_segment_that_lost_its_tail_on_a_batch_boundary_ends_the_log(tmp_path, caplog, lost):
    """A power loss can keep a later segment's data and lose the end of an earlier one (each
    file is written back on its own; the LazyFS power-loss test of the ack-before-fsync server
    in tests/cluster/test_lazyfs_power_loss.py left such holes): the earlier segment then ends
    on a whole batch, below the next segment's base offset. Recovery must cut the log at that
    gap and delete the later segments, not serve a log with a hole in it."""
    batches = build(tmp_path, clean=False)  # batch i holds offsets 2i and 2i + 1
    segs = segments(tmp_path)
    assert len(segs) >= 3
    middle, next_base = segs[1], int(segs[2].stem)
    if lost == "last batch":
        os.truncate(middle, middle.stat().st_size - len(batches[next_base // 2 - 1]))
        n_ok = next_base // 2 - 1
    else:
        os.truncate(middle, 0)
        n_ok = int(middle.stem) // 2
    with caplog.at_level(logging.WARNING, logger="broker.log"):
        mgr, got = reopen_and_read(tmp_path)
    assert got == batches[:n_ok]
    assert mgr.get("t", 0).end_offset == 2 * n_ok
    assert [p.name for p in segments(tmp_path)] == [s.name for s in segs[:2]]
    assert any("gap" in r.message and f"offset {2 * n_ok}" in r.message for r in caplog.records)
    mgr.get("t", 0).append_as_leader(make_batch([b"again"]), 2)  # the log goes on from there
    assert mgr.get("t", 0).end_offset == 2 * n_ok + 1
    mgr.close()
