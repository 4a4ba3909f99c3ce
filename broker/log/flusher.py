"""Flusher: the group-commit thread of one log directory.

`request_flush(log)` marks a log as having unflushed data and wakes the thread. Each round takes
every marked log and calls `log.flush()` once: one fsync covers every batch appended to that log
since its previous flush, and appends that race with the fsync are marked again and covered by
the next round. New flushed offsets are reported through `on_flushed(topic, partition,
flushed_offset)` (whenever it differs from the
last one reported for that log), called on the flusher thread (the broker completes delayed produces from it).

The pending set holds at most one entry per log and at most `max_pending` entries; a caller that
finds it full waits (back-pressure). `stop()` drains what is pending, then joins the thread.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable

from client.errors import StorageError

from .log import Log

_log = logging.getLogger(__name__)

OnFlushed = Callable[[str, int, int], None]


class Flusher:
    """Owned by whoever started it (LogManager.start_flushers or the broker); stop() it."""

    def __init__(
        self, name: str, on_flushed: OnFlushed | None = None, max_pending: int = 100_000
    ) -> None:
        self.name = name
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
            try:
                for log in batch.values():
                    self._flush_one(log)
            finally:
                with self._cond:
                    self._busy = False
                    self.rounds += 1

    def _flush_one(self, log: Log) -> None:
        try:
            after = log.flush()
        except StorageError as exc:
            _log.error(
                "[%s-%d] flush failed, log directory offline: %s", log.topic, log.partition, exc
            )
            return
        self.fsynced_logs += 1
        if after == self._reported.get(log, -1):
            return
        self._reported[log] = after
        if self._on_flushed is not None:
            try:
                self._on_flushed(log.topic, log.partition, after)
            except Exception:
                _log.exception("on_flushed(%s, %d, %d) raised", log.topic, log.partition, after)

    def stop(self) -> None:
        """Flush what is pending, then stop and join the thread. Idempotent."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join()
