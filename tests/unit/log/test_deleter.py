"""DirDeleter (broker/log/deleter.py): a deleted log's directory is removed on its own thread,
each large file cut down STEP_BYTES at a time with a pause between cuts (an unlink of hundreds
of MB at once stalls every fsync on the file system), and the LogManager's delete returns
before the files are gone."""

from __future__ import annotations

import os
from pathlib import Path

from broker.log import LogConfig, LogManager
from broker.log.deleter import DirDeleter, cut_points, remove_gradually
from tests.helpers import wait_until


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as f:
        f.truncate(size)


def test_cut_points_step_down_to_zero():
    assert cut_points(0, 8) == []
    assert cut_points(8, 8) == [0]
    assert cut_points(20, 8) == [12, 4, 0]


def test_a_large_file_is_cut_in_steps_with_a_pause_after_each(tmp_path):
    d = tmp_path / "orders-0.abc-delete"
    d.mkdir()
    big, small = d / "00000000000000000000.log", d / "00000000000000000000.index"
    _sparse(big, 20 * 1024)
    small.write_bytes(b"i" * 100)
    seen: list[tuple[float, int]] = []  # each pause, and the big file's size during it

    def sleep(seconds: float) -> None:
        seen.append((seconds, big.stat().st_size))

    assert remove_gradually(d, step=8 * 1024, pause=0.25, sleep=sleep)
    assert seen == [(0.25, 12 * 1024), (0.25, 4 * 1024), (0.25, 0)]
    assert not d.exists()


def test_stop_leaves_the_directory_for_the_next_start_up(tmp_path):
    d = tmp_path / "orders-0.abc-delete"
    d.mkdir()
    _sparse(d / "a.log", 100)
    pauses = []
    assert not remove_gradually(d, step=10, sleep=pauses.append, stop=lambda: len(pauses) == 3)
    assert len(pauses) == 3 and (d / "a.log").stat().st_size == 70


def test_log_manager_delete_returns_at_once_and_the_deleter_removes_the_files(tmp_path):
    cfg = LogConfig(segment_bytes=1 << 20)
    gate_open = []

    mgr = LogManager([tmp_path], cfg)
    log = mgr.get_or_create("orders", 0)
    seg = log.directory / "00000000000000000000.log"
    _sparse(seg, 64 * 1024)
    # a deleter whose pauses wait on the test: the delete must not wait for them
    mgr._deleter = DirDeleter(
        step=16 * 1024, pause=0, sleep=lambda s: wait_until(lambda: gate_open, 10)
    )
    assert mgr.delete("orders", 0)
    assert not (tmp_path / "orders-0").exists() and mgr.get("orders", 0) is None
    doomed = [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    assert len(doomed) == 1 and mgr._deleter.pending() == 1
    gate_open.append(True)
    # (the directory is gone a moment before the deleter marks itself idle)
    wait_until(lambda: not doomed[0].exists() and mgr._deleter.pending() == 0, 10)
    mgr.close()


def test_close_leaves_the_rest_and_start_up_removes_it(tmp_path):
    cfg = LogConfig(segment_bytes=1 << 20)
    mgr = LogManager([tmp_path], cfg)
    log = mgr.get_or_create("orders", 0)
    _sparse(log.directory / "00000000000000000000.log", 64 * 1024)
    mgr._deleter = DirDeleter(step=1024, pause=60.0)  # would take an hour: close cuts it short
    assert mgr.delete("orders", 0)
    wait_until(lambda: mgr._deleter.pending() == 1, 10)
    mgr.close()
    assert [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    LogManager([tmp_path], cfg).close()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    assert not os.path.exists(tmp_path / "orders-0")


def test_a_small_log_is_removed_at_once_on_the_callers_thread(tmp_path):
    """No file above one step (an empty partition, as the 1,000 of a decommission): removed
    before delete returns, as a plain rmtree, and the deleter's thread is never started."""
    mgr = LogManager([tmp_path], LogConfig(segment_bytes=1 << 20))
    mgr._deleter = DirDeleter(step=16 * 1024, sleep=lambda s: None)
    log = mgr.get_or_create("orders", 0)
    _sparse(log.directory / "00000000000000000000.log", 16 * 1024)
    assert mgr.delete("orders", 0)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == []
    assert mgr._deleter.pending() == 0 and mgr._deleter._thread is None
    mgr.close()
