"""One sync for a whole flush round: Linux `syncfs(2)` on the log dir's file system.

A group-commit round over thousands of partitions needs thousands of fdatasyncs, one per file,
each a disk round trip (~1-2 ms on the development VM, where 16 in parallel still take ~60 ms
for 500 files). `syncfs` writes back every dirty page and inode of the file system and commits
its journal once: measured here, 500 freshly appended files in 5-60 ms. The flusher uses it
for rounds of at least SYNCFS_MIN_LOGS logs (flusher.py); smaller rounds keep per-file
fdatasyncs, which do not touch other files of the file system.

Durability is the same or stronger on the local file systems that implement it (ext4, XFS,
btrfs, f2fs): everything written before the call is on disk when it returns, data and metadata.
Elsewhere it may not be: on a FUSE file system syncfs only hands dirty pages to the daemon and
never asks it to fsync anything (measured: data written and syncfs'ed through a LazyFS mount is
lost at its power loss), and network file systems vary. So syncfs is used only on a log dir
whose file system type is in SYNCFS_FILE_SYSTEMS (`covers(directory)`); any other keeps per-file
fdatasyncs. Writeback errors are reported by syncfs since Linux 5.8 (the file
system's error sequence); on older kernels it may return 0 after an error, so it is not used
there. Its cost grows with whatever else is dirty on the same file system (other processes'
writes): give log dirs a file system of their own.

`syncfs` is None where it cannot be used (not Linux, libc without it, Linux before 5.8). Called
through ctypes, which releases the GIL.
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
import sys
from collections.abc import Callable
from pathlib import Path

SYNCFS_MIN_LOGS = 32  # rounds with fewer logs fdatasync each file
# local file systems whose syncfs writes back and commits every file's data (sync_fs)
SYNCFS_FILE_SYSTEMS = frozenset({"ext4", "ext3", "xfs", "btrfs", "f2fs"})


def _kernel_at_least(major: int, minor: int) -> bool:
    parts = platform.release().split(".")
    try:
        return (int(parts[0]), int(parts[1].split("-")[0])) >= (major, minor)
    except (IndexError, ValueError):
        return False


def _load() -> Callable[[int], None] | None:
    if not sys.platform.startswith("linux") or not _kernel_at_least(5, 8):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int

    def syncfs(fd: int) -> None:
        """Write back the whole file system holding the open file `fd`; OSError on failure."""
        if fn(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs: {os.strerror(err)}")

    return syncfs


def file_system_type(path: Path, mountinfo: str | None = None) -> str | None:
    """The type of the file system holding `path` (its longest mount point prefix in
    /proc/self/mountinfo), or None when it cannot be told."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return None
    target = os.path.realpath(path)
    best, fstype = "", None
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields = head.split()
        if not sep or len(fields) < 5 or not tail:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4])  # \040: " "
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, fstype = point, tail.split()[0]
    return fstype


def covers(directory: Path) -> bool:
    """Whether a syncfs of `directory`'s file system makes its files' data durable here."""
    return syncfs is not None and file_system_type(directory) in SYNCFS_FILE_SYSTEMS


def open_dir(directory: Path) -> int:
    """A descriptor on `directory` to pass to syncfs (the flusher keeps one per log dir, so a
    round never needs a new descriptor)."""
    return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))


syncfs = _load()
