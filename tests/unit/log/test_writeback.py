"""Early writeback of large appends (broker/log/writeback.py): with log.flush.on.ack a large
append is written in CHUNK pieces and the kernel is asked to start writing each one; the bytes
on disk, the rollback on failure and the small-append path are unchanged."""

from __future__ import annotations

import errno
import os
import sys

import pytest
from conftest import make_batch

from broker.log import Log, LogConfig
from broker.log import segment as segment_mod
from broker.log.writeback import CHUNK, start_writeback
from client.errors import StorageError
from client.records.header import iter_headers


def open_log(path, **cfg):
    return Log(path / "t-0", "t", 0, LogConfig(**cfg), lambda: 1_000_000)


@pytest.fixture
def calls(monkeypatch):
    """Every (fd, offset, nbytes) the segment passes to start_writeback (the real call runs)."""
    seen: list[tuple[int, int, int]] = []

    def record(fd: int, offset: int, nbytes: int) -> None:
        seen.append((fd, offset, nbytes))
        if start_writeback is not None:
            start_writeback(fd, offset, nbytes)

    monkeypatch.setattr(segment_mod, "start_writeback", record)
    return seen


def big_records(n_batches: int = 4) -> bytes:
    return b"".join(make_batch([b"v" * 1000] * 900) for _ in range(n_batches))


def test_a_large_append_is_written_in_pieces_each_handed_to_writeback(tmp_path, calls):
    log = open_log(tmp_path)
    small = make_batch([b"s"])
    log.append_as_leader(small, 0)
    assert calls == []  # small appends: one pwrite, no hint
    data = big_records()
    assert len(data) > 3 * CHUNK
    info = log.append_as_leader(data, 0)
    assert [n for _, _, n in calls] == [CHUNK] * (len(data) // CHUNK) + [len(data) % CHUNK]
    starts = [off for _, off, _ in calls]
    assert starts == [len(small) + i * CHUNK for i in range(len(calls))]  # contiguous, in order
    assert log.flush() == info.last_offset + 1
    read = log.read(1, 10 * CHUNK)
    assert len(read.data) == len(data)
    assert [h.record_count for _, h in iter_headers(read.data, check_crc=True)] == [900] * 4
    with open(log.directory / "00000000000000000000.log", "rb") as f:
        on_disk = f.read()
    assert len(on_disk) == len(small) + len(data)


def test_without_flush_on_ack_a_large_append_is_one_write(tmp_path, calls):
    log = open_log(tmp_path, flush_on_ack=False)
    log.append_as_leader(big_records(2), 0)
    assert calls == []
    assert log.end_offset == 1800


def test_a_failed_piece_rolls_the_whole_append_back(tmp_path, calls, monkeypatch):
    log = open_log(tmp_path)
    log.append_as_leader(make_batch([b"a"]), 0)
    size_before = os.path.getsize(log.directory / "00000000000000000000.log")
    real = os.pwrite
    n = {"calls": 0}

    def pwrite(fd, data, pos):
        n["calls"] += 1
        if n["calls"] == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, pos)

    monkeypatch.setattr(segment_mod.os, "pwrite", pwrite)
    with pytest.raises(StorageError, match="No space left"):
        log.append_as_leader(big_records(), 0)
    monkeypatch.setattr(segment_mod.os, "pwrite", real)
    assert len(calls) == 2  # two pieces were written and hinted before the failure
    assert os.path.getsize(log.directory / "00000000000000000000.log") == size_before
    assert log.end_offset == 1
    assert log.read(0, 1000).next_offset == 1  # what was there before is intact


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sync_file_range is Linux-only")
def test_the_real_hint_runs_and_ignores_errors(tmp_path):
    assert start_writeback is not None
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        os.pwrite(fd, b"x" * (2 * CHUNK), 0)
        start_writeback(fd, 0, CHUNK)
        start_writeback(fd, CHUNK, CHUNK)
        os.fdatasync(fd)
    finally:
        os.close(fd)
    start_writeback(fd, 0, CHUNK)  # a closed fd: the hint fails quietly (EBADF), no exception
    assert path.stat().st_size == 2 * CHUNK
