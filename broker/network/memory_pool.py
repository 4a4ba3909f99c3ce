"""MemoryPool: the broker-wide budget for request bytes (queued.max.request.bytes; Kafka's
KIP-72 memory pool).

What it accounts (docs/broker.md, "Memory bounds"):
- the array of every large frame being received, at its current (allocated) size: it grows
  with the bytes that arrived, never with the length the prefix claims (FrameReader);
- every request payload from the moment its frame is complete until its response is written
  (or it is dropped with its connection).

Large-frame growth must *reserve* first. A reservation is granted when it fits under the
capacity. Otherwise the requester waits in FIFO order: its connection stops reading, and the
pool grants waiters strictly in arrival order as memory is released, so no waiter is
overtaken and none waits forever while memory frees. A grant made while waiting is announced
by the waiter's callback (called on the releasing thread, outside the lock: it must only hand
off, e.g. `loop.call_soon_threadsafe`).

One exception keeps frames half received from waiting on each other forever: when every byte
reserved belongs to frames that are themselves waiting (or to the requester), nobody would
ever release any, so the first of them becomes the pool's *overcommit owner*: its reservations
are granted past the capacity until its frame is complete (`frame_done`). Only one frame owns
the overcommit at a time, and a new owner is chosen only when the previous frame's bytes are
no longer held by anyone but waiters. This also lets one frame larger than the whole pool
through when the pool is otherwise empty, as Kafka does.

Small requests (up to the 64 KiB scratch buffer of a connection) are accounted
(`force_reserve`) but never wait: their memory is bounded per connection already, and a pool
filled by large frames must not stall heartbeats, metadata or small produce requests.

Bound: `used` <= capacity + one frame (the owner's; at most socket.request.max.bytes) + the
small requests in flight (at most one per connection). `high_water` records the largest `used` seen.

Threads: every method may be called from any thread.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass
class _Waiter:
    nbytes: int
    held: int  # bytes the waiter already holds (its frame so far)
    on_grant: Callable[[], None]


class MemoryPool:
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"queued.max.request.bytes must be >= 1, got {capacity}")
        self.capacity = capacity
        self._used = 0
        self._waiters: deque[_Waiter] = deque()
        self._waiting_held = 0  # sum of held over the waiters
        self._owner: Callable[[], None] | None = None  # the frame allowed past the capacity
        self._lock = threading.Lock()
        self.high_water = 0
        self.waits = 0  # reservations that had to wait (metrics and tests)

    # -- reserving ---------------------------------------------------------------------------------
    def reserve_or_wait(self, nbytes: int, held: int, on_grant: Callable[[], None]) -> bool:
        """Reserve `nbytes` for a frame that already holds `held` bytes. True: reserved now.
        False: queued; `on_grant()` is called (any thread) once the bytes are reserved for it,
        unless `cancel(on_grant)` removed it first."""
        assert nbytes > 0 and held >= 0
        with self._lock:
            if on_grant is self._owner or (
                not self._waiters and self._grantable(nbytes, held, on_grant)
            ):
                self._add(nbytes)
                return True
            self._waiters.append(_Waiter(nbytes, held, on_grant))
            self._waiting_held += held
            self.waits += 1
            granted = self._grant_waiters()
        _announce(granted)
        return False

    def force_reserve(self, nbytes: int) -> None:
        """Account `nbytes` that are already in memory (a small request); never waits."""
        if nbytes:
            with self._lock:
                self._add(nbytes)

    def release(self, nbytes: int) -> None:
        """Give back `nbytes` reserved earlier; grants waiters that now fit, in order."""
        if not nbytes:
            return
        with self._lock:
            self._used -= nbytes
            assert self._used >= 0, f"memory pool released {nbytes} more bytes than reserved"
            granted = self._grant_waiters()
        _announce(granted)

    def frame_done(self, on_grant: Callable[[], None]) -> None:
        """The frame that reserved with `on_grant` is complete (or dropped): it no longer owns
        the overcommit, if it did. Its bytes stay reserved until released."""
        with self._lock:
            if self._owner is not on_grant:
                return
            self._owner = None
            granted = self._grant_waiters()
        _announce(granted)

    def cancel(self, on_grant: Callable[[], None]) -> bool:
        """Remove a waiter. True if it was still waiting; False if it had been granted (its
        callback has run or will run, and the bytes are reserved for it)."""
        with self._lock:
            for w in self._waiters:
                if w.on_grant is on_grant:
                    self._waiters.remove(w)
                    self._waiting_held -= w.held
                    granted = self._grant_waiters()  # it may have been blocking the others
                    break
            else:
                return False
        _announce(granted)
        return True

    # -- state ---------------------------------------------------------------------------------
    @property
    def used(self) -> int:
        return self._used

    @property
    def available(self) -> int:
        return max(0, self.capacity - self._used)

    @property
    def waiting(self) -> int:
        """Connections waiting for memory."""
        return len(self._waiters)

    # -- internals (under the lock) ---------------------------------------------------------------
    def _grantable(self, nbytes: int, held: int, on_grant: Callable[[], None]) -> bool:
        if self._used + nbytes <= self.capacity:
            return True
        if self._owner is None and self._used <= self._waiting_held + held:
            # Nothing outside the waiting frames (and this one) holds memory: nobody would
            # release any. This frame may go past the capacity until it is complete.
            self._owner = on_grant
            return True
        return False

    def _add(self, nbytes: int) -> None:
        self._used += nbytes
        if self._used > self.high_water:
            self.high_water = self._used

    def _grant_waiters(self) -> list[Callable[[], None]]:
        granted = []
        while self._waiters:
            head = self._waiters[0]
            if not self._grantable(head.nbytes, 0, head.on_grant):  # held: in _waiting_held
                break
            self._waiters.popleft()
            self._waiting_held -= head.held
            self._add(head.nbytes)
            granted.append(head.on_grant)
        return granted


def _announce(granted: list[Callable[[], None]]) -> None:
    for callback in granted:
        try:
            callback()
        except Exception:
            log.exception("memory pool: grant callback failed")
