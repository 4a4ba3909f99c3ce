"""Swap two names atomically: Linux `renameat2(2)` with RENAME_EXCHANGE (ext4, XFS, btrfs,
f2fs; Linux 3.15+), through ctypes (which releases the GIL).

The leader-epoch checkpoint is rewritten by renaming a staged file over it (epoch_cache.py).
A plain rename frees the old file, so the next rewrite must create a new one, and creating a
file took 80-250 us here (the file system allocates an inode under its journal) against ~6 us
for overwriting one. Exchanging the names instead keeps the old checkpoint as the next staged
file. `exchange` is None where the call does not exist; it raises OSError otherwise
(ENOENT when either name is missing, EINVAL where the file system cannot exchange).
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable
from pathlib import Path

AT_FDCWD = -100
RENAME_EXCHANGE = 1 << 1


def _load() -> Callable[[Path, Path], None] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # (glibc before 2.28)
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int

    def exchange(a: Path, b: Path) -> None:
        """Give `a`'s file the name `b` and `b`'s the name `a`, in one atomic step."""
        if fn(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"renameat2({a}, {b}, RENAME_EXCHANGE): {os.strerror(err)}")

    return exchange


exchange = _load()
