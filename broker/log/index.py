"""Sparse per-segment indexes: `<base_offset:020d>.index` and `<base_offset:020d>.timeindex`.

Offset index, 8-byte entries, big-endian, appended in offset order:

    off  size  field
    0    4     relative_offset  uint32   batch base_offset - segment base_offset
    4    4     position         uint32   byte position of that batch in the .log file

Time index, 12-byte entries, big-endian, appended in timestamp order:

    off  size  field
    0    8     timestamp        int64    largest max_timestamp of the segment up to this batch
    8    4     relative_offset  uint32   base_offset - segment base_offset of that batch

An offset-index entry is added for a batch when more than `index_interval_bytes` were appended
since the previous entry; a time-index entry is added at the same moment when the segment's
largest timestamp grew. Both files are plain append-only files mirrored in memory as lists, so
a lookup is a bisect, and hold no file descriptor: each block write opens, writes and closes
the file (a broker with many partitions keeps its descriptors bounded: handles.py). New
entries reach the file in blocks of WRITE_EVERY (one pwrite instead
of one per entry: a 16 KiB batch appends an entry each time), and at release/close/sync_fd, so
the file may lag the memory by up to WRITE_EVERY - 1 entries between those points; lookups use
memory only. They are derived data: a missing, short or inconsistent file is rebuilt from the
segment (see Segment.rebuild_indexes), and a short but consistent one is a valid sparser index.

Thread safety: callers (LogSegment, under the Log's lock) serialise every call.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
from pathlib import Path

from client.errors import StorageError

OFFSET_ENTRY = struct.Struct(">II")
TIME_ENTRY = struct.Struct(">qI")
WRITE_EVERY = 64  # entries buffered in memory before one pwrite
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_FLAGS = os.O_RDWR | os.O_CREAT | _CLOEXEC

_log = logging.getLogger(__name__)


class _IndexFile:
    entry: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_bytes // self.entry.size)
        # len(self) >= max_entries, kept up to date by every change of the entries (read by
        # each append's roll check: an attribute, not a property call)
        self.is_full = False
        self.existed = path.exists()
        if not self.existed:  # every segment has both index files, even empty ones
            os.close(os.open(path, _FLAGS, 0o644))
        self._keys: list[int] = []
        self._values: list[int] = []
        self._written = 0  # entries [0, _written) are in the file; the rest only in memory

    def release(self) -> None:
        """Write buffered entries of an index that is no longer written (it holds no fd)."""
        self.close()

    def sync_fd(self) -> int:
        """A new fd on the file for fsync outside the Log's lock (caller closes it); buffered
        entries are written first."""
        self.write_pending()
        return os.open(self.path, os.O_RDONLY | _CLOEXEC)

    def _load(self) -> bool:
        """Read the file into memory; False (and empty) if its length is not whole entries."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        if len(data) % self.entry.size:
            return False
        keys, values = self._keys, self._values
        for a, b in self.entry.iter_unpack(data):
            keys.append(a)
            values.append(b)
        self._written = len(keys)
        self.is_full = len(keys) >= self.max_entries
        return True

    def _strictly_increasing(self) -> bool:
        """Keys and values both grow from entry to entry (what both index kinds require)."""
        keys, values = self._keys, self._values
        return all(keys[i] > keys[i - 1] and values[i] > values[i - 1] for i in range(1, len(keys)))

    def __len__(self) -> int:
        return len(self._keys)

    def _append_raw(self, a: int, b: int) -> None:
        keys = self._keys
        keys.append(a)
        self._values.append(b)
        if len(keys) >= self.max_entries:
            self.is_full = True
        if len(keys) - self._written >= WRITE_EVERY:
            self.write_pending()

    def write_pending(self) -> None:
        """Write the entries buffered in memory to the file (one pwrite). On a short write the
        file is cut back to its previous whole entries and StorageError is raised (the entries
        stay in memory; the caller rolls back)."""
        n, w = len(self._keys), self._written
        if w >= n:
            return
        pack = self.entry.pack
        data = b"".join([pack(a, b) for a, b in zip(self._keys[w:], self._values[w:], strict=True)])
        pos = w * self.entry.size
        fd = os.open(self.path, _FLAGS, 0o644)
        try:
            written = os.pwrite(fd, data, pos)
            if written != len(data):
                os.ftruncate(fd, pos)
                raise StorageError(f"{self.path}: short index write ({written} of {len(data)})")
        finally:
            os.close(fd)
        self._written = n

    def _truncate_entries(self, count: int) -> None:
        if count < len(self._keys):
            del self._keys[count:]
            del self._values[count:]
            self.is_full = len(self._keys) >= self.max_entries
        if count <= self._written:  # entries past _written were never in the file
            os.truncate(self.path, count * self.entry.size)
            self._written = count

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._truncate_entries(0)

    def close(self, write: bool = True) -> None:
        """Write buffered entries (unless `write` is False). A failed write is logged, not
        raised: the index is derived data, and a short file is still a valid (sparser) index
        or gets rebuilt when the segment is opened."""
        if write:
            try:
                self.write_pending()
            except OSError as exc:
                _log.warning("%s: buffered index entries not written: %s", self.path, exc)

    def delete(self) -> None:
        self.close(write=False)
        self.path.unlink(missing_ok=True)


class OffsetIndex(_IndexFile):
    """relative offset -> file position. keys: relative offsets, values: positions."""

    entry = OFFSET_ENTRY

    def load(self, segment_size: int) -> bool:
        """Load and sanity-check against the segment size; False when it must be rebuilt."""
        if not self._load() or not self._strictly_increasing():
            return False
        values = self._values
        return not values or values[-1] < segment_size

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        assert not self._keys or rel > self._keys[-1], (offset, self._keys[-1:])
        self._append_raw(rel, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry with offset <= `offset`, else (base, 0)."""
        i = bisect.bisect_right(self._keys, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._keys[i], self._values[i]

    def floor_position(self, position: int) -> tuple[int, int]:
        """(offset, position) of the last entry with position <= `position`, else (base, 0)."""
        i = bisect.bisect_right(self._values, position) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._keys[i], self._values[i]

    def last_entry(self) -> tuple[int, int]:
        if not self._keys:
            return self.base_offset, 0
        return self.base_offset + self._keys[-1], self._values[-1]

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= `offset`."""
        self._truncate_entries(bisect.bisect_left(self._keys, offset - self.base_offset))


class TimeIndex(_IndexFile):
    """max timestamp so far -> relative offset. keys: timestamps, values: relative offsets."""

    entry = TIME_ENTRY

    def load(self, next_offset: int) -> bool:
        """Load and sanity-check against the segment's next offset; False when it must be rebuilt."""
        if not self._load() or not self._strictly_increasing():
            return False
        values = self._values
        return not values or self.base_offset + values[-1] < next_offset

    @property
    def last_timestamp(self) -> int:
        return self._keys[-1] if self._keys else -1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) if `timestamp` exceeds the last entry's."""
        if self._keys and timestamp <= self._keys[-1]:
            return
        rel = offset - self.base_offset
        if self._values and rel <= self._values[-1]:
            return
        self._append_raw(timestamp, rel)

    def lookup_before(self, timestamp: int) -> int:
        """Offset of the last entry whose timestamp < `timestamp` (every batch up to and
        including it is older than `timestamp`), else the segment base offset."""
        i = bisect.bisect_left(self._keys, timestamp) - 1
        if i < 0:
            return self.base_offset
        return self.base_offset + self._values[i]

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= `offset`."""
        rel = offset - self.base_offset
        keep = bisect.bisect_left(self._values, rel)
        self._truncate_entries(keep)
