"""Durability of one Log (held by it as `log.durability`): which segments were written since
the last flush, the flushed offset, the flush policy and the flush itself (fdatasync of those
segments, outside the log's lock), and the covered-flush protocol of the log dir's Flusher.

The Log tells it what it writes, creates and deletes (`mark_dirty`, `mark_dir_dirty`, `forget`,
lock held); it reads the Log's segment list, end offset and generation under the log's lock.

A segment's .log descriptor may have been closed by the log dir's handle cache since it was
written (handles.py): the flush reopens it, and the fdatasync writes every dirty page of the
file, whichever descriptor wrote them. Which thread calls what: see log.py.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from client.fsutil import fsync_dir

from .handles import is_fd_limit
from .segment import LogSegment

if TYPE_CHECKING:
    from .log import Log

# a covered flush in progress: (target offset, generation, segments taken, directory dirty,
# bytes taken, staged leader-epoch token or None)
CoveredToken = tuple[int, int, list[LogSegment], bool, int, int | None]


class LogDurability:
    """Its state is guarded by the log's lock; `_flush_lock` serialises flushes (taken before
    the log's lock, never inside it). Which thread calls what: see log.py."""

    def __init__(self, log: Log, clock: Callable[[], int]) -> None:
        self._log = log
        self._clock = clock
        self._flush_lock = threading.Lock()
        self._dirty: dict[int, LogSegment] = {}  # written since the last flush, by base offset
        self._dir_dirty = False  # a file created or removed since the last flush
        self._flushed = 0  # set by opened()
        self._last_flush_ms = 0
        # the flushed offset the log dir's Flusher last reported (its own, under its lock)
        self.reported_flushed_offset = -1
        self._unflushed_bytes = 0  # record bytes appended since the last flush took them
        # record bytes made durable by this log's flushes, ever (written under the log's lock,
        # read without it: the flusher's bytes-per-round metric sums it before and after)
        self.flushed_bytes = 0

    # -- what the Log tells it (lock held) ------------------------------------------------------

    def opened(self, flushed: int, now_ms: int) -> None:
        """The log is open: what recovery found on disk is flushed up to `flushed`."""
        self._flushed = flushed
        self._last_flush_ms = now_ms

    def mark_dirty(self, seg: LogSegment, nbytes: int = 0) -> None:
        """`seg` was written (`nbytes` of records appended, or its indexes were): the next flush
        fsyncs it."""
        self._dirty[seg.base_offset] = seg
        self._unflushed_bytes += nbytes

    def mark_dir_dirty(self) -> None:
        """A file was created or removed: the next flush fsyncs the directory."""
        self._dir_dirty = True

    def forget(self, seg: LogSegment) -> None:
        """`seg` is being deleted: nothing of it to flush, the directory changes."""
        self._dirty.pop(seg.base_offset, None)
        self._dir_dirty = True

    def truncated_locked(self, end: int) -> None:
        """The log was truncated to `end`: the flushed offset never stays above it."""
        self._flushed = min(self._flushed, end)
        if end <= self._flushed:  # nothing unflushed is left (else: an over-count, rare)
            self._unflushed_bytes = 0

    # -- flushing --------------------------------------------------------------------------------

    @property
    def flushed_offset(self) -> int:
        return self._flushed

    @property
    def dirty_segments(self) -> int:
        """How many segments wait for a flush (a figure for benchmarks and tests)."""
        return len(self._dirty)

    def should_flush(self) -> bool:
        """Whether unflushed data should be fsynced now under this log's flush policy."""
        unflushed = self._log.end_offset - self._flushed
        if unflushed <= 0 and not self._dirty:
            return False
        cfg = self._log.config
        return (
            cfg.flush_on_ack
            or unflushed >= cfg.flush_messages
            or self._clock() - self._last_flush_ms >= cfg.flush_ms
        )

    def prepare_covered_flush(self) -> CoveredToken | bool:
        """The first step of a flush covered by a file-system-wide sync (syncfs.py), for the
        flusher. Returns True when there is nothing to flush, False when this log needs its
        own flush() (a rolled segment's indexes to write, or new leader epochs that could not
        be staged), else a token: the flush lock is then held until finish_covered_flush(token,
        ...) is called, after the sync (which must start after this call). New leader epochs
        are staged (epoch_cache.py): `commit_covered_flush(token)` renames them into place
        after the sync, and a second sync makes that durable."""
        log = self._log
        dirty = self._dirty
        self._flush_lock.acquire()
        with log.lock:
            target = log.end_offset
            epochs = log.epoch_cache.dirty
            if log.closed or (
                target <= self._flushed and not dirty and not self._dir_dirty and not epochs
            ):  # (closed: deleted, or flushed by its owner before a clean close)
                self._flush_lock.release()
                return True
            active = log.segments[-1]
            segments = list(dirty.values())
            for seg in segments:  # (mostly the active one alone)
                if seg is not active:
                    self._flush_lock.release()
                    return False
            generation = log.generation
            dir_dirty = self._dir_dirty
            nbytes, self._unflushed_bytes = self._unflushed_bytes, 0
            dirty.clear()
            self._dir_dirty = False
        staged = None
        if epochs:
            try:
                staged = log.epoch_cache.stage()
            except OSError:  # its own flush() writes them, and reports what fails
                self._keep_dirty(segments, dir_dirty, nbytes)
                self._flush_lock.release()
                return False
        return target, generation, segments, dir_dirty, nbytes, staged

    def commit_covered_flush(self, token: CoveredToken) -> bool:
        """The second step, after the sync: rename the staged leader epochs into place. True
        when something was renamed (a second sync must then make it durable before
        finish_covered_flush); raises OSError (pass it to finish_covered_flush)."""
        staged = token[-1]
        if staged is None:
            return False
        self._log.epoch_cache.commit_staged(staged)
        return True

    def finish_covered_flush(self, token: CoveredToken, error: OSError | None) -> int:
        """The last step: the sync(s) succeeded (error None) or failed. Returns the new
        flushed offset; raises StorageError (the log dir goes offline) on `error`, or
        FileLimitError (nothing offline, what was to flush is kept for a later flush) when
        it failed for lack of a file descriptor."""
        target, generation, segments, dir_dirty, nbytes, staged = token
        log = self._log
        try:
            if error is not None:
                if staged is not None:
                    log.epoch_cache.abort_staged()
                if is_fd_limit(error):
                    self._keep_dirty(segments, dir_dirty, nbytes)
                raise log.fail(error) from error
            with log.lock:
                if generation == log.generation and target > self._flushed:
                    self._flushed = target
                self.flushed_bytes += nbytes
                self._last_flush_ms = self._clock()
                return self._flushed
        finally:
            self._flush_lock.release()

    def _keep_dirty(self, segments: list[LogSegment], dir_dirty: bool, nbytes: int) -> None:
        """What a covered flush took is flushed by a later one after all."""
        with self._log.lock:
            for seg in segments:
                self._dirty.setdefault(seg.base_offset, seg)
            self._dir_dirty = self._dir_dirty or dir_dirty
            self._unflushed_bytes += nbytes

    def flush(self) -> int:
        """fsync data and indexes of every segment written since the last flush, and the
        directory when files were created or removed. Returns the new flushed offset: the end
        offset seen when the flush started (appends racing with the fsync wait for the next
        round). Raises StorageError (and marks the log offline) when an fsync fails. A closed
        log (deleted while a flush of it was pending, or flushed by its owner before a clean
        close) has nothing to flush."""
        log = self._log
        with self._flush_lock:
            with log.lock:
                target = log.end_offset
                generation = log.generation
                epochs = log.epoch_cache.dirty
                if log.closed or (
                    target <= self._flushed
                    and not self._dirty
                    and not self._dir_dirty
                    and not epochs
                ):
                    return self._flushed
                segments = list(self._dirty.values())
                self._dirty.clear()
                nbytes, self._unflushed_bytes = self._unflushed_bytes, 0
                active = log.segments[-1]
                # No syscall under the lock on the common path (only the active segment dirty):
                # its fd is pinned, so a concurrent truncation or close defers closing it.
                # The active segment's indexes are rebuilt by recovery after a crash (recovery
                # starts at or before it), so only its data is fsynced; a rolled segment gets its
                # indexes fsynced once (the roll marks it dirty), through fresh fds.
                pinned = [seg for seg in segments if seg is active]
                fds: list[int] = []
                pinned_fds: list[int] = []
                try:
                    for seg in segments:
                        if seg is not active:
                            fds.extend(seg.sync_fds())
                    for seg in pinned:  # reopened if the cache closed it: the pages are the file's
                        pinned_fds.append(seg.pin())
                except OSError as exc:
                    for fd in fds:
                        os.close(fd)
                    for seg in pinned[: len(pinned_fds)]:
                        seg.unpin()
                    self._dirty.update((seg.base_offset, seg) for seg in segments)  # retry later
                    self._unflushed_bytes += nbytes
                    raise log.fail(exc) from exc
                dir_dirty, self._dir_dirty = self._dir_dirty, False
            try:
                for fd in pinned_fds:
                    os.fdatasync(fd)
                for fd in fds:
                    os.fdatasync(fd)
                if epochs:  # the leader epochs of the data this flush covers
                    log.epoch_cache.persist()
                elif dir_dirty:  # (persist fsyncs the directory)
                    fsync_dir(log.directory)
            except OSError as exc:
                raise log.fail(exc) from exc
            finally:
                for fd in fds:
                    os.close(fd)
                with log.lock:
                    for seg in pinned:
                        seg.unpin()
            with log.lock:
                if generation == log.generation and target > self._flushed:
                    self._flushed = target
                self.flushed_bytes += nbytes
                self._last_flush_ms = self._clock()
                return self._flushed
