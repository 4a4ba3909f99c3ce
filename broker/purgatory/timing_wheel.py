"""A hierarchical timing wheel (Varghese & Lauck; the shape of Kafka's TimingWheel.java).

Pure data structure: no threads, no clock. `SystemTimer` (timer.py) drives it and owns the
lock that every call here must be made under.

A wheel has `wheel_size` buckets, each `tick_ms` wide, so it spans `interval = tick_ms *
wheel_size` ms from `current_time_ms` (always a multiple of `tick_ms`). A task whose expiration
is beyond the span goes to an overflow wheel, created on demand, whose tick is this wheel's whole
interval; that wheel may overflow in turn. So a wheel of 20 one-millisecond ticks covers 20 ms,
its parent 400 ms, the next 8 s, then 160 s, ... with O(1) insert and removal at every level.

    level 0: tick 1 ms,   [0][1][2]...[19]      spans 20 ms
    level 1: tick 20 ms,  [0][1][2]...[19]      spans 400 ms
    level 2: tick 400 ms, ...                   spans 8 s

Buckets, not tasks, go into the driver's delay queue: when a bucket receives its first task for
a new expiration, `on_new_bucket(bucket)` is called and the driver queues it by
`bucket.expiration_ms`. When the driver's clock reaches a bucket's expiration it advances the
wheels to that time and re-inserts the bucket's tasks: a task in a coarse bucket cascades down to
a finer wheel, and a task whose expiration is within one tick of the current time is due.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class TimerTaskEntry:
    """One scheduled task: the task object, its absolute expiration, and the bucket holding it."""

    __slots__ = ("task", "expiration_ms", "bucket")

    def __init__(self, task: Any, expiration_ms: int) -> None:
        self.task = task
        self.expiration_ms = expiration_ms
        self.bucket: TimerBucket | None = None

    def remove(self) -> None:
        """Unlink from the bucket (no-op when not linked). Call under the timer lock."""
        bucket = self.bucket
        if bucket is not None:
            bucket.entries.pop(self, None)
            self.bucket = None


class TimerBucket:
    """The tasks of one wheel slot; `expiration_ms` is -1 while the bucket is not queued."""

    __slots__ = ("entries", "expiration_ms")

    def __init__(self) -> None:
        self.entries: dict[TimerTaskEntry, None] = {}  # insertion-ordered set, O(1) removal
        self.expiration_ms = -1

    def add(self, entry: TimerTaskEntry) -> None:
        entry.remove()
        self.entries[entry] = None
        entry.bucket = self

    def set_expiration(self, expiration_ms: int) -> bool:
        """Set the expiration; True when it changed (the bucket must then be (re)queued)."""
        changed = self.expiration_ms != expiration_ms
        self.expiration_ms = expiration_ms
        return changed

    def drain(self) -> list[TimerTaskEntry]:
        """Take every entry out and reset the expiration (the bucket can be reused)."""
        entries = list(self.entries)
        for entry in entries:
            entry.bucket = None
        self.entries.clear()
        self.expiration_ms = -1
        return entries

    def __len__(self) -> int:
        return len(self.entries)


class TimingWheel:
    """One level of the hierarchy; the overflow wheel is created lazily. Not thread-safe."""

    __slots__ = (
        "tick_ms",
        "wheel_size",
        "interval_ms",
        "current_time_ms",
        "buckets",
        "_on_new_bucket",
        "_overflow",
    )

    def __init__(
        self,
        tick_ms: int,
        wheel_size: int,
        start_ms: int,
        on_new_bucket: Callable[[TimerBucket], None],
    ) -> None:
        if tick_ms < 1 or wheel_size < 2:
            raise ValueError(
                f"tick_ms must be >= 1 and wheel_size >= 2, got {tick_ms}, {wheel_size}"
            )
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval_ms = tick_ms * wheel_size
        self.current_time_ms = start_ms - (start_ms % tick_ms)  # rounded down to a tick
        self.buckets = [TimerBucket() for _ in range(wheel_size)]
        self._on_new_bucket = on_new_bucket
        self._overflow: TimingWheel | None = None

    def add(self, entry: TimerTaskEntry) -> bool:
        """Place `entry`; False when it is already due (the caller must run it now)."""
        expiration = entry.expiration_ms
        if expiration < self.current_time_ms + self.tick_ms:
            return False
        if expiration < self.current_time_ms + self.interval_ms:
            virtual_id = expiration // self.tick_ms
            bucket = self.buckets[virtual_id % self.wheel_size]
            bucket.add(entry)
            # Every task in the bucket shares one expiration (the start of its tick), so the
            # bucket is queued once per round of the wheel.
            if bucket.set_expiration(virtual_id * self.tick_ms):
                self._on_new_bucket(bucket)
            return True
        if self._overflow is None:
            self._overflow = TimingWheel(
                self.interval_ms, self.wheel_size, self.current_time_ms, self._on_new_bucket
            )
        return self._overflow.add(entry)

    def advance_clock(self, time_ms: int) -> None:
        """Move the wheel (and its overflow wheels) forward to `time_ms`, rounded to a tick."""
        if time_ms >= self.current_time_ms + self.tick_ms:
            self.current_time_ms = time_ms - (time_ms % self.tick_ms)
            if self._overflow is not None:
                self._overflow.advance_clock(self.current_time_ms)

    @property
    def levels(self) -> int:
        """How many wheels exist (1 + overflow wheels created so far); for tests and metrics."""
        return 1 + (self._overflow.levels if self._overflow is not None else 0)
