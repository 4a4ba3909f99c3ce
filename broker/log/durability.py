"""Durability on a Log (a mixin of broker/log/log.py's Log): the flush policy and the flush
itself (fdatasync of the segments written since the last flush, outside the log's lock).

A segment's .log descriptor may have been closed by the log dir's handle cache since it was
written (handles.py): the flush reopens it, and the fdatasync writes every dirty page of the
file, whichever descriptor wrote them. Which thread calls what: see log.py.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from client.errors import StorageError

from .checkpoint import fsync_dir
from .config import LogConfig
from .epoch_cache import LeaderEpochCache
from .handles import is_fd_limit
from .segment import LogSegment

# a covered flush in progress: (target offset, generation, segments taken, directory dirty,
# staged leader-epoch token or None)
CoveredToken = tuple[int, int, list[LogSegment], bool, int | None]


class LogDurability:
    # the Log's state this mixin works on (set by Log.__init__)
    config: LogConfig
    epoch_cache: LeaderEpochCache
    directory: Path
    _clock: Callable[[], int]
    _lock: threading.Lock
    _flush_lock: threading.Lock
    _segments: list[LogSegment]
    _dirty: dict[int, LogSegment]
    _dir_dirty: bool
    _flushed: int
    _generation: int
    _last_flush_ms: int

    def _end(self) -> int:
        raise NotImplementedError

    def _fail(self, exc: OSError) -> StorageError:
        raise NotImplementedError

    def should_flush(self) -> bool:
        """Whether unflushed data should be fsynced now under this log's flush policy."""
        unflushed = self._end() - self._flushed
        if unflushed <= 0 and not self._dirty:
            return False
        cfg = self.config
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
        self._flush_lock.acquire()
        with self._lock:
            target = self._end()
            epochs = self.epoch_cache.dirty
            if target <= self._flushed and not self._dirty and not self._dir_dirty and not epochs:
                self._flush_lock.release()
                return True
            active = self._segments[-1]
            if any(seg is not active for seg in self._dirty.values()):
                self._flush_lock.release()
                return False
            generation = self._generation
            segments = list(self._dirty.values())
            dir_dirty = self._dir_dirty
            self._dirty.clear()
            self._dir_dirty = False
        staged = None
        if epochs:
            try:
                staged = self.epoch_cache.stage()
            except OSError:  # its own flush() writes them, and reports what fails
                self._keep_dirty(segments, dir_dirty)
                self._flush_lock.release()
                return False
        return target, generation, segments, dir_dirty, staged

    def commit_covered_flush(self, token: CoveredToken) -> bool:
        """The second step, after the sync: rename the staged leader epochs into place. True
        when something was renamed (a second sync must then make it durable before
        finish_covered_flush); raises OSError (pass it to finish_covered_flush)."""
        staged = token[-1]
        if staged is None:
            return False
        self.epoch_cache.commit_staged(staged)
        return True

    def finish_covered_flush(self, token: CoveredToken, error: OSError | None) -> int:
        """The last step: the sync(s) succeeded (error None) or failed. Returns the new
        flushed offset; raises StorageError (the log dir goes offline) on `error`, or
        FileLimitError (nothing offline, what was to flush is kept for a later flush) when
        it failed for lack of a file descriptor."""
        target, generation, segments, dir_dirty, staged = token
        try:
            if error is not None:
                if staged is not None:
                    self.epoch_cache.abort_staged()
                if is_fd_limit(error):
                    self._keep_dirty(segments, dir_dirty)
                raise self._fail(error) from error
            with self._lock:
                if generation == self._generation and target > self._flushed:
                    self._flushed = target
                self._last_flush_ms = self._clock()
                return self._flushed
        finally:
            self._flush_lock.release()

    def _keep_dirty(self, segments: list[LogSegment], dir_dirty: bool) -> None:
        """What a covered flush took is flushed by a later one after all."""
        with self._lock:
            for seg in segments:
                self._dirty.setdefault(seg.base_offset, seg)
            self._dir_dirty = self._dir_dirty or dir_dirty

    def flush(self) -> int:
        """fsync data and indexes of every segment written since the last flush, and the
        directory when files were created or removed. Returns the new flushed offset: the end
        offset seen when the flush started (appends racing with the fsync wait for the next
        round). Raises StorageError (and marks the log offline) when an fsync fails."""
        with self._flush_lock:
            with self._lock:
                target = self._end()
                generation = self._generation
                epochs = self.epoch_cache.dirty
                if (
                    target <= self._flushed
                    and not self._dirty
                    and not self._dir_dirty
                    and not epochs
                ):
                    return self._flushed
                segments = list(self._dirty.values())
                self._dirty.clear()
                active = self._segments[-1]
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
                    raise self._fail(exc) from exc
                dir_dirty, self._dir_dirty = self._dir_dirty, False
            try:
                for fd in pinned_fds:
                    os.fdatasync(fd)
                for fd in fds:
                    os.fdatasync(fd)
                if epochs:  # the leader epochs of the data this flush covers
                    self.epoch_cache.persist()
                elif dir_dirty:  # (persist fsyncs the directory)
                    fsync_dir(self.directory)
            except OSError as exc:
                raise self._fail(exc) from exc
            finally:
                for fd in fds:
                    os.close(fd)
                with self._lock:
                    for seg in pinned:
                        seg.unpin()
            with self._lock:
                if generation == self._generation and target > self._flushed:
                    self._flushed = target
                self._last_flush_ms = self._clock()
                return self._flushed
