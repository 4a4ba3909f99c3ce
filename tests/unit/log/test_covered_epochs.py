"""New leader epochs in a flush round covered by syncfs (broker/log/epoch_cache.py, flusher.py):
the checkpoint is staged before the round's sync and swapped in after it, and a second sync
makes the swap durable before offsets are reported: no fsync per partition. Before, each log
with a new epoch left the round and paid its own fdatasync, fsync and directory fsync (the
first write to each of 5,000 partitions after a leader change took 2.2 s)."""

from __future__ import annotations

import errno
import os

import pytest
from conftest import make_batch
from helpers import wait_until

from broker.log import Flusher, LogConfig, LogManager
from broker.log import flusher as flusher_mod
from broker.log.checkpoint import read_epochs
from broker.log.epoch_cache import CHECKPOINT_NAME, SPARE_NAME, LeaderEpochCache
from broker.log.syncfs import SYNCFS_MIN_LOGS, syncfs

N = SYNCFS_MIN_LOGS + 8
needs_syncfs = pytest.mark.skipif(syncfs is None, reason="syncfs needs Linux 5.8+")


def _round(mgr, logs, epoch: int, monkeypatch, calls: dict) -> dict[int, int]:
    """Append one batch at `epoch` to every log, then one flusher round over them all; counts
    the syncfs, fsync and fdatasync calls made meanwhile into `calls`."""
    for log in logs:
        log.append_as_leader(make_batch([b"e%d" % epoch]), epoch)
    real_syncfs, real_fsync, real_fdatasync = flusher_mod.syncfs, os.fsync, os.fdatasync

    def counted(name, fn):
        def call(*a):
            calls[name] = calls.get(name, 0) + 1
            return fn(*a)

        return call

    monkeypatch.setattr(flusher_mod, "syncfs", counted("syncfs", real_syncfs))
    monkeypatch.setattr(os, "fsync", counted("fsync", real_fsync))
    monkeypatch.setattr(os, "fdatasync", counted("fdatasync", real_fdatasync))
    seen: dict[int, int] = {}
    flusher = Flusher(
        "r", lambda t, p, o: seen.__setitem__(p, o), directory=mgr.log_dirs[0]
    ).start()
    flusher.request_flush_many(logs)
    wait_until(lambda: len(seen) == len(logs) and flusher.idle(), 30, "the round to finish")
    flusher.stop()
    monkeypatch.undo()
    return seen


@needs_syncfs
def test_new_epochs_are_written_by_the_round_with_two_syncfs_and_no_fsync(tmp_path, monkeypatch):
    mgr = LogManager([tmp_path / "d"], LogConfig())
    logs = [mgr.get_or_create("t", p) for p in range(N)]
    for epoch in (0, 3, 7):  # a new topic's first writes, then two leader changes
        calls: dict[str, int] = {}
        seen = _round(mgr, logs, epoch, monkeypatch, calls)
        assert calls == {"syncfs": 2}, calls
        assert seen == {p: log.end_offset for p, log in enumerate(logs)}
        for log in logs:
            assert not log.epoch_cache.dirty
            want = [(e, i) for i, e in enumerate((0, 3, 7)) if e <= epoch]
            assert read_epochs(log.directory / CHECKPOINT_NAME) == want
    # the previous checkpoint is kept as the next staged file: rewritten, never made again
    spare = logs[0].directory / SPARE_NAME
    assert read_epochs(spare) == [(0, 0), (3, 1)]
    inode = spare.stat().st_ino
    calls = {}
    _round(mgr, logs, 9, monkeypatch, calls)
    assert (logs[0].directory / CHECKPOINT_NAME).stat().st_ino == inode
    assert not [p for log in logs for p in os.listdir(log.directory) if p.endswith(".tmp")]
    # and a restart reads the checkpoints the rounds wrote
    mgr.close()
    again = LogManager([tmp_path / "d"], LogConfig())
    assert again.get_or_create("t", 5).epoch_cache.entries == [(0, 0), (3, 1), (7, 2), (9, 3)]
    again.close()


@needs_syncfs
def test_rounds_without_new_epochs_sync_once(tmp_path, monkeypatch):
    mgr = LogManager([tmp_path / "d"], LogConfig())
    logs = [mgr.get_or_create("t", p) for p in range(N)]
    _round(mgr, logs, 0, monkeypatch, {})
    calls: dict[str, int] = {}
    _round(mgr, logs, 0, monkeypatch, calls)  # the same epoch: nothing to stage
    assert calls == {"syncfs": 1}, calls
    mgr.close()


@needs_syncfs
def test_a_failed_swap_fails_that_log_and_the_rest_of_the_round_is_reported(tmp_path, monkeypatch):
    mgr = LogManager([tmp_path / "d"], LogConfig())
    logs = [mgr.get_or_create("t", p) for p in range(N)]
    bad = logs[3]

    def broken() -> None:
        raise OSError(errno.EIO, "rename: I/O error")

    monkeypatch.setattr(bad.epoch_cache, "_swap_in", broken)
    for log in logs:
        log.append_as_leader(make_batch([b"x"]), 2)
    seen: dict[int, int] = {}
    flusher = Flusher(
        "r", lambda t, p, o: seen.__setitem__(p, o), directory=mgr.log_dirs[0]
    ).start()
    flusher.request_flush_many(logs)
    wait_until(lambda: len(seen) == N - 1 and flusher.idle(), 30, "the round to finish")
    flusher.stop()
    assert 3 not in seen and bad.offline and bad.flushed_offset == 0
    assert bad.epoch_cache.dirty  # written again by a later flush, were the dir to come back
    assert read_epochs(bad.directory / CHECKPOINT_NAME) == []
    for p, log in enumerate(logs):
        if log is not bad:
            assert seen[p] == 1 and read_epochs(log.directory / CHECKPOINT_NAME) == [(2, 0)]
    mgr.close()


def test_a_write_since_the_stage_wins_over_the_staged_entries(tmp_path):
    """A truncation (or any persist) between the stage and the swap wrote newer entries
    durably: the older staged ones are not swapped in over them."""
    cache = LeaderEpochCache(tmp_path)
    cache.assign(1, 0)
    token = cache.stage()
    assert token is not None and read_epochs(tmp_path / SPARE_NAME) == [(1, 0)]
    cache.assign(2, 5)
    cache.persist()  # durable, both entries
    cache.commit_staged(token)
    assert read_epochs(tmp_path / CHECKPOINT_NAME) == [(1, 0), (2, 5)]
    assert LeaderEpochCache(tmp_path).entries == [(1, 0), (2, 5)]
    assert cache.stage() is None  # nothing changed since


def test_a_crash_before_the_swap_leaves_the_previous_checkpoint(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    cache.assign(1, 0)
    cache.persist()
    cache.assign(4, 10)
    assert cache.stage() is not None  # staged, then the process dies before the swap
    assert LeaderEpochCache(tmp_path).entries == [(1, 0)]  # recovery re-adds 4 from the batches
