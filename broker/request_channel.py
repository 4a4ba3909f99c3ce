"""The request channel: one bounded, thread-safe queue between network threads and I/O threads.

    network threads --try_send--> [ queue, at most queued.max.requests ] --receive--> I/O threads
                          `------ or handed straight to an idle I/O thread -------^

A request is queued only while every I/O thread is busy; otherwise it goes to the I/O thread
that went idle last, waking that one thread (see the class).

Full means back-pressure, never unbounded memory: `try_send` refuses, the network thread keeps
the request (one per muted connection, so at most `max.connections` of them) and registers with
`notify_when_space`; its connections stay paused, so their sockets stop being read and TCP pushes
back on the clients. `receive` calls the registered callbacks once space frees.

The channel also counts requests *in flight*: from `request_started()` (a connection took the
request off the wire; it may still wait for room) to `request_done()` (response written,
no-response, or dropped with its connection). Graceful shutdown waits for that count to reach
zero.

Threads: every method may be called from any thread. Callbacks registered with
`notify_when_space` run on the receiving I/O thread, outside the lock; they must only hand off
(e.g. `loop.call_soon_threadsafe`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


_CLOSED = object()  # handed to idle receivers by close()


class _Receiver:
    """One receiving thread's parking place: `lock` is held while the thread waits (it blocks
    acquiring it again); a sender hands it `item` and releases it, waking that thread only."""

    __slots__ = ("lock", "item")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lock.acquire()
        self.item: object = None


class RequestChannel:
    """A request is handed straight to an idle receiver when there is one (the one that went
    idle last: it is the likeliest to be still warm), waking that thread and no other; only
    when every receiver is busy does it wait in the queue, where the next receiver to finish
    finds it without sleeping. Each receiver parks on a lock of its own (`_Receiver`), so a
    hand-off is one wake-up. (A `threading.Condition` woke the receiver into a lock its notifier
    still held, and a shared `queue.SimpleQueue` lock, once taken, is passed on to the next
    waiter: a second thread woken for nothing per request, seen with strace and in
    server_bench.py's per-request context switches.)"""

    def __init__(self, max_queued: int) -> None:
        if max_queued < 1:
            raise ValueError(f"queued.max.requests must be >= 1, got {max_queued}")
        self.max_queued = max_queued
        self._queue: deque[Any] = deque()
        self._lock = threading.Lock()
        self._not_full = threading.Condition(self._lock)  # for the blocking send() only
        self._idle = threading.Condition(self._lock)
        self._parked: list[_Receiver] = []  # receivers waiting, the last to park at the end
        self._mine = threading.local()  # each receiving thread's _Receiver
        self._space_waiters: list[Callable[[], None]] = []
        self._in_flight = 0
        self._closed = False
        self.high_water = 0  # the largest queue length seen (tests and metrics)

    # -- network side --------------------------------------------------------------------------
    def try_send(self, request: Any) -> bool:
        """Queue `request` unless the queue is full (then False: the caller keeps it)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("request channel is closed")
            if self._full():
                return False
            self._put(request)
            return True

    def send(self, request: Any, timeout: float | None = None) -> bool:
        """Blocking variant for threads that may wait (never an event loop). False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._full() and not self._closed:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._not_full.wait(remaining)
            if self._closed:
                raise RuntimeError("request channel is closed")
            self._put(request)
            return True

    def _full(self) -> bool:
        # (under _lock) no receiver waiting and the queue at its bound
        return not self._parked and len(self._queue) >= self.max_queued

    def _put(self, request: object) -> None:
        # (under _lock) to the receiver that parked last, else into the queue
        if self._parked:
            self._hand_off(request)
        else:
            self._enqueue(request)

    def _hand_off(self, request: object) -> None:
        # (under _lock) to the receiver that parked last
        receiver = self._parked.pop()
        receiver.item = request
        receiver.lock.release()

    def _enqueue(self, request: Any) -> None:
        self._queue.append(request)
        if len(self._queue) > self.high_water:
            self.high_water = len(self._queue)

    def notify_when_space(self, callback: Callable[[], None]) -> None:
        """Call `callback()` once the queue has room (at once, on this thread, if it has now)."""
        with self._lock:
            if len(self._queue) >= self.max_queued and not self._closed:
                self._space_waiters.append(callback)
                return
        callback()

    def request_started(self) -> None:
        """A connection took a request off the wire (before try_send/send)."""
        with self._lock:
            self._in_flight += 1

    def request_done(self) -> None:
        """A started request is finished (response written, no response, or dropped)."""
        with self._lock:
            self._in_flight -= 1
            assert self._in_flight >= 0, "request_done without a matching request_started"
            if self._in_flight == 0:
                self._idle.notify_all()

    # -- I/O side ------------------------------------------------------------------------------
    def receive(self, timeout: float | None = None) -> Any | None:
        """The next request, or None on timeout or once the channel is closed."""
        receiver: _Receiver | None = None
        with self._lock:
            if self._queue:
                request = self._queue.popleft()
                self._not_full.notify()
                waiters, self._space_waiters = self._space_waiters, []
            elif self._closed:
                return None
            else:
                receiver = getattr(self._mine, "receiver", None)
                if receiver is None:
                    receiver = self._mine.receiver = _Receiver()
                self._parked.append(receiver)
                waiters = []
                request = None
        if receiver is not None:
            if not receiver.lock.acquire(timeout=-1 if timeout is None else timeout):
                with self._lock:
                    if receiver in self._parked:  # nothing came
                        self._parked.remove(receiver)
                        return None
                # handed something just as the wait ended: it is released already
                receiver.lock.acquire()
            request, receiver.item = receiver.item, None
            if request is _CLOSED:
                return None
        for callback in waiters:
            try:
                callback()
            except Exception:
                log.exception("request channel: space callback failed")
        return request

    # -- lifecycle -----------------------------------------------------------------------------
    def wait_idle(self, timeout: float) -> bool:
        """Wait until no request is in flight; False if `timeout` seconds passed first."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._in_flight > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(remaining)
            return True

    def close(self) -> None:
        """Wake every receiver (they get None) and refuse further sends."""
        with self._lock:
            self._closed = True
            dropped = len(self._queue)
            self._queue.clear()
            while self._parked:
                self._hand_off(_CLOSED)
            self._not_full.notify_all()
            waiters, self._space_waiters = self._space_waiters, []
        if dropped:
            log.warning("request channel closed with %d queued requests dropped", dropped)
        for callback in waiters:
            callback()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def size(self) -> int:
        return len(self._queue)

    @property
    def idle_receivers(self) -> int:
        """Receivers waiting for a request (tests and metrics)."""
        return len(self._parked)

    @property
    def in_flight(self) -> int:
        return self._in_flight
