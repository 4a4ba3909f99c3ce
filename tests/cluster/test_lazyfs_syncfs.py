"""syncfs does not make data durable on a FUSE file system: it hands the dirty pages to the
daemon and never asks it to fsync. Shown on a LazyFS mount (data written and syncfs'ed is gone
at the power loss), and so the flusher does not use syncfs for a log dir there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from lazyfs import LazyFS, unavailable_reason

from broker.log.flusher import Flusher
from broker.log.syncfs import covers, file_system_type, open_dir, syncfs


@pytest.fixture
def fs(tmp_path: Path):
    reason = unavailable_reason() or (None if syncfs else "no syncfs here (Linux 5.8+)")
    if reason:
        pytest.skip(reason)
    with LazyFS(tmp_path / "disk", tmp_path / "mnt") as mounted:
        yield mounted


def test_syncfs_through_fuse_is_not_durable_so_the_flusher_fsyncs_each_file(fs) -> None:
    path = fs.mountpoint / "segment.log"
    with open(path, "wb") as f:
        f.write(b"x" * 10_000)
        f.flush()
        fd = open_dir(fs.mountpoint)
        try:
            syncfs(fd)  # type: ignore[misc]
        finally:
            os.close(fd)
    report = fs.drop_unsynced()
    assert report.bytes_lost == 10_000 and path.stat().st_size == 0
    assert (file_system_type(fs.mountpoint) or "").startswith("fuse")
    assert not covers(fs.mountpoint)
    flusher = Flusher("t", lambda *_: None, directory=fs.mountpoint)
    assert flusher._directory is None  # every round fdatasyncs its files
