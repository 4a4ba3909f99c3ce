"""Atomic checkpoint files (Kafka's text format).

Offset checkpoint (recovery-point-offset-checkpoint, replication-offset-checkpoint,
log-start-offset-checkpoint at each log-dir root), UTF-8 text:

    line 1   version       "0"
    line 2   entry count   N
    N lines  "<topic> <partition> <offset>"

Leader-epoch checkpoint (`leader-epoch-checkpoint` in a partition directory):

    line 1   version       "0"
    line 2   entry count   N
    N lines  "<epoch> <start_offset>"

Writes are atomic: write `<name>.tmp`, fsync it, rename over `<name>`, fsync the directory.
A missing file reads as empty; a malformed one raises StorageError naming the file and line.
Called from whichever thread owns the file (LogManager's caller, or a Log under its lock).
"""

from __future__ import annotations

from pathlib import Path

from client.errors import StorageError
from client.fsutil import write_atomic, write_plain

VERSION = 0


def _read_lines(path: Path, fields: int) -> list[list[str]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    lines = text.splitlines()
    if len(lines) < 2 or lines[0].strip() != str(VERSION):
        raise StorageError(f"{path}: bad checkpoint header {lines[:2]!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise StorageError(f"{path}: bad entry count {lines[1]!r}") from None
    body = [line.split() for line in lines[2:] if line.strip()]
    if len(body) != count or any(len(parts) != fields for parts in body):
        raise StorageError(f"{path}: expected {count} entries of {fields} fields, got {body!r}")
    return body


def write_offsets(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    """Write a (topic, partition) -> offset checkpoint atomically."""
    rows = [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    write_atomic(path, "\n".join([str(VERSION), str(len(rows)), *rows]) + "\n")


def read_offsets(path: Path) -> dict[tuple[str, int], int]:
    """Read a (topic, partition) -> offset checkpoint; {} when the file does not exist."""
    out: dict[tuple[str, int], int] = {}
    for topic, partition, offset in _read_lines(path, 3):
        try:
            out[(topic, int(partition))] = int(offset)
        except ValueError:
            raise StorageError(f"{path}: bad entry {topic} {partition} {offset}") from None
    return out


def write_epochs(path: Path, entries: list[tuple[int, int]], durable: bool = True) -> None:
    """Write a leader-epoch checkpoint [(epoch, start_offset)] atomically; `durable=False`:
    write `path` itself, with no fsync (a staged file that a file-system sync covers before
    it is renamed into place, epoch_cache.py)."""
    rows = [f"{e} {o}" for e, o in entries]
    text = "\n".join([str(VERSION), str(len(rows)), *rows]) + "\n"
    if durable:
        write_atomic(path, text)
    else:
        write_plain(path, text)


def read_epochs(path: Path) -> list[tuple[int, int]]:
    """Read a leader-epoch checkpoint; [] when the file does not exist."""
    try:
        return [(int(e), int(o)) for e, o in _read_lines(path, 2)]
    except ValueError:
        raise StorageError(f"{path}: bad leader-epoch entry") from None
