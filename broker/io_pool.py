"""The I/O worker pool: `num.io.threads` plain threads that take requests off the channel and
call the dispatcher (broker.handlers.dispatch). Handlers run here: they validate, touch logs and
either respond or park a delayed operation in a purgatory.

Threads: `start`/`shutdown` from the server's control thread; workers are owned and joined here.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from broker.request_channel import RequestChannel

log = logging.getLogger(__name__)


class IoPool:
    def __init__(
        self,
        channel: RequestChannel,
        dispatch: Callable[[Any], None],
        num_threads: int,
        name: str = "io",
    ) -> None:
        if num_threads < 1:
            raise ValueError(f"num.io.threads must be >= 1, got {num_threads}")
        self._channel = channel
        self._dispatch = dispatch
        self._threads = [
            threading.Thread(target=self._run, args=(i,), name=f"{name}-{i}", daemon=True)
            for i in range(num_threads)
        ]
        self.handled = 0  # approximate (unlocked increments): metrics only
        # per worker, the ns spent handling requests (each written by its own thread): metrics
        self.busy_ns = [0] * num_threads

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def _run(self, index: int) -> None:
        channel = self._channel
        dispatch = self._dispatch
        busy = self.busy_ns
        clock = time.monotonic_ns
        while True:
            request = channel.receive()
            if request is None:
                if channel.closed:
                    return
                continue
            request.dequeued_ns = started = clock()
            try:
                dispatch(request)
            except BaseException:
                # dispatch translates handler errors itself; reaching here is a bug in it.
                log.exception("io worker: dispatch failed for %r", request)
                request.fail_close("internal error in dispatch")
            done = clock()
            if not request.local_done_ns:  # (else answered already: local ended then)
                request.local_done_ns = done
            busy[index] += done - started
            self.handled += 1

    def shutdown(self, timeout: float = 10.0) -> None:
        """Close the channel (workers finish the request in hand, then exit) and join them."""
        self._channel.close()
        for t in self._threads:
            if t.is_alive() and t is not threading.current_thread():
                t.join(timeout)
                if t.is_alive():
                    log.error("io worker %s did not stop within %.1fs", t.name, timeout)
