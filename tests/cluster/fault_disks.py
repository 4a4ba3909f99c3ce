"""A small loop-mounted ext4 for full-disk tests (fault F10): real ENOSPC, including short
writes (a `write` that takes only part of the buffer), and fsync that really writes.

    with LoopExt4(tmp / "disk.img", tmp / "mnt", size_mib=32) as disk:   # mkfs, losetup, mount
        ... a server's log dir under disk.mountpoint ...
        filler = disk.fill(leave_bytes=4 << 20)   # a file that leaves ~4 MiB free
        ... produce until ENOSPC ...
        filler.unlink()                           # space again
        disk.remount(read_only=True)              # EROFS from now on; read_only=False undoes it
    # unmounted (umount, or umount -l when busy) and the loop device detached, also on failure

The image is made with no reserved blocks (-m 0: root would use them anyway) and its inode
tables and journal initialised at once (no ext4lazyinit writing behind the test's back). Needs
root, mkfs.ext4 (e2fsprogs), losetup and mount; `unavailable_reason()` says what is missing.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path


def unavailable_reason() -> str | None:
    """Why a loop-mounted ext4 cannot be made here, or None when it can."""
    if os.geteuid() != 0:
        return "loop mounts need root"
    for tool, package in (("mkfs.ext4", "e2fsprogs"), ("losetup", "mount"), ("mount", "mount")):
        if shutil.which(tool) is None:
            return f"no {tool} (apt-get install {package})"
    if not Path("/dev/loop-control").exists():
        return "no /dev/loop-control (no loop device support)"
    return None


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


class LoopExt4:
    """An ext4 image of `size_mib` MiB at `image`, mounted on `mountpoint` through its own loop
    device. Not thread-safe; one test drives it."""

    def __init__(self, image: Path | str, mountpoint: Path | str, size_mib: int = 32) -> None:
        self.image = Path(image)
        self.mountpoint = Path(mountpoint)
        self.size_mib = size_mib
        self.device: str | None = None

    def mount(self) -> Path:
        reason = unavailable_reason()
        if reason:
            raise RuntimeError(reason)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        with open(self.image, "wb") as f:
            f.truncate(self.size_mib << 20)
        opts = "lazy_itable_init=0,lazy_journal_init=0,nodiscard"
        res = _run("mkfs.ext4", "-q", "-F", "-m", "0", "-E", opts, str(self.image))
        if res.returncode != 0:
            raise RuntimeError(f"mkfs.ext4 failed: {res.stderr.strip()}")
        res = _run("losetup", "--find", "--show", str(self.image))
        if res.returncode != 0:
            raise RuntimeError(f"losetup failed: {res.stderr.strip()}")
        self.device = res.stdout.strip()
        res = _run("mount", "-t", "ext4", self.device, str(self.mountpoint))
        if res.returncode != 0:
            self.unmount()
            raise RuntimeError(f"mount of {self.device} failed: {res.stderr.strip()}")
        return self.mountpoint

    def unmount(self) -> None:
        """Unmount (lazily when something still uses it) and detach the loop device (which
        then goes when its last user does)."""
        problems = []
        if os.path.ismount(self.mountpoint):
            res = _run("umount", str(self.mountpoint))
            if res.returncode != 0:
                res = _run("umount", "-l", str(self.mountpoint))
                if res.returncode != 0:
                    problems.append(f"umount -l: {res.stderr.strip()}")
        if self.device is not None:
            res = _run("losetup", "-d", self.device)
            if res.returncode != 0:
                problems.append(f"losetup -d {self.device}: {res.stderr.strip()}")
            self.device = None
        if problems:
            raise RuntimeError("; ".join(problems))

    def remount(self, read_only: bool) -> None:
        """Remount read-only (writes then fail with EROFS, as after ext4 errors=remount-ro)
        or back read-write."""
        res = _run("mount", "-o", f"remount,{'ro' if read_only else 'rw'}", str(self.mountpoint))
        if res.returncode != 0:
            raise RuntimeError(f"remount of {self.mountpoint} failed: {res.stderr.strip()}")

    def free_bytes(self) -> int:
        sv = os.statvfs(self.mountpoint)
        return sv.f_bavail * sv.f_frsize

    def fill(self, name: str = "filler", leave_bytes: int = 0) -> Path:
        """Write (and fsync) a file of zeros-free data until about `leave_bytes` stay free, or
        until ENOSPC when `leave_bytes` is 0. Returns its path; unlink it to free the space."""
        path = self.mountpoint / name
        chunk = b"\xa5" * (1 << 20)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            while (room := self.free_bytes() - leave_bytes) > 0 or leave_bytes == 0:
                try:
                    os.write(fd, chunk[: max(4096, min(len(chunk), room))])
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
            os.fsync(fd)
        finally:
            os.close(fd)
        return path

    def __enter__(self) -> LoopExt4:
        self.mount()
        return self

    def __exit__(self, *exc: object) -> None:
        self.unmount()
