"""Full disk: a log dir on a 2 MiB tmpfs, or on a small loop-mounted ext4 image (real ENOSPC,
including short writes). Appends fail with StorageError, the dir is marked offline, earlier
(flushed) data stays readable and intact, the file holds only whole batches, and a log in
another dir keeps working. Skips with the reason when the mount is not possible."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from log_crash_child import make_batch

from broker.log import LogConfig, LogManager
from client.errors import StorageError
from client.records.header import iter_headers


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def _mount(kind: str, mnt: Path, image: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a file system needs root")
    if kind == "tmpfs":
        if shutil.which("mount") is None:
            pytest.skip("no mount(8)")
        res = _run("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt))
    else:
        if shutil.which("mkfs.ext4") is None:
            pytest.skip("no mkfs.ext4 (apt install e2fsprogs)")
        with open(image, "wb") as f:
            f.truncate(4 * 1024 * 1024)
        res = _run("mkfs.ext4", "-q", "-F", "-b", "1024", "-N", "64", str(image))
        if res.returncode == 0:
            res = _run("mount", "-o", "loop", str(image), str(mnt))
    if res.returncode != 0:
        pytest.skip(f"cannot mount {kind}: {res.stderr.strip()}")


@pytest.mark.parametrize("kind", ["tmpfs", "ext4"])
def test_enospc_marks_dir_offline_and_keeps_data(tmp_path, kind):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    _mount(kind, mnt, tmp_path / "disk.img")
    mgr = None
    try:
        mgr = LogManager([mnt / "logs", tmp_path / "other"], LogConfig(segment_bytes=256 * 1024))
        full = mgr.get_or_create("full", 0)
        assert full.directory.parent == (mnt / "logs").resolve()
        other = mgr.get_or_create("other", 0)
        assert other.directory.parent == (tmp_path / "other").resolve()
        appended: list[bytes] = []
        with pytest.raises(StorageError) as info:
            for i in range(10_000):  # 10k x ~3 KiB is far beyond the disk
                batch = make_batch([os.urandom(1000) + b"%d" % i] * 3)
                full.append_as_leader(batch, 0)
                appended.append(batch)
                if i % 20 == 0:
                    full.flush()
        assert info.value.errno in (28, None) or "No space" in str(info.value)
        assert len(appended) > 50
        assert mgr.offline_dirs() == [(mnt / "logs").resolve()]
        assert full.offline
        with pytest.raises(StorageError):
            full.append_as_leader(make_batch([b"more"]), 0)
        # earlier data readable, intact, and the files end on whole batches
        offset, got = 0, 0
        while offset < full.end_offset:
            r = full.read(offset, 1 << 20)
            for pos, h in iter_headers(r.data, check_crc=True):
                assert r.data[pos + 21 : pos + h.size] == appended[got][21:]
                got += 1
            offset = r.next_offset
        assert got == len(appended) and full.end_offset == 3 * len(appended)
        on_disk = sum(p.stat().st_size for p in full.directory.glob("*.log"))
        assert on_disk == full.size_bytes == sum(len(b) for b in appended)
        # the other dir keeps working
        other.append_as_leader(make_batch([b"fine"]), 0)
        assert other.flush() == 1 and other.read(0, 100).data
        assert mgr.get_or_create("new", 0).directory.parent == (tmp_path / "other").resolve()
    finally:
        if mgr is not None:
            mgr.close()
        res = _run("umount", "-l", str(mnt))
        assert res.returncode == 0, res.stderr
