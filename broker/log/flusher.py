"""Flusher: the group-commit thread of one log directory.

`request_flush(log)` marks a log as having unflushed data and wakes the thread
(`request_flush_many(logs)`: the logs of one request, together). Each round takes
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
every log's flushed offset advances; a failed syncfs fails every log of the round. Logs with
new leader epochs (a new leader's or follower's first writes) stage their epoch checkpoint
before that sync and rename it into place after it; a second sync makes the renames durable
before any offset is reported (epoch_cache.py).

The pending set holds at most one entry per log and at most `max_pending` entries; a caller that
finds it full waits (back-pressure). `stop()` drains what is pending, then joins the thread
and its pool.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from client.errors import StorageError

from .handles import FileLimitError, is_fd_limit
from .log import Log
from .syncfs import SYNCFS_MIN_LOGS, covers, open_dir, syncfs

_log = logging.getLogger(__name__)

OnFlushed = Callable[[str, int, int], None]
# every (topic, partition, flushed offset) of one syncfs round, in one call
OnFlushedMany = Callable[[list[tuple[str, int, int]]], None]
PARALLELISM = 16  # fdatasyncs in flight at once in one round (threads mostly wait on the disk)
RETRY_S = 0.1  # wait before flushing again a log that found no file descriptor


def flush_each(logs: list[Log]) -> None:
    """Flush each of `logs` on the calling thread; a failure is logged (the log dir goes
    offline, as Log.flush does), the others are flushed all the same."""
    for log in logs:
        try:
            log.flush()
        except StorageError as exc:
            _log.error("[%s-%d] fsync failed: %s", log.topic, log.partition, exc)


def _flushed_bytes(logs: Iterable[Log]) -> int:
    """The record bytes `logs` have made durable so far (read without their locks)."""
    return sum(log.durability.flushed_bytes for log in logs)


class Flusher:
    """Owned by whoever started it (LogManager.start_flushers or the broker); stop() it."""

    def __init__(
        self,
        name: str,
        on_flushed: OnFlushed | None = None,
        max_pending: int = 100_000,
        parallelism: int = PARALLELISM,
        directory: Path | None = None,
        on_flushed_many: OnFlushedMany | None = None,
    ) -> None:
        """`directory`: the log dir, for a round covered by syncfs (None: never).
        `on_flushed_many`: if given, the logs a syncfs round made durable (all at once) are
        reported in one call instead of one `on_flushed` call each: with thousands of
        one-batch partitions per round, the broker then retries each waiting produce once per
        round, not once per partition."""
        self.name = name
        # (only where syncfs makes the data durable: not on FUSE or network file systems)
        self._directory = directory if directory is not None and covers(directory) else None
        self._dir_fd = -1  # on `directory`, for syncfs: opened on first use, closed by stop()
        self._dir_fd_lock = threading.Lock()
        self.syncfs_rounds = 0  # rounds covered by one syncfs (a statistic)
        self._parallelism = parallelism
        self._pool: ThreadPoolExecutor | None = None  # made on the first round that needs it
        self._on_flushed = on_flushed
        self._on_flushed_many = on_flushed_many
        self._max_pending = max_pending
        self._cond = threading.Condition()
        self._pending: dict[int, Log] = {}
        # the last offset reported is kept on each log (LogDurability.reported_flushed_offset), so a
        # flush done elsewhere (e.g. a direct Log.flush()) is still reported by the next round
        # (a WeakKeyDictionary here made a weak reference per log and round: ~5 % of the
        # broker's CPU in round-robin produce over 5,000 partitions)
        self._stopping = False
        self._busy = False
        self.rounds = 0  # flush rounds run (a statistic for benchmarks and tests)
        self.fsynced_logs = 0
        # metrics (broker/metrics.py): called with each round's duration in seconds and the
        # record bytes it made durable; set once before the first round
        self.on_round: Callable[[float, int], None] | None = None
        self._thread = threading.Thread(target=self._run, name=f"flusher-{name}", daemon=True)

    def start(self) -> Flusher:
        self._thread.start()
        return self

    def request_flush(self, log: Log) -> None:
        """Ask for `log` to be fsynced soon. Any thread; waits only if the pending set is full."""
        self.request_flush_many((log,))

    def request_flush_many(self, logs: Iterable[Log]) -> None:
        """`request_flush` for every log of one request, marked under one lock: they go to the
        same round (a Produce spread over a thousand partitions is one syncfs, not a stream of
        small rounds of per-file fdatasyncs that the flusher took as the appends went on)."""
        with self._cond:  # (the thread takes the set only once this lock is let go)
            for log in logs:
                key = id(log)
                while key not in self._pending and len(self._pending) >= self._max_pending:
                    if self._stopping:
                        break
                    self._cond.wait()
                if self._stopping:
                    raise StorageError(f"flusher {self.name} is stopped")
                if key not in self._pending:  # else already marked: the thread was woken for it
                    self._pending[key] = log
                    if len(self._pending) == 1:  # the thread waits only for an empty set to fill
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
            on_round = self.on_round
            # the bytes a round made durable: what the logs' flushes added (a follower's
            # flush_now of the same log at the same moment would count too: it is durable)
            before = 0 if on_round is None else _flushed_bytes(batch.values())
            started = time.monotonic()
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
                if on_round is not None:
                    elapsed = time.monotonic() - started
                    on_round(elapsed, _flushed_bytes(batch.values()) - before)
                with self._cond:
                    self._busy = False
                    self.rounds += 1
                    self.fsynced_logs += sum(1 for log in batch.values() if log not in retry)
                    if retry and not self._stopping:  # out of descriptors: again shortly
                        self._cond.wait(RETRY_S)
                        for log in retry:
                            self._pending.setdefault(id(log), log)

    def flush_now(self, logs: list[Log]) -> None:
        """Flush `logs` on the calling thread before returning, as a round would (one syncfs
        for SYNCFS_MIN_LOGS or more, else each on its own), without reporting them: a
        follower's logs, which must hold what it fetched on disk before it fetches on (one
        fdatasync per partition after each fetch took ~0.5 ms each). Any thread, beside the
        flusher's own rounds (a log's flushes are serialised by the log). Failures are logged;
        a failed sync takes the log dir offline, as in a round."""
        if self._directory is not None and syncfs is not None and len(logs) >= SYNCFS_MIN_LOGS:
            logs = self._covered_round(logs, report=False)
        flush_each(logs)

    def _covered_round(self, logs: list[Log], report: bool = True) -> list[Log]:
        """Flush `logs` with one syncfs (and a second one when some staged new leader epochs,
        `_commit_epochs`); returns those that need a flush of their own."""
        assert self._directory is not None and syncfs is not None
        own: list[Log] = []
        tokens: list[tuple[Log, tuple[Any, ...]]] = []
        error: OSError | None = None
        failed: dict[Log, OSError] = {}  # logs whose staged leader epochs could not be renamed
        try:
            with self._dir_fd_lock:  # (opened once, also when two threads sync at once)
                if self._dir_fd < 0:
                    try:
                        self._dir_fd = open_dir(self._directory)
                    except OSError as exc:
                        if not is_fd_limit(exc):
                            raise
                        return logs  # no descriptor for the sync: each log flushes on its own
            for log in logs:
                token = log.durability.prepare_covered_flush()
                if token is False:
                    own.append(log)
                elif token is not True:
                    tokens.append((log, token))
            if tokens:
                try:
                    syncfs(self._dir_fd)
                except OSError as exc:
                    error = exc
                self.syncfs_rounds += 1
                if error is None:
                    error = self._commit_epochs(tokens, failed)
        finally:  # every prepared log gets its flush lock back, whatever happened
            results = []
            for log, token in tokens:
                try:
                    after = log.durability.finish_covered_flush(
                        token, failed.get(log, error) if failed else error
                    )
                    if report:
                        results.append((log, after))
                except FileLimitError:
                    own.append(log)  # (kept dirty) flushed on its own, which retries
                except StorageError as exc:
                    _log.error(
                        "[%s-%d] flush failed, log directory offline: %s",
                        log.topic,
                        log.partition,
                        exc,
                    )
        if report:
            self._report(results)
        return own

    def _commit_epochs(
        self, tokens: list[tuple[Log, tuple[Any, ...]]], failed: dict[Log, OSError]
    ) -> OSError | None:
        """After the round's sync: rename the leader epochs the logs staged into place, then
        one more sync for those renames (only when there were any: a new leader's first
        writes), before any offset is reported. A rename that fails fails its log alone (in
        `failed`); a failed sync, every log of the round (returned)."""
        renamed = False
        for log, token in tokens:
            try:
                renamed = log.durability.commit_covered_flush(token) or renamed
            except OSError as exc:
                failed[log] = exc
        if renamed:
            assert syncfs is not None  # (a covered round runs only where syncfs exists)
            try:
                syncfs(self._dir_fd)
            except OSError as exc:
                return exc
        return None

    def _report(self, results: list[tuple[Log, int]]) -> None:
        """Report the new flushed offsets among `results` (log, offset): to `on_flushed_many`
        in one call (a syncfs round's logs together), else to `on_flushed` one by one."""
        new = []
        with self._cond:
            for log, after in results:
                durability = log.durability
                if after != durability.reported_flushed_offset:
                    durability.reported_flushed_offset = after
                    new.append((log, after))
        if not new:
            return
        if self._on_flushed_many is not None:
            try:
                self._on_flushed_many([(log.topic, log.partition, after) for log, after in new])
            except Exception:
                _log.exception("on_flushed_many(%d logs) raised", len(new))
        elif self._on_flushed is not None:
            for log, after in new:
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
        self._report([(log, after)])
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
