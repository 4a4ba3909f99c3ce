"""The loop-mounted ext4 of tests/cluster/fault_disks.py: it fills up with a real ENOSPC (and
short writes on the way), space comes back when the filler goes, a read-only remount gives
EROFS, and nothing is left mounted or attached afterwards. Skips with the reason where loop
mounts are not possible."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest
from fault_disks import LoopExt4, unavailable_reason


def test_fills_with_enospc_frees_and_goes_read_only(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    disk = LoopExt4(tmp_path / "disk.img", tmp_path / "mnt", size_mib=16)
    with disk:
        device = disk.device
        assert device is not None and os.path.ismount(disk.mountpoint)
        filler = disk.fill(leave_bytes=1 << 20)
        assert 0 < disk.free_bytes() <= 2 << 20
        fd = os.open(disk.mountpoint / "f", os.O_WRONLY | os.O_CREAT, 0o644)
        written, short = 0, 0
        try:
            with pytest.raises(OSError) as info:
                for _ in range(100):  # 100 x 100 kB is far beyond the 1 MiB left
                    n = os.write(fd, b"x" * 100_000)
                    written += n
                    short += n < 100_000
            assert info.value.errno == errno.ENOSPC
        finally:
            os.close(fd)
        assert written > 500_000 and short <= 1
        filler.unlink()
        assert disk.free_bytes() > 10 << 20
        (disk.mountpoint / "g").write_bytes(b"fits again")
        disk.remount(read_only=True)
        with pytest.raises(OSError) as info:
            (disk.mountpoint / "h").write_bytes(b"no")
        assert info.value.errno == errno.EROFS
        assert (disk.mountpoint / "g").read_bytes() == b"fits again"
        disk.remount(read_only=False)
        (disk.mountpoint / "h").write_bytes(b"yes")
    assert not os.path.ismount(tmp_path / "mnt")
    attached = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert str(tmp_path / "disk.img") not in attached, attached
