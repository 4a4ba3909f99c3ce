"""Purgatory: delayed operations watched by key (Kafka's DelayedOperationPurgatory).

An operation that cannot complete at once is watched under one or more keys (usually
topic-partitions) and scheduled on the timer. Whoever changes the state a key stands for (the
high watermark moved, bytes arrived) calls `check_and_complete(key)`, which retries the watched
operations of that key. An operation ends exactly once: by its condition, by `force_complete()`,
or by its deadline (the timer's reaper thread).

Completed operations linger in the watcher lists of keys that were not checked since; when the
estimated number of such entries passes `purge_interval`, the next call purges every list.

Threads: every method may be called from any thread. A single lock guards the key map and
is held only for list edits; try_complete/on_complete always run outside it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable, Iterable

from broker.purgatory.delayed import DelayedOperation
from broker.purgatory.timer import SystemTimer

log = logging.getLogger(__name__)


class Purgatory:
    """Watch keys → delayed operations. `timer=None` makes (and later shuts down) its own timer."""

    def __init__(
        self, name: str, timer: SystemTimer | None = None, purge_interval: int = 1000
    ) -> None:
        self.name = name
        self._owns_timer = timer is None
        self.timer = timer if timer is not None else SystemTimer(name)
        self.purge_interval = purge_interval
        self._lock = threading.Lock()
        self._watchers: dict[Hashable, dict[DelayedOperation, None]] = {}
        self._completed_in_watch = 0  # estimate of completed entries still in watcher lists
        self._shutdown = False

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete `op` now if its condition holds, else watch it under `keys` and start its timer.

        Returns True when `op` completed during this call (by this or another thread).
        """
        keys = list(keys)
        if not keys:
            raise ValueError("an operation must be watched under at least one key")
        if op.safe_try_complete():
            return True
        with self._lock:
            if self._shutdown:
                raise RuntimeError(f"purgatory {self.name} is shut down")
            for key in keys:
                self._watchers.setdefault(key, {})[op] = None
            op._watched_in.append((self, len(keys)))
        if op.is_completed:
            return True  # completed by another thread meanwhile; a later purge drops the entries
        # The state may have changed between the first try and the watch: try again.
        if op.safe_try_complete():
            return True
        self.timer.add(op)
        self._maybe_purge()
        return op.is_completed

    def check_and_complete(self, key: Hashable) -> int:
        """Retry the operations watched under `key`; returns how many this call completed."""
        return self.check_and_complete_many([key])

    def check_and_complete_many(self, keys: list[Hashable]) -> int:
        """`check_and_complete` for many keys at once: every operation watched under any of
        them is retried once (not once per key); returns how many this call completed."""
        with self._lock:
            found: dict[DelayedOperation, None] = {}
            watched: list[Hashable] = []  # the keys with watchers (of many, often a few)
            get = self._watchers.get
            for key in keys:
                watchers = get(key)
                if watchers:
                    found.update(watchers)
                    watched.append(key)
        if not found:
            return 0
        completed = 0
        for op in found:
            if op.is_completed:
                continue
            try:
                if op.safe_try_complete():
                    completed += 1
            except Exception:
                # one broken operation must not stop the others on these keys from completing
                log.exception("purgatory %s: try_complete of %r failed", self.name, op)
        with self._lock:
            for key in watched:  # (a key watched since the first look is cleaned up later)
                watchers = self._watchers.get(key)
                if watchers is None:
                    continue
                done = [op for op in watchers if op.is_completed]
                for op in done:
                    del watchers[op]
                self._completed_in_watch = max(0, self._completed_in_watch - len(done))
                if not watchers:
                    del self._watchers[key]
        self._maybe_purge()
        return completed

    def cancel_for_key(self, key: Hashable) -> list[DelayedOperation]:
        """Stop watching `key` and return its pending operations (not completed; caller decides)."""
        with self._lock:
            watchers = self._watchers.pop(key, {})
        return [op for op in watchers if not op.is_completed]

    def watched(self) -> int:
        """Watcher entries (an operation watched under 3 keys counts 3), completed ones included
        until purged."""
        with self._lock:
            return sum(len(w) for w in self._watchers.values())

    def delayed(self) -> int:
        """Operations waiting on the timer (all purgatories sharing the timer)."""
        return self.timer.size

    def note_completed(self, keys: int) -> None:
        """An operation watched here under `keys` keys completed (called by DelayedOperation)."""
        with self._lock:
            self._completed_in_watch += keys

    def purge_completed(self) -> int:
        """Drop every completed operation from every watcher list; returns how many entries."""
        removed = 0
        with self._lock:
            for key in list(self._watchers):
                watchers = self._watchers[key]
                done = [op for op in watchers if op.is_completed]
                for op in done:
                    del watchers[op]
                removed += len(done)
                if not watchers:
                    del self._watchers[key]
            self._completed_in_watch = 0
        if removed:
            log.debug("purgatory %s: purged %d completed entries", self.name, removed)
        return removed

    def _maybe_purge(self) -> None:
        if self._completed_in_watch > self.purge_interval:
            self.purge_completed()

    def shutdown(self) -> None:
        """Stop accepting operations, forget the watchers, stop the timer if this purgatory owns it.
        Pending operations are not completed."""
        with self._lock:
            self._shutdown = True
            self._watchers.clear()
        if self._owns_timer:
            self.timer.shutdown()
