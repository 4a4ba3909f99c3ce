"""The request channel: one bounded, thread-safe queue between network threads and I/O threads.

    network threads --try_send--> [ queue, at most queued.max.requests ] --receive--> I/O threads

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


class RequestChannel:
    def __init__(self, max_queued: int) -> None:
        if max_queued < 1:
            raise ValueError(f"queued.max.requests must be >= 1, got {max_queued}")
        self.max_queued = max_queued
        self._queue: deque[Any] = deque()
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._not_full = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
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
            if len(self._queue) >= self.max_queued:
                return False
            self._enqueue(request)
            return True

    def send(self, request: Any, timeout: float | None = None) -> bool:
        """Blocking variant for threads that may wait (never an event loop). False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while len(self._queue) >= self.max_queued and not self._closed:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._not_full.wait(remaining)
            if self._closed:
                raise RuntimeError("request channel is closed")
            self._enqueue(request)
            return True

    def _enqueue(self, request: Any) -> None:
        self._queue.append(request)
        if len(self._queue) > self.high_water:
            self.high_water = len(self._queue)
        self._not_empty.notify()

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
        with self._lock:
            if not self._queue and not self._closed:
                self._not_empty.wait(timeout)
            if self._closed or not self._queue:
                return None
            request = self._queue.popleft()
            self._not_full.notify()
            waiters, self._space_waiters = self._space_waiters, []
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
            self._not_empty.notify_all()
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
    def in_flight(self) -> int:
        return self._in_flight
