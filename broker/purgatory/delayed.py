"""DelayedOperation: a request that waits for a condition or a deadline (Kafka's DelayedOperation).

A subclass overrides:

- `try_complete() -> bool`: check the condition; when it holds, `return self.force_complete()`.
  Called by the purgatory with the operation's lock held (`safe_try_complete`), so two threads
  never run it at once for one operation.
- `on_complete()`: build and send the response. Runs EXACTLY ONCE, on whichever thread won
  `force_complete()` (a handler thread that saw the condition, or the timer's reaper thread).
- `on_expiration()`: optional; runs after `on_complete()` when the deadline won the race.
  `self.expired` is already True when on_complete runs in that case, so the response can say so.

`force_complete()` may be called from any thread, any number of times: one caller gets True
and runs `on_complete()`; the rest get False. It also cancels the timer entry and tells the
purgatories watching the operation that they hold one more completed entry (for purging).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.purgatory.purgatory import Purgatory
    from broker.purgatory.timer import SystemTimer
    from broker.purgatory.timing_wheel import TimerTaskEntry

log = logging.getLogger(__name__)


class DelayedOperation:
    """Base class; see the module docstring. Thread-safe."""

    def __init__(self, delay_ms: int) -> None:
        if delay_ms < 0:
            raise ValueError(f"delay_ms must be >= 0, got {delay_ms}")
        self.delay_ms = int(delay_ms)
        self.expired = False
        self._completed = False
        self._state_lock = threading.Lock()  # guards _completed / expired (the compare-and-set)
        self._lock = threading.Lock()  # serialises try_complete (safe_try_complete)
        # Set by SystemTimer.add under the timer lock; read by force_complete to cancel.
        self._timer: SystemTimer | None = None
        self._timer_entry: TimerTaskEntry | None = None
        # (purgatory, number of keys) for every purgatory watching this operation.
        self._watched_in: list[tuple[Purgatory, int]] = []

    # -- to override ---------------------------------------------------------------------------
    def try_complete(self) -> bool:
        raise NotImplementedError

    def on_complete(self) -> None:
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Called after on_complete() when the operation timed out. Default: nothing."""

    # -- completion ----------------------------------------------------------------------------
    @property
    def is_completed(self) -> bool:
        return self._completed

    def force_complete(self) -> bool:
        """Complete now unless already completed. True for the one caller that completed it."""
        return self._complete(expired=False)

    def safe_try_complete(self) -> bool:
        """`try_complete()` under the operation's lock; False at once if already completed."""
        with self._lock:
            if self._completed:
                return False
            return bool(self.try_complete())

    def run_expiration(self) -> None:
        """The timer's deadline fired (reaper thread): complete as expired, then on_expiration."""
        if self._complete(expired=True):
            self.on_expiration()

    def _complete(self, expired: bool) -> bool:
        with self._state_lock:
            if self._completed:
                return False
            self._completed = True
            self.expired = expired
        timer = self._timer
        if timer is not None and not expired:
            timer.cancel(self)
        for purgatory, keys in self._watched_in:
            purgatory.note_completed(keys)
        self.on_complete()
        return True

    def __repr__(self) -> str:
        state = "completed" if self._completed else "pending"
        return f"<{type(self).__name__} delay_ms={self.delay_ms} {state}>"

    # Identity semantics: operations are used as dict keys in watcher lists.
    __hash__ = object.__hash__

    def __eq__(self, other: Any) -> bool:
        return self is other
