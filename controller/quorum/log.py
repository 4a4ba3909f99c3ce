"""MetadataLog: the interface the QuorumController writes to, and LocalMetadataLog.

Offsets start at 0; -1 means "none". `append(records)` returns the offset of the last record
appended. Only committed records are visible to `read()` and to listeners; a listener is called
with `[(offset, bytes), ...]` in offset order, once per commit, on the thread that committed
(LocalMetadataLog: the thread that called append, right after the fsync). Listeners must be quick
and must not block; they may read the log. An EMPTY list means the log was reset to a newer
snapshot (a Raft follower installed one): re-read from your position, and on
OffsetOutOfRangeError reload from `latest_snapshot()` (MetadataLoader does all of this).

LocalMetadataLog(dir) is the single-node log: every append is fsynced and committed at once.
Files in `dir`:

    metadata.log                 a sequence of entries:
        length u32 BE            (bytes after this field: 4 + 8 + len(payload))
        crc    u32 BE            CRC-32C of offset + payload
        offset i64 BE
        payload                  one encoded metadata record
    snapshot-<offset:020d>.bin   the newest snapshot (bytes from the caller), written atomically

On open, the newest readable snapshot is taken, the log is scanned, and a torn or corrupt tail
(short header, bad CRC, absurd length, non-contiguous offset) is truncated and logged. After
`write_snapshot(offset, data)` records up to `offset` are dropped from the log (rewritten
atomically) and `read()` of an offset below `log_start_offset()` raises OffsetOutOfRangeError
(load the snapshot instead). Thread-safe: any thread may call any method.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable

from client.errors import OffsetOutOfRangeError, StorageError
from client.fsutil import make_dirs, write_atomic
from client.records.crc import crc32c

_log = logging.getLogger(__name__)

Listener = Callable[[list[tuple[int, bytes]]], None]

_HDR = struct.Struct(">IIq")  # length, crc, offset
_MAX_RECORD = 64 * 1024 * 1024
LOG_FILE = "metadata.log"


class MetadataLog(ABC):
    """Where the controller's metadata records go. See the module docstring for the rules."""

    @abstractmethod
    def append(self, records: list[bytes]) -> int:
        """Append records; returns the last offset. Raises NotControllerError if not leader."""

    @abstractmethod
    def committed_offset(self) -> int:
        """Offset of the last committed record (-1: none)."""

    @abstractmethod
    def end_offset(self) -> int:
        """Offset of the last appended record, committed or not (-1: none)."""

    @abstractmethod
    def read(self, from_offset: int, max_records: int = 10_000) -> list[tuple[int, bytes]]:
        """Committed records with offset >= from_offset: max_records of them whenever that many
        follow, fewer only at the end (an observer takes a short answer for "caught up")."""

    @abstractmethod
    def add_listener(self, listener: Listener) -> None: ...

    @abstractmethod
    def remove_listener(self, listener: Listener) -> None: ...

    @abstractmethod
    def log_start_offset(self) -> int:
        """First offset `read` can return; records below it live only in the snapshot."""

    @abstractmethod
    def latest_snapshot(self) -> tuple[int, bytes] | None:
        """(offset, bytes) of the newest snapshot, or None."""

    @abstractmethod
    def write_snapshot(self, offset: int, data: bytes) -> None:
        """Store a snapshot of the state through `offset` (committed) and drop older records."""

    def is_leader(self) -> bool:
        """True when append() is allowed (always for the local log)."""
        return True

    def uncommitted(self) -> tuple[int, int] | None:
        """(entries appended and not yet committed, the most append() takes uncommitted), or
        None when appends commit at once (the local log)."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


def notify_listeners(listeners: list[Listener], batch: list[tuple[int, bytes]]) -> None:
    """Call each listener; a failing listener is logged and never fails the commit itself."""
    for listener in list(listeners):
        try:
            listener(batch)
        except Exception:
            _log.exception("metadata log listener %r failed", listener)


class CommittedRecords:
    """The bookkeeping every in-memory metadata log shares: the committed records held in
    memory (contiguous offsets from `start`), the newest snapshot, and the listeners. Its owner
    (LocalMetadataLog, RemoteMetadataLog) decides when records commit and where snapshots are
    stored; this object keeps them consistent under `lock`, which the owner also takes for its
    own state (an RLock: any thread may call any method, nested calls are fine)."""

    def __init__(self, max_records: int) -> None:
        self.lock = threading.RLock()
        self.max_records = max_records
        self.entries: list[tuple[int, bytes]] = []
        self.start = 0
        self.snapshot: tuple[int, bytes] | None = None
        self._listeners: list[Listener] = []

    def add_listener(self, listener: Listener) -> None:
        with self.lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        with self.lock:
            self._listeners.remove(listener)

    def last_offset(self) -> int:
        """Offset of the last record held (start - 1 when none)."""
        with self.lock:
            return self.entries[-1][0] if self.entries else self.start - 1

    def check_room(self, count: int) -> None:
        """StorageError when `count` more records would pass the in-memory bound."""
        with self.lock:
            if len(self.entries) + count > self.max_records:
                raise StorageError(
                    f"metadata log holds {len(self.entries)} records in memory; take a snapshot"
                )

    def commit(self, batch: list[tuple[int, bytes]]) -> None:
        """Hold `batch` (the next offsets, in order) and tell the listeners."""
        with self.lock:
            self.check_room(len(batch))
            self.entries.extend(batch)
            notify_listeners(self._listeners, batch)

    def read(self, from_offset: int, max_records: int) -> list[tuple[int, bytes]]:
        with self.lock:
            if from_offset < self.start:
                raise OffsetOutOfRangeError(
                    f"offset {from_offset} is below the log start {self.start}; load the snapshot"
                )
            i = bisect.bisect_left(self.entries, (from_offset,))  # first offset >= from_offset
            return self.entries[i : i + max_records]

    def is_newer_snapshot(self, offset: int) -> bool:
        with self.lock:
            return self.snapshot is None or offset > self.snapshot[0]

    def entries_after(self, offset: int) -> list[tuple[int, bytes]]:
        with self.lock:
            return [e for e in self.entries if e[0] > offset]

    def install_snapshot(self, offset: int, data: bytes) -> tuple[int, bytes] | None:
        """Take (offset, data) as the newest snapshot and drop the records it covers; returns
        the snapshot it replaces."""
        with self.lock:
            old = self.snapshot
            self.snapshot = (offset, data)
            self.entries = self.entries_after(offset)
            self.start = offset + 1
            return old

    def reset(self) -> None:
        """Tell the listeners the log was reset to a newer snapshot (an empty batch)."""
        with self.lock:
            notify_listeners(self._listeners, [])


def _encode_entry(offset: int, payload: bytes) -> bytes:
    body = struct.pack(">q", offset) + payload
    return _HDR.pack(4 + len(body), crc32c(body), offset) + payload


class LocalMetadataLog(MetadataLog):
    def __init__(self, directory: str, max_records_in_memory: int = 1_000_000) -> None:
        self._dir = directory
        self._records = CommittedRecords(max_records_in_memory)
        self._lock = self._records.lock
        make_dirs(directory)
        snapshot = self._load_snapshot()
        if snapshot is not None:
            self._records.install_snapshot(*snapshot)
        self._path = os.path.join(directory, LOG_FILE)
        self._recover()
        self._f = open(self._path, "ab")  # noqa: SIM115 - owned until close()
        self._closed = False

    # -- recovery ------------------------------------------------------------------------------
    def _load_snapshot(self) -> tuple[int, bytes] | None:
        names = sorted(
            (n for n in os.listdir(self._dir) if n.startswith("snapshot-") and n.endswith(".bin")),
            reverse=True,
        )
        for n in names:
            try:
                offset = int(n[len("snapshot-") : -len(".bin")])
                with open(os.path.join(self._dir, n), "rb") as f:
                    return offset, f.read()
            except (ValueError, OSError) as e:
                _log.warning("skipping unreadable metadata snapshot %s: %s", n, e)
        return None

    def _recover(self) -> None:
        if not os.path.exists(self._path):
            return
        with open(self._path, "rb") as f:
            data = f.read()
        records = self._records
        entries: list[tuple[int, bytes]] = []
        pos = 0
        expected = None
        while pos < len(data):
            if len(data) - pos < _HDR.size:
                break
            length, crc, offset = _HDR.unpack_from(data, pos)
            end = pos + 4 + length
            if length < 12 or length > _MAX_RECORD or end > len(data):
                break
            body = data[pos + 8 : end]
            if crc32c(body) != crc:
                break
            if expected is not None and offset != expected:
                break
            expected = offset + 1
            if offset >= records.start:
                entries.append((offset, bytes(data[pos + 16 : end])))
            pos = end
        if pos < len(data):
            _log.warning(
                "metadata log %s: torn or corrupt tail at byte %d of %d, truncating",
                self._path,
                pos,
                len(data),
            )
            with open(self._path, "r+b") as f:
                f.truncate(pos)
                f.flush()
                os.fsync(f.fileno())
        if entries and entries[0][0] != records.start:
            if entries[0][0] < records.start or records.snapshot is not None:
                raise StorageError(
                    f"metadata log {self._path}: first offset {entries[0][0]} "
                    f"does not follow snapshot start {records.start}"
                )
            records.start = entries[0][0]
        records.entries = entries  # no listeners yet: nothing to tell

    # -- MetadataLog -----------------------------------------------------------------------------
    def append(self, records: list[bytes]) -> int:
        if not records:
            return self.end_offset()
        with self._lock:
            if self._closed:
                raise StorageError("metadata log is closed")
            self._records.check_room(len(records))
            first = self.end_offset() + 1
            batch = [(first + i, bytes(r)) for i, r in enumerate(records)]
            buf = b"".join(_encode_entry(o, p) for o, p in batch)
            size = self._f.tell()
            try:
                self._f.write(buf)
                self._f.flush()
                os.fsync(self._f.fileno())
            except OSError as e:
                self._undo_partial_write(size, e)
                raise StorageError(f"metadata log {self._path}: {e}") from e
            self._records.commit(batch)
            return batch[-1][0]

    def _undo_partial_write(self, size: int, cause: OSError) -> None:
        """A failed append (ENOSPC, EIO, a short write) may have left part of the batch in the
        file; later appends must not land after it (recovery would cut them off). Cut the file
        back to `size`, or stop accepting appends when even that fails."""
        try:
            self._f.close()
        except OSError:
            pass  # the buffered bytes that could not be written are what we are discarding
        try:
            with open(self._path, "r+b") as f:
                f.truncate(size)
                f.flush()
                os.fsync(f.fileno())
            self._f = open(self._path, "ab")  # noqa: SIM115
        except OSError as e:
            _log.critical(
                "metadata log %s: cannot undo a failed append (%s; first %s); closing",
                self._path,
                e,
                cause,
            )
            self._closed = True
            return
        _log.error(
            "metadata log %s: append failed (%s); file cut back to %d bytes",
            self._path,
            cause,
            size,
        )

    def committed_offset(self) -> int:
        return self.end_offset()

    def end_offset(self) -> int:
        return self._records.last_offset()

    def read(self, from_offset: int, max_records: int = 10_000) -> list[tuple[int, bytes]]:
        return self._records.read(from_offset, max_records)

    def add_listener(self, listener: Listener) -> None:
        self._records.add_listener(listener)

    def remove_listener(self, listener: Listener) -> None:
        self._records.remove_listener(listener)

    def log_start_offset(self) -> int:
        with self._lock:
            return self._records.start

    def latest_snapshot(self) -> tuple[int, bytes] | None:
        with self._lock:
            return self._records.snapshot

    def write_snapshot(self, offset: int, data: bytes) -> None:
        with self._lock:
            if offset > self.end_offset():
                raise ValueError(f"snapshot offset {offset} beyond log end {self.end_offset()}")
            if not self._records.is_newer_snapshot(offset):
                return
            write_atomic(os.path.join(self._dir, f"snapshot-{offset:020d}.bin"), data)
            # Rewrite the log without the records the snapshot covers.
            keep = self._records.entries_after(offset)
            try:
                write_atomic(self._path, b"".join(_encode_entry(o, p) for o, p in keep))
            finally:
                # the new file, or the old one if the rename failed (still valid: the snapshot
                # covers a prefix of it)
                self._f.close()
                self._f = open(self._path, "ab")  # noqa: SIM115
            old = self._records.install_snapshot(offset, data)
            if old is not None:
                os.unlink(os.path.join(self._dir, f"snapshot-{old[0]:020d}.bin"))

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._f.close()
            elif not self._f.closed:
                try:
                    self._f.close()
                except OSError as e:
                    _log.warning("metadata log %s: close: %s", self._path, e)
