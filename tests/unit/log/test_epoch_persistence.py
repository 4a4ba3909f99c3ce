"""The leader-epoch checkpoint is written by the flush that covers a new epoch's first data
(not on the request path), and recovery finds an epoch whose checkpoint write a crash lost in
the batch headers."""

from __future__ import annotations

from conftest import make_batch

from broker.log import Log, LogConfig
from broker.log.checkpoint import read_epochs
from broker.log.epoch_cache import CHECKPOINT_NAME


def test_new_epoch_is_persisted_by_the_flush(tmp_path):
    log = Log(tmp_path / "t-0", "t", 0, LogConfig())
    log.append_as_leader(make_batch([b"a"]), 3)
    assert log.epoch_cache.entries == [(3, 0)]
    assert read_epochs(tmp_path / "t-0" / CHECKPOINT_NAME) == []  # not yet on disk
    assert log.flush() == 1
    assert read_epochs(tmp_path / "t-0" / CHECKPOINT_NAME) == [(3, 0)]
    log.close()


def test_recovery_reassigns_epochs_the_crash_did_not_persist(tmp_path):
    log = Log(tmp_path / "t-0", "t", 0, LogConfig())
    log.append_as_leader(make_batch([b"a", b"b"]), 3)
    log.flush()
    log.append_as_leader(make_batch([b"c"]), 5)  # epoch 5 only in memory and in the batch
    log.close()  # a crash: no flush
    assert read_epochs(tmp_path / "t-0" / CHECKPOINT_NAME) == [(3, 0)]
    again = Log(tmp_path / "t-0", "t", 0, LogConfig(), recovery_point=2, clean=False)
    assert again.end_offset == 3 and again.flushed_offset == 3
    assert again.epoch_cache.entries == [(3, 0), (5, 2)]
    assert again.end_offset_for_epoch(3) == (3, 2)
    assert read_epochs(tmp_path / "t-0" / CHECKPOINT_NAME) == [(3, 0), (5, 2)]  # flushed
    again.close()
