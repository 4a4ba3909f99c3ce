"""Bounded file handles: an LRU of open segment fds per log directory.

A broker with thousands of partitions must not hold a descriptor per file: segment `.log` files
are opened on first use through a `FileHandles` cache and closed again, least recently used
first, when the cache holds `capacity` of them (`log.max.open.files`, derived from
RLIMIT_NOFILE by default). Index files hold no descriptor at all (index.py opens them for each
block write). A partition nobody writes or reads costs no descriptor.

    handles = FileHandles(capacity=512, name="/data/log-0")
    f = SegmentFile(path, handles)       # opens (and creates) the file, lazily afterwards
    with f as fd:                        # pinned: never closed by eviction while in use
        os.pread(fd, n, pos)
    f.close()                            # for good (deferred while a flush has it pinned)

Durability: closing a descriptor does not fsync and does not need to. Dirty pages belong to the
file (the inode), not the descriptor: a later fdatasync through a reopened descriptor writes
them, and the Log keeps its own set of segments written since the last flush. A writeback error
that nobody has seen yet is reported to the next fsync on a descriptor opened after it (Linux
errseq, 4.16 and later), so eviction loses no error either.

Out of descriptors (EMFILE/ENFILE) is not a disk failure: opening first closes more unpinned
handles and tries again; if it still fails the caller gets `FileLimitError` (a StorageError
naming the limit and the keys that move it) and no log or log dir is marked offline.

Threads: every method is thread-safe; one lock per cache covers the LRU, the pins and the
opens and closes it does. Pins are held for one operation (a Log method, under its lock, or a
flush's fdatasync outside it).
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import threading
from collections import OrderedDict
from pathlib import Path

from client.errors import StorageError

_log = logging.getLogger(__name__)

FD_LIMIT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})
MIN_OPEN_FILES = 16  # smallest useful budget (per broker)
# descriptors kept aside for sockets, the metadata log, checkpoints and transient opens
AUTO_SHARE = 2  # the derived budget is 1/AUTO_SHARE of the soft RLIMIT_NOFILE
AUTO_MAX = 1_000_000  # cap when the limit is unlimited
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


def nofile_limit() -> int:
    """The soft RLIMIT_NOFILE of this process (AUTO_MAX * AUTO_SHARE when unlimited)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return AUTO_MAX * AUTO_SHARE
    return soft


def derive_max_open_files(configured: int) -> int:
    """The broker's segment-handle budget: `configured`, or (-1) half the soft RLIMIT_NOFILE.
    Raises StorageError when `configured` leaves no room below the limit."""
    limit = nofile_limit()
    if configured < 0:
        return max(MIN_OPEN_FILES, min(AUTO_MAX, limit // AUTO_SHARE))
    if configured >= limit - MIN_OPEN_FILES:
        raise StorageError(
            f"log.max.open.files={configured} leaves no descriptors for sockets and the metadata"
            f" log under the open-files limit of {limit} (RLIMIT_NOFILE, `ulimit -n`): lower it"
            f" or raise the limit; -1 derives it ({limit // AUTO_SHARE} here)"
        )
    return max(MIN_OPEN_FILES, configured)


def is_fd_limit(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in FD_LIMIT_ERRNOS


class FileLimitError(StorageError):
    """The process ran out of file descriptors: not a disk failure, nothing goes offline."""


def fd_limit_error(exc: OSError, what: str) -> FileLimitError:
    """A FileLimitError for `exc` that names the limit and the keys that move it."""
    return FileLimitError(
        exc.errno,
        f"{what}: too many open files ({os.strerror(exc.errno or errno.EMFILE)}; open-files limit"
        f" {nofile_limit()}, RLIMIT_NOFILE): raise the limit (`ulimit -n`, LimitNOFILE=) or"
        " lower log.max.open.files to leave room for sockets",
    )


class FileHandles:
    """The LRU of open SegmentFiles of one log dir. `capacity` bounds the descriptors it keeps
    open; pinned files are never closed by it (they can exceed it for the length of a call)."""

    def __init__(self, capacity: int, name: str = "") -> None:
        if capacity < 1:
            raise ValueError(f"capacity={capacity}: expected >= 1")
        self.capacity = capacity
        self.name = name
        self._lock = threading.Lock()
        self._lru: OrderedDict[SegmentFile, None] = OrderedDict()
        self.opens = 0  # statistics (tests, benchmarks)
        self.evictions = 0

    @property
    def open_count(self) -> int:
        with self._lock:
            return len(self._lru)

    def close_all_idle(self) -> int:
        """Close every unpinned handle (after start-up: inactive partitions hold none)."""
        with self._lock:
            return self._evict_locked(len(self._lru))

    def _evict_locked(self, count: int) -> int:
        """Close up to `count` unpinned handles, least recently used first."""
        lru = self._lru
        victims: list[SegmentFile] = []
        for f in lru:  # oldest first; pinned files are in use right now, so rarely old
            if len(victims) >= count:
                break
            if not f._pins:
                victims.append(f)
        for f in victims:
            del lru[f]
            f._close_fd()
        self.evictions += len(victims)
        return len(victims)

    def _open_locked(self, f: SegmentFile) -> int:
        over = len(self._lru) + 1 - self.capacity
        if over > 0:
            self._evict_locked(over)
        try:
            fd = os.open(f.path, _OPEN_FLAGS, 0o644)
        except OSError as exc:
            if not is_fd_limit(exc):
                raise
            # the process is out of descriptors: give back half of ours and try once more
            if not self._evict_locked(max(1, len(self._lru) // 2)):
                raise fd_limit_error(exc, f"opening {f.path}") from exc
            _log.warning("%s: out of descriptors opening %s; closed idle files", self.name, f.path)
            try:
                fd = os.open(f.path, _OPEN_FLAGS, 0o644)
            except OSError as exc2:
                if is_fd_limit(exc2):
                    raise fd_limit_error(exc2, f"opening {f.path}") from exc2
                raise
        self.opens += 1
        self._lru[f] = None
        return fd


class SegmentFile:
    """One file opened through a FileHandles cache: O_RDWR, created if missing (only a segment
    being created or loaded is ever opened, and `close()` ends its use for good)."""

    __slots__ = ("path", "_cache", "_fd", "_pins", "_closed")

    def __init__(self, path: Path, cache: FileHandles) -> None:
        self.path = path
        self._cache = cache
        self._fd = -1
        self._pins = 0
        self._closed = False

    def acquire(self) -> int:
        """The open fd, pinned until release(). Opens the file if it was evicted."""
        cache = self._cache
        with cache._lock:
            if self._closed:
                raise StorageError(errno.EBADF, f"{self.path} is closed")
            if self._fd < 0:
                self._fd = cache._open_locked(self)
            else:
                cache._lru.move_to_end(self)
            self._pins += 1
            return self._fd

    def release(self) -> None:
        with self._cache._lock:
            self._pins -= 1
            assert self._pins >= 0, self.path
            if self._pins == 0 and self._closed:
                self._close_fd()

    def __enter__(self) -> int:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    @property
    def is_open(self) -> bool:
        return self._fd >= 0

    def release_fd(self) -> None:
        """Close the descriptor now if nobody uses it (the file stays usable: it reopens)."""
        with self._cache._lock:
            if self._fd >= 0 and not self._pins:
                self._cache._lru.pop(self, None)
                self._close_fd()

    def close(self) -> None:
        """End this file's use: its fd closes now, or when the last pin is released."""
        with self._cache._lock:
            self._closed = True
            self._cache._lru.pop(self, None)
            if not self._pins:
                self._close_fd()

    def _close_fd(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)
