"""A truncation persists the lowered recovery point before anything is appended where it cut.

Found by the Hypothesis state machine (test_log_state_machine.py): append at epoch 0, a clean
restart (recovery point 1 on disk), a truncation to 0, two appends (offsets 0..2, across two
segments), a crash. The recovery point file still said 1, so recovery took the segment holding
offset 0 as durable, neither re-validated it nor scanned it for epochs, and epoch 0 came back
starting at offset 1. Kafka's LogManager.truncateTo checkpoints the recovery offsets too.
"""

from __future__ import annotations

from conftest import make_batch

from broker.log import LogConfig, LogManager
from broker.log.checkpoint import read_offsets
from broker.log.manager import RECOVERY_POINT_CHECKPOINT

NOW = 1_000_000


def _manager(root):
    cfg = LogConfig(segment_bytes=300, index_interval_bytes=0, retention_ms=50_000)
    return LogManager([root], cfg, lambda: NOW)


def _batch(size: int = 0) -> bytes:
    return make_batch([b"\x01" * size], timestamp=NOW - 10_000)


def test_a_truncation_below_the_recovery_point_is_persisted_and_a_crash_recovers_the_epochs(
    tmp_path,
):
    mgr = _manager(tmp_path)
    log = mgr.get_or_create("t", 0)
    log.append_as_leader(_batch(), 0)
    mgr.close(clean=True)
    assert read_offsets(tmp_path / RECOVERY_POINT_CHECKPOINT)[("t", 0)] == 1
    mgr = _manager(tmp_path)
    log = mgr.get("t", 0)
    log.truncate_to(0)
    # persisted at once: a crash from here on re-validates everything from offset 0
    assert read_offsets(tmp_path / RECOVERY_POINT_CHECKPOINT)[("t", 0)] == 0
    log.append_as_leader(_batch(), 0)
    log.append_as_leader(_batch() + _batch(94), 0)
    assert log.epoch_cache.entries == [(0, 0)]
    mgr.close(clean=False)  # a crash: nothing flushed since the truncation
    mgr = _manager(tmp_path)
    try:
        log = mgr.get("t", 0)
        assert (log.log_start_offset, log.end_offset) == (0, 3)
        assert log.epoch_cache.entries == [(0, 0)]
    finally:
        mgr.close(clean=False)


def test_a_partial_truncation_persists_the_lowered_recovery_point(tmp_path):
    mgr = _manager(tmp_path)
    try:
        log = mgr.get_or_create("t", 0)
        for _ in range(4):
            log.append_as_leader(_batch(), 0)
        log.flush()
        mgr.checkpoint_recovery_points()
        assert read_offsets(tmp_path / RECOVERY_POINT_CHECKPOINT)[("t", 0)] == 4
        log.truncate_to(2)
        assert read_offsets(tmp_path / RECOVERY_POINT_CHECKPOINT)[("t", 0)] == 2
    finally:
        mgr.close(clean=False)
