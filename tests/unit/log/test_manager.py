"""LogManager (dirs, checkpoints, clean marker, delete, retention) and Flusher (group commit)."""

from __future__ import annotations

import threading

import pytest
from conftest import make_batch
from helpers import wait_until

from broker.log import Flusher, Log, LogConfig, LogManager
from broker.log.checkpoint import read_offsets
from broker.log.manager import (
    CLEAN_SHUTDOWN_MARKER,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
)

CFG = LogConfig(segment_bytes=400, index_interval_bytes=64)


def fill(log: Log, n: int, size: int = 40) -> None:
    for _ in range(n):
        log.append_as_leader(make_batch([b"v" * size]), 0)


def test_layout_checkpoints_and_clean_marker(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    mgr = LogManager(dirs, CFG)
    logs = [mgr.get_or_create("orders", p) for p in range(4)]
    assert {log.directory.parent.name for log in logs} == {"a", "b"}  # spread across dirs
    assert mgr.get_or_create("orders", 0) is logs[0] and mgr.get("orders", 9) is None
    for log in logs:
        fill(log, 10)
    logs[1].retention.delete_records_before(4)
    mgr.checkpoint_high_watermarks({("orders", p): 7 + p for p in range(4)})
    mgr.close()
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_MARKER).exists()
        rp = read_offsets(d / RECOVERY_POINT_CHECKPOINT)
        assert rp and all(v == 10 for v in rp.values())
    lso_dir = logs[1].directory.parent
    assert read_offsets(lso_dir / LOG_START_OFFSET_CHECKPOINT)[("orders", 1)] == 4

    mgr = LogManager(dirs, CFG)
    assert not any((d / CLEAN_SHUTDOWN_MARKER).exists() for d in dirs)
    assert sorted(mgr.logs()) == [("orders", p) for p in range(4)]
    assert mgr.get("orders", 1).log_start_offset == 4
    assert all(log.end_offset == 10 for log in mgr.logs().values())
    assert mgr.read_high_watermarks() == {("orders", p): 7 + p for p in range(4)}
    assert mgr.delete("orders", 2) and mgr.get("orders", 2) is None
    assert not any((d / "orders-2").exists() for d in dirs)
    mgr.close()
    mgr = LogManager(dirs, CFG)
    assert sorted(mgr.logs()) == [("orders", 0), ("orders", 1), ("orders", 3)]
    mgr.close()


def test_unclean_close_reopens_with_data(tmp_path):
    mgr = LogManager([tmp_path], CFG)
    log = mgr.get_or_create("t", 0)
    fill(log, 25)
    mgr.close(clean=False)
    assert not (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()
    mgr = LogManager([tmp_path], CFG)
    assert mgr.get("t", 0).end_offset == 25 and mgr.get("t", 0).flushed_offset == 25
    mgr.close()


def test_retention_task(tmp_path):
    now = [10_000_000]
    mgr = LogManager(
        [tmp_path], LogConfig(segment_bytes=300, retention_ms=1000), clock=lambda: now[0]
    )
    log = mgr.get_or_create("t", 0)
    for _ in range(20):
        log.append_as_leader(make_batch([b"v" * 40], timestamp=now[0]), 0)
    assert mgr.run_retention() == 0
    now[0] += 5000
    assert mgr.run_retention({("t", 0): 10}) > 0
    assert 0 < log.log_start_offset <= 10
    assert read_offsets(tmp_path / LOG_START_OFFSET_CHECKPOINT)[("t", 0)] == log.log_start_offset
    mgr.close()


def test_flusher_group_commit_reports_flushed_offsets(tmp_path):
    mgr = LogManager([tmp_path], CFG)
    reported: dict[tuple[str, int], int] = {}
    lock = threading.Lock()

    def on_flushed(topic, partition, offset):
        with lock:
            assert offset > reported.get((topic, partition), 0)
            reported[(topic, partition)] = offset

    mgr.start_flushers(on_flushed)
    logs = [mgr.get_or_create("t", p) for p in range(3)]

    def writer(log):
        for _ in range(200):
            log.append_as_leader(make_batch([b"x" * 30]), 0)
            mgr.request_flush(log)

    threads = [threading.Thread(target=writer, args=(log,)) for log in logs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wait_until(lambda: all(reported.get(("t", p)) == 200 for p in range(3)), 10, "all flushed")
    flusher = mgr.flusher_for(logs[0])
    assert flusher.rounds < 600  # one fsync covered several appends
    mgr.close()
    assert all(log.flushed_offset == 200 for log in logs)


def test_flusher_stop_drains_and_joins(tmp_path):
    log = Log(tmp_path / "t-0", "t", 0, CFG)
    seen = []
    flusher = Flusher("x", lambda t, p, o: seen.append(o)).start()
    fill(log, 5)
    flusher.request_flush(log)
    flusher.stop()
    assert log.flushed_offset == 5 and seen == [5]
    # a flush done elsewhere is still reported by the next round
    flusher = Flusher("y", lambda t, p, o: seen.append(o)).start()
    fill(log, 2)
    flusher.request_flush(log)
    wait_until(lambda: seen[-1] == 7, 5, "report of 7")
    fill(log, 1)
    assert log.flush() == 8
    flusher.request_flush(log)
    wait_until(lambda: seen[-1] == 8, 5, "report of an external flush")
    flusher.stop()
    with pytest.raises(OSError):
        flusher.request_flush(log)


def test_flusher_requests_for_a_pending_log_share_one_round(tmp_path):
    log = Log(tmp_path / "t-0", "t", 0, CFG)
    seen = []
    flusher = Flusher("z", lambda t, p, o: seen.append(o))  # not started: requests stay pending
    for _ in range(3):
        fill(log, 1)
        flusher.request_flush(log)
    assert not flusher.idle()
    flusher.start()
    wait_until(flusher.idle, 5, "the flusher to drain")
    assert flusher.rounds == 1 and flusher.fsynced_logs == 1 and seen == [3]
    flusher.stop()
    log.close()


def test_a_log_deleted_while_its_flush_is_pending_leaves_its_dir_online(tmp_path):
    """Regression: a reassignment moved a replica off a broker while the group commit still
    held its log (appended by the last produce); the flush found the deleted log's segment
    closed (EBADF), took it for a disk failure, and the whole log dir went offline with every
    other partition in it. A closed log has nothing to flush: the dir stays online."""
    mgr = LogManager([tmp_path], CFG)
    seen: list[tuple[str, int, int]] = []
    flusher = Flusher("d", lambda t, p, o: seen.append((t, p, o)))  # not started: pending
    doomed, kept = mgr.get_or_create("t", 0), mgr.get_or_create("t", 1)
    fill(doomed, 3)
    fill(kept, 2)
    flusher.request_flush_many([doomed, kept])
    assert mgr.delete("t", 0)
    flusher.start()
    wait_until(flusher.idle, 5, "the flusher to drain")
    flusher.stop()
    assert mgr.offline_dirs() == [] and not doomed.offline and not kept.offline
    assert ("t", 1, 2) in seen and kept.flushed_offset == 2
    fill(kept, 1)  # the dir's other logs go on
    assert kept.flush() == 3
    mgr.close()


@pytest.mark.parametrize("ndirs", [1, 2])
def test_flush_now_and_request_flush_many_reach_each_logs_dir(tmp_path, ndirs):
    """One log dir takes every log without looking at them; with several, each dir's flusher
    gets its own logs. An empty list asks nothing, flushers started or not."""
    mgr = LogManager([tmp_path / f"d{i}" for i in range(ndirs)], CFG)
    try:
        mgr.flush_now([])
        mgr.request_flush_many([])  # (no flusher started: nothing to ask, no error)
        logs = [mgr.get_or_create("t", p) for p in range(4)]
        assert len({log.log_dir for log in logs}) == ndirs
        for log in logs:
            fill(log, 2)
        mgr.flush_now(logs[:2])  # no flushers: each on its own
        assert [log.flushed_offset for log in logs] == [2, 2, 0, 0]
        mgr.start_flushers()
        mgr.flush_now(logs[2:3])
        assert logs[2].flushed_offset == 2
        mgr.request_flush_many(logs[3:])
        wait_until(lambda: logs[3].flushed_offset == 2, 5, "the flusher's round")
    finally:
        mgr.close()
