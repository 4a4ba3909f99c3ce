"""Flusher: the group-commit thread of one log directory.

`request_flush(log)` marks a log as having unflushed data and wakes the thread. Each round takes
every marked log and calls `log.flush()` once: one fsync covers every batch appended to that log
since its previous flush, and appends that race with the fsync are marked again and covered by
the next round. New flushed offsets are reported through `on_flushed(topic, partition,
flushed_offset)` (whenever it differs from the
last one reported for that log), called on the flusher thread (the broker completes delayed produces from it).

A round with several logs flushes them on up to `parallelism` threads at once (the Flusher's
own pool): each log's fdatasync is a disk round trip (~1-2 ms here), and the file system
commits concurrent ones together (ext4's journal joins them into one transaction), so a round
over 500 logs takes ~60 ms instead of ~1 s one after the other (docs/storage.md). Each log is
still flushed by exactly one thread per round, and its errors stay its own. A round of at least
SYNCFS_MIN_LOGS logs (given the log dir, on Linux 5.8+) is covered by one syncfs of the log
dir's file system instead (syncfs.py): every log's target is taken first, then one sync, then
every log's flushed offset advances; a failed syncfs fails every log of the round.

The pending set holds at most one entry per log and at most `max_pending` entries; a caller that
finds it full waits (back-pressure). `stop()` drains what is pending, then joins the thread
and its pool.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from client.errors import StorageError

from .handles import FileLimitError, is_fd_limit
from .log import Log
from .syncfs import SYNCFS_MIN_LOGS, covers, open_dir, syncfs

_log = logging.getLogger(__name__)

OnFlushed = Callable[[str, int, int], None]
PARALLELISM = 16  # fdatasyncs in flight at once in one round (threads mostly wait on the disk)
RETRY_S = 0.1  # wait before flushing again a log that found no file descriptor


class Flusher:
    """Owned by whoever started it (LogManager.start_flushers or the broker); stop() it."""

    def __init__(
        self,
        name: str,
        on_flushed: OnFlushed | None = None,
        max_pending: int = 100_000,
        parallelism: int = PARALLELISM,
        directory: Path | None = None,
    ) -> None:
        """`directory`: the log dir, for a round covered by syncfs (None: never)."""
        self.name = name
        # (only where syncfs makes the data durable: not on FUSE or network file systems)
        self._directory = directory if directory is not None and covers(directory) else None
        self._dir_fd = -1  # on `directory`, for syncfs: opened on first use, closed by stop()
        self.syncfs_rounds = 0  # rounds covered by one syncfs (a statistic)
        self._parallelism = parallelism
        self._pool: ThreadPoolExecutor | None = None  # made on the first round that needs it
        self._on_flushed = on_flushed
        self._max_pending = max_pending
        self._cond = threading.Condition()
        self._pending: dict[int, Log] = {}
        # last offset reported per log, so a flush done elsewhere (e.g. a direct Log.flush())
        # is still reported by the next round; weak keys: deleted logs drop out
        self._reported: weakref.WeakKeyDictionary[Log, int] = weakref.WeakKeyDictionary()
        self._stopping = False
        self._busy = False
        self.rounds = 0  # flush rounds run (a statistic for benchmarks and tests)
        self.fsynced_logs = 0
        self._thread = threading.Thread(target=self._run, name=f"flusher-{name}", daemon=True)

    def start(self) -> Flusher:
        self._thread.start()
        return self

    def request_flush(self, log: Log) -> None:
        """Ask for `log` to be fsynced soon. Any thread; waits only if the pending set is full."""
        with self._cond:
            if self._stopping:
                raise StorageError(f"flusher {self.name} is stopped")
            key = id(log)
            if key in self._pending:
                return  # already marked: the thread has been woken for it
            while len(self._pending) >= self._max_pending:
                self._cond.wait()
                if self._stopping:
                    raise StorageError(f"flusher {self.name} is stopped")
                if key in self._pending:
                    return
            self._pending[key] = log
            self._cond.notify_all()

    def idle(self) -> bool:
        """True when nothing is pending or being flushed."""
        with self._cond:
            return not self._pending and not self._busy

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopping:
                    self._cond.wait()
                if not self._pending:
                    return
                batch, self._pending = self._pending, {}
                self._busy = True
                self._cond.notify_all()
            retry: list[Log] = []
            try:
                logs = list(batch.values())
                if self._directory is not None and syncfs and len(logs) >= SYNCFS_MIN_LOGS:
                    logs = self._covered_round(logs)
                if not logs:
                    outcomes = []
                elif len(logs) == 1 or self._parallelism <= 1:
                    outcomes = [self._flush_one(log) for log in logs]
                else:
                    if self._pool is None:
                        self._pool = ThreadPoolExecutor(
                            self._parallelism, thread_name_prefix=f"flusher-{self.name}"
                        )
                    outcomes = list(self._pool.map(self._flush_one, logs))
                retry = [log for log, ok in zip(logs, outcomes, strict=True) if ok is None]
            finally:
                with self._cond:
                    self._busy = False
                    self.rounds += 1
                    self.fsynced_logs += sum(1 for log in batch.values() if log not in retry)
                    if retry and not self._stopping:  # out of descriptors: again shortly
                        self._cond.wait(RETRY_S)
                        for log in retry:
                            self._pending.setdefault(id(log), log)

    def _covered_round(self, logs: list[Log]) -> list[Log]:
        """Flush `logs` with one syncfs; returns those that need a flush of their own."""
        assert self._directory is not None and syncfs is not None
        own: list[Log] = []
        tokens: list[tuple[Log, tuple]] = []
        error: OSError | None = None
        try:
            if self._dir_fd < 0:
                try:
                    self._dir_fd = open_dir(self._directory)
                except OSError as exc:
                    if not is_fd_limit(exc):
                        raise
                    return logs  # no descriptor for the sync: each log flushes on its own
            for log in logs:
                token = log.prepare_covered_flush()
                if token is False:
                    own.append(log)
                elif token is not True:
                    assert isinstance(token, tuple)
                    tokens.append((log, token))
            if tokens:
                try:
                    syncfs(self._dir_fd)
                except OSError as exc:
                    error = exc
                self.syncfs_rounds += 1
        finally:  # every prepared log gets its flush lock back, whatever happened
            results = []
            for log, token in tokens:
                try:
                    results.append((log, log.finish_covered_flush(token, error)))
                except FileLimitError:
                    own.append(log)  # (kept dirty) flushed on its own, which retries
                except StorageError as exc:
                    _log.error(
                        "[%s-%d] flush failed, log directory offline: %s",
                        log.topic,
                        log.partition,
                        exc,
                    )
        for log, after in results:
            self._report(log, after)
        return own

    def _report(self, log: Log, after: int) -> None:
        with self._cond:
            if after == self._reported.get(log, -1):
                return
            self._reported[log] = after
        if self._on_flushed is not None:
            try:
                self._on_flushed(log.topic, log.partition, after)
            except Exception:
                _log.exception("on_flushed(%s, %d, %d) raised", log.topic, log.partition, after)

    def _flush_one(self, log: Log) -> bool | None:
        """Flush one log and report its new flushed offset. True when flushed, False when it
        failed for good (its log dir is offline), None to try again (out of descriptors)."""
        try:
            after = log.flush()
        except FileLimitError as exc:
            _log.warning("[%s-%d] flush postponed: %s", log.topic, log.partition, exc)
            return None
        except StorageError as exc:
            _log.error(
                "[%s-%d] flush failed, log directory offline: %s", log.topic, log.partition, exc
            )
            return False
        self._report(log, after)
        return True

    def stop(self) -> None:
        """Flush what is pending, then stop and join the thread. Idempotent."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self._dir_fd >= 0:
            os.close(self._dir_fd)
            self._dir_fd = -1
