"""SystemTimer: a hierarchical timing wheel driven by one reaper thread (Kafka's SystemTimer).

`add(op)` schedules `op.run_expiration()` at now + `op.delay_ms`. The wheels hold the tasks; a
heap (the delay queue) holds the *buckets* that have tasks, ordered by bucket expiration, so
the reaper wakes once per non-empty tick rather than once per task. When the reaper wakes, it
advances the wheels to the bucket's expiration and re-inserts the bucket's entries: each either
drops into a finer wheel or is due. Due tasks run on the reaper thread, outside the lock.

Cancelling (an operation completed before its deadline) unlinks its entry in O(1); a bucket that
empties this way stays in the heap until its time, then flushes nothing.

Threads: `add`, `cancel`, `size` from any thread; the reaper thread runs expirations.
`shutdown()` from any thread except the reaper; pending tasks are dropped (not run).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.purgatory.timing_wheel import TimerBucket, TimerTaskEntry, TimingWheel

if TYPE_CHECKING:
    from broker.purgatory.delayed import DelayedOperation

log = logging.getLogger(__name__)


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class SystemTimer:
    """Timing wheel + delay queue + reaper thread. `clock()` returns monotonic milliseconds."""

    def __init__(
        self,
        name: str,
        tick_ms: int = 1,
        wheel_size: int = 20,
        clock: Callable[[], int] = monotonic_ms,
    ) -> None:
        self.name = name
        self._clock = clock
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[int, int, TimerBucket]] = []
        self._seq = itertools.count()
        self._wheel = TimingWheel(tick_ms, wheel_size, clock(), self._enqueue_bucket)
        self._due: list[TimerTaskEntry] = []  # added already expired; run by the reaper
        self._size = 0
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=f"timer-reaper-{name}", daemon=True)
        self._thread.start()

    # -- any thread ----------------------------------------------------------------------------
    def add(self, op: DelayedOperation) -> None:
        """Schedule `op.run_expiration()` after `op.delay_ms`. No-op if op is already completed."""
        entry = TimerTaskEntry(op, self._clock() + op.delay_ms)
        with self._cond:
            if self._stopped:
                raise RuntimeError(f"timer {self.name} is shut down")
            op._timer = self
            op._timer_entry = entry
            # Checked after linking: force_complete sets the flag before reading _timer_entry,
            # so either it sees the entry and cancels it, or we see the flag here.
            if op.is_completed:
                op._timer_entry = None
                return
            self._size += 1
            if not self._wheel.add(entry):
                self._due.append(entry)
                self._cond.notify()

    def cancel(self, op: DelayedOperation) -> None:
        """Remove `op` from the wheel (it completed before its deadline)."""
        with self._cond:
            entry = op._timer_entry
            if entry is None:
                return
            op._timer_entry = None
            if entry.bucket is not None:
                entry.remove()
                self._size -= 1
            elif entry in self._due:
                self._due.remove(entry)
                self._size -= 1

    @property
    def size(self) -> int:
        """Tasks scheduled and not yet run or cancelled."""
        return self._size

    def shutdown(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.error("timer %s: reaper did not stop within %.1fs", self.name, timeout)

    # -- under the lock ------------------------------------------------------------------------
    def _enqueue_bucket(self, bucket: TimerBucket) -> None:
        heapq.heappush(self._heap, (bucket.expiration_ms, next(self._seq), bucket))
        if self._heap[0][2] is bucket:
            self._cond.notify()  # the reaper may be sleeping towards a later deadline

    def _collect_due(self, now_ms: int) -> list[TimerTaskEntry]:
        due, self._due = self._due, []
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            expiration, _, bucket = heapq.heappop(heap)
            if bucket.expiration_ms != expiration:
                continue  # stale: the bucket was flushed and re-queued for a later round
            self._wheel.advance_clock(expiration)
            for entry in bucket.drain():
                if not self._wheel.add(entry):
                    due.append(entry)
        self._wheel.advance_clock(now_ms)
        for entry in due:
            entry.task._timer_entry = None
        self._size -= len(due)
        return due

    # -- reaper thread -------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stopped:
                        return
                    now = self._clock()
                    if self._due or (self._heap and self._heap[0][0] <= now):
                        due = self._collect_due(now)
                        break
                    wait = (self._heap[0][0] - now) / 1000.0 if self._heap else None
                    self._cond.wait(wait)
            for entry in due:
                try:
                    entry.task.run_expiration()
                except Exception:
                    log.exception("timer %s: expiring %r failed", self.name, entry.task)
