"""Flusher rounds over many logs: parallel fdatasyncs, or one syncfs of the log dir's file
system for a round of at least SYNCFS_MIN_LOGS logs (broker/log/syncfs.py)."""

from __future__ import annotations

import errno

import pytest
from conftest import make_batch
from helpers import wait_until

from broker.log import Flusher, LogConfig, LogManager
from broker.log import flusher as flusher_mod
from broker.log.syncfs import SYNCFS_MIN_LOGS, syncfs

N = SYNCFS_MIN_LOGS + 8


def _round(tmp_path, directory, parallelism=16):
    mgr = LogManager([tmp_path / "d"], LogConfig(segment_bytes=4096))
    logs = [mgr.get_or_create("t", p) for p in range(N)]
    for log in logs:  # the first epoch of each is written by its own (first) flush
        log.append_as_leader(make_batch([b"first"]), 0)
        log.flush()
    rolled = logs[0]
    rolled.append_as_leader(make_batch([b"x" * 3000]), 0)
    rolled.append_as_leader(make_batch([b"y" * 3000]), 0)  # rolls: needs its own flush
    for log in logs[1:]:
        log.append_as_leader(make_batch([b"v"]), 0)
    seen: dict[int, int] = {}
    d = mgr.log_dirs[0] if directory else None
    flusher = Flusher("r", lambda t, p, o: seen.__setitem__(p, o), parallelism=parallelism,
                      directory=d)  # fmt: skip
    for log in logs:
        flusher.request_flush(log)
    flusher.start()
    wait_until(flusher.idle, 30, "the round to finish")
    flusher.stop()
    return mgr, logs, seen, flusher


@pytest.mark.skipif(syncfs is None, reason="syncfs needs Linux 5.8+")
def test_a_large_round_is_covered_by_one_syncfs(tmp_path):
    mgr, logs, seen, flusher = _round(tmp_path, directory=True)
    assert flusher.syncfs_rounds == 1 and flusher.rounds == 1
    assert seen == {p: log.end_offset for p, log in enumerate(logs)}
    assert all(log.flushed_offset == log.end_offset for log in logs)
    assert logs[0].segment_base_offsets[-1] > 0  # the rolled one was flushed on its own
    mgr.close()


def test_a_large_round_without_syncfs_runs_in_parallel(tmp_path):
    mgr, logs, seen, flusher = _round(tmp_path, directory=False)
    assert flusher.syncfs_rounds == 0
    assert seen == {p: log.end_offset for p, log in enumerate(logs)}
    mgr.close()


@pytest.mark.skipif(syncfs is None, reason="syncfs needs Linux 5.8+")
def test_a_failed_syncfs_fails_every_log_of_the_round(tmp_path, monkeypatch):
    def broken(directory):
        raise OSError(errno.EIO, "syncfs: I/O error")

    monkeypatch.setattr(flusher_mod, "syncfs", broken)
    mgr, logs, seen, flusher = _round(tmp_path, directory=True)
    assert flusher.syncfs_rounds == 1
    assert all(log.offline for log in logs[1:])
    assert all(log.flushed_offset < log.end_offset for log in logs[1:])
    assert all(p == 0 for p in seen)  # only the log flushed on its own was reported
    assert mgr.offline_dirs() == mgr.log_dirs
    mgr.close()
