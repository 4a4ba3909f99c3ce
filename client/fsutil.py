"""Durable file-system helpers shared by the broker's log and the controller's Raft storage.

Any thread may call them; they block on fsync.
"""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(path: Path | str) -> None:
    """fsync a directory so that creates, renames and unlinks in it are durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path | str, data: bytes | str) -> None:
    """Replace `path` with `data` atomically and durably (temp, fsync, rename, fsync dir).
    A crash leaves either the old file or the new one, never a mix."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    view = memoryview(data.encode() if isinstance(data, str) else data)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while view:  # os.write may take only part of the buffer (a full disk)
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)
