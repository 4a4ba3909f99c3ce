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


def _round(tmp_path, directory, parallelism=16, many=None):
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
    one = None if many is not None else (lambda t, p, o: seen.__setitem__(p, o))
    flusher = Flusher("r", one, parallelism=parallelism, directory=d, on_flushed_many=many)
    if many is not None:
        flusher.seen = seen  # type: ignore[attr-defined]
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


@pytest.mark.skipif(syncfs is None, reason="syncfs needs Linux 5.8+")
def test_a_syncfs_round_is_reported_in_one_call(tmp_path):
    calls: list[list[tuple[str, int, int]]] = []
    mgr, logs, _seen, flusher = _round(tmp_path, directory=True, many=calls.append)
    assert flusher.syncfs_rounds == 1
    # the rolled log flushed on its own: reported alone; the other N-1 in one call
    sizes = sorted(len(c) for c in calls)
    assert sizes == [1, N - 1], sizes
    reported = {p: o for c in calls for (_t, p, o) in c}
    assert reported == {p: log.end_offset for p, log in enumerate(logs)}
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


def _appended(tmp_path, n):
    mgr = LogManager([tmp_path / "d"], LogConfig())
    logs = [mgr.get_or_create("t", p) for p in range(n)]
    for log in logs:  # past each first epoch, which a log writes in a flush of its own
        log.append_as_leader(make_batch([b"first"]), 0)
        log.flush()
        log.append_as_leader(make_batch([b"v"]), 0)
    return mgr, logs


@pytest.mark.skipif(syncfs is None, reason="syncfs needs Linux 5.8+")
def test_the_logs_of_one_request_go_to_one_round(tmp_path):
    """Regression: a running flusher took a Produce's logs as the appends went on (a round
    per wake-up, most under SYNCFS_MIN_LOGS, so one fdatasync per file: 14,000 fdatasyncs
    for 24,000 batches over 5,000 partitions). Marked together, they are one syncfs round."""
    mgr, logs = _appended(tmp_path, N)
    seen: dict[int, int] = {}
    flusher = Flusher(
        "r", lambda t, p, o: seen.__setitem__(p, o), directory=mgr.log_dirs[0]
    ).start()
    flusher.request_flush_many(logs)
    wait_until(lambda: len(seen) == N and flusher.idle(), 30, "the round to finish")
    flusher.stop()
    assert (flusher.rounds, flusher.syncfs_rounds) == (1, 1)
    assert seen == {p: log.end_offset for p, log in enumerate(logs)}
    mgr.close()


def test_request_flush_many_waits_for_room_in_a_full_pending_set(tmp_path):
    mgr, logs = _appended(tmp_path, 20)
    seen: dict[int, int] = {}
    flusher = Flusher("r", lambda t, p, o: seen.__setitem__(p, o), max_pending=8).start()
    flusher.request_flush_many(logs)  # returns once all are marked, 8 at most at a time
    wait_until(lambda: len(seen) == 20, 30, "every log flushed")
    flusher.stop()
    assert seen == {p: log.end_offset for p, log in enumerate(logs)}
    assert flusher.rounds >= 3  # (20 logs through a set of 8)
    mgr.close()


@pytest.mark.skipif(syncfs is None, reason="syncfs needs Linux 5.8+")
def test_flush_now_syncs_many_logs_at_once_on_the_calling_thread(tmp_path):
    """A follower's logs after a fetch: flushed before flush_now returns, with one syncfs for
    many (it was one fdatasync per partition, one after the other), and not reported."""
    mgr, logs = _appended(tmp_path, N)
    seen: dict[int, int] = {}
    flusher = Flusher("r", lambda t, p, o: seen.__setitem__(p, o), directory=mgr.log_dirs[0])
    flusher.flush_now(logs)  # (the flusher's thread is not even started)
    assert flusher.syncfs_rounds == 1 and not seen
    assert all(log.flushed_offset == log.end_offset for log in logs)
    few = logs[:3]
    for log in few:
        log.append_as_leader(make_batch([b"w"]), 0)
    flusher.flush_now(few)  # under SYNCFS_MIN_LOGS: each on its own
    assert flusher.syncfs_rounds == 1
    assert all(log.flushed_offset == log.end_offset for log in few)
    flusher.stop()
    mgr.close()
