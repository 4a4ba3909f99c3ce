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
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


_CLOSED = object()  # put on the queue by close(): each receiver that takes it puts it back


class RequestChannel:
    """The queue itself is a C `queue.SimpleQueue`: a receiver blocks inside it with the GIL
    released and `put` wakes one receiver directly, so a hand-off is one wake-up. (A
    `threading.Condition` wakes the receiver into a lock its notifier still holds: a second
    sleep and wake-up per request, measured with server_bench.py's per-request context
    switches.) The bound, the counts and the space callbacks are kept under `_lock`."""

    def __init__(self, max_queued: int) -> None:
        if max_queued < 1:
            raise ValueError(f"queued.max.requests must be >= 1, got {max_queued}")
        self.max_queued = max_queued
        self._items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._queued = 0  # requests put and not yet received (under _lock)
        self._lock = threading.Lock()
        self._not_full = threading.Condition(self._lock)  # for the blocking send() only
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
            if self._queued >= self.max_queued:
                return False
            self._enqueue(request)
            return True

    def send(self, request: Any, timeout: float | None = None) -> bool:
        """Blocking variant for threads that may wait (never an event loop). False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._queued >= self.max_queued and not self._closed:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._not_full.wait(remaining)
            if self._closed:
                raise RuntimeError("request channel is closed")
            self._enqueue(request)
            return True

    def _enqueue(self, request: Any) -> None:
        # (under _lock, so that close() cannot slip in between the count and the put)
        self._queued += 1
        if self._queued > self.high_water:
            self.high_water = self._queued
        self._items.put(request)

    def notify_when_space(self, callback: Callable[[], None]) -> None:
        """Call `callback()` once the queue has room (at once, on this thread, if it has now)."""
        with self._lock:
            if self._queued >= self.max_queued and not self._closed:
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
        try:
            request = self._items.get(timeout=timeout)
        except queue.Empty:
            return None
        if request is _CLOSED:
            self._items.put(_CLOSED)  # for the next receiver
            return None
        with self._lock:
            self._queued -= 1
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
            dropped = 0
            while True:
                try:
                    item = self._items.get_nowait()
                except queue.Empty:
                    break
                if item is not _CLOSED:
                    dropped += 1
            self._queued = 0
            self._items.put(_CLOSED)
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
        return self._queued

    @property
    def in_flight(self) -> int:
        return self._in_flight
