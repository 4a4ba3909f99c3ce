"""ControllerThread: runs a QuorumController on its own thread and asyncio event loop.

Other threads call `submit(call)` with a callable taking the QuorumController —
`runner.submit(lambda c: c.replication.create_topics(requests))` — and get a typed
concurrent.futures.Future of what it returns. The call runs on the controller thread; the future
resolves with its result once every record it wrote is committed (`metadata_log.committed_offset() >=
controller.last_written_offset`), or with its exception (NotControllerError when this node is not
the active controller). A periodic tick runs `controller.tick()` (session expiry, preferred-leader rebalancing).

At most `max_pending` calls may be queued or waiting for commit; beyond that `submit` raises
ThrottlingQuotaExceededError at once (back-pressure, never unbounded memory).

Threading: `start()`, `stop()` and `submit()` may be called from any thread; the controller itself
is only touched on the controller thread (`self.loop`). Code that must run there (the Raft driver)
can schedule onto `self.loop`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from client.errors import ErrorCode, error_for_code
from controller.quorum.controller import QuorumController

_log = logging.getLogger(__name__)

ThrottlingQuotaExceededError = error_for_code(ErrorCode.THROTTLING_QUOTA_EXCEEDED)

T = TypeVar("T")
ControllerCall = Callable[[QuorumController], T]


class ControllerThread:
    def __init__(
        self,
        controller: QuorumController,
        tick_interval_ms: int = 100,
        max_pending: int = 10_000,
        name: str = "controller",
    ) -> None:
        self.controller = controller
        self.tick_interval_s = tick_interval_ms / 1000.0
        self.max_pending = max_pending
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._lock = threading.Lock()
        self._pending = 0  # submitted and not yet resolved
        self._waiting: list[
            tuple[int, concurrent.futures.Future[Any], Any]
        ] = []  # (offset, fut, result)
        self._started = threading.Event()
        self._stopping = False
        self._tick_handle: asyncio.Handle | None = None
        self.controller.log.add_listener(self._on_commit)

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()
        self._started.wait()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop; calls still waiting for commit fail with NotControllerError."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
        self.controller.log.remove_listener(self._on_commit)
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self._shutdown)
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise RuntimeError("controller thread did not stop")
        if not self.loop.is_closed():
            self.loop.close()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self._tick_handle = self.loop.call_soon(self._tick)
        self.loop.call_soon(self._started.set)
        self.loop.run_forever()

    def _shutdown(self) -> None:
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        err = error_for_code(ErrorCode.NOT_CONTROLLER)("controller stopped")
        for _, fut, _ in self._waiting:
            self._settle(fut, exc=err)
        self._waiting.clear()
        self.loop.stop()

    # -- calls ---------------------------------------------------------------------------------
    def submit(self, call: ControllerCall[T]) -> concurrent.futures.Future[T]:
        """Run `call(controller)` on the controller thread; the future resolves with its result
        after the records it wrote commit (or with its exception)."""
        if not callable(call):
            raise TypeError(f"ControllerThread.submit takes a callable, not {call!r}")
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._lock:
            if self._stopping:
                raise error_for_code(ErrorCode.NOT_CONTROLLER)("controller stopped")
            if self._pending >= self.max_pending:
                raise ThrottlingQuotaExceededError(f"{self._pending} controller calls pending")
            self._pending += 1
        self.loop.call_soon_threadsafe(self._call, fut, call)
        return fut

    def call(self, call: ControllerCall[T], timeout: float | None = 30.0) -> T:
        """submit() and wait for the result."""
        return self.submit(call).result(timeout)

    def _call(self, fut: concurrent.futures.Future[T], call: ControllerCall[T]) -> None:
        if not fut.set_running_or_notify_cancel():
            self._release()
            return
        try:
            result = call(self.controller)
        except Exception as e:  # handed to the caller through the future
            self._settle(fut, exc=e)
            return
        offset = self.controller.last_written_offset
        if self.controller.log.committed_offset() >= offset:
            self._settle(fut, result=result)
        else:
            self._waiting.append((offset, fut, result))

    def _settle(
        self,
        fut: concurrent.futures.Future[Any],
        result: Any = None,
        exc: BaseException | None = None,
    ) -> None:
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(result)
        self._release()

    def _release(self) -> None:
        with self._lock:
            self._pending -= 1

    def _on_commit(self, records: list[tuple[int, bytes]]) -> None:
        # Called on whichever thread committed; hop to the controller loop.
        if records and not self.loop.is_closed():
            try:
                self.loop.call_soon_threadsafe(self._complete_committed)
            except RuntimeError:  # loop closed between the check and the call
                _log.debug("commit notification after the controller loop closed")

    def _complete_committed(self) -> None:
        try:
            if self.controller.log.is_leader():
                self.controller.resume()  # room for the rest of a large non-atomic write
        except Exception:
            _log.exception("resuming the controller's unfinished writes failed")
        if not self._waiting:
            return
        committed = self.controller.log.committed_offset()
        keep = []
        for offset, fut, result in self._waiting:
            if offset <= committed:
                self._settle(fut, result=result)
            else:
                keep.append((offset, fut, result))
        self._waiting = keep

    def fail_waiting(self, exc: BaseException | None = None) -> None:
        """Fail every call still waiting for its commit (leadership lost). Loop thread only."""
        exc = exc or error_for_code(ErrorCode.NOT_CONTROLLER)("leadership lost before commit")
        waiting, self._waiting = self._waiting, []
        for _, fut, _ in waiting:
            self._settle(fut, exc=exc)

    def _tick(self) -> None:
        try:
            if self.controller.log.is_leader():
                self.controller.tick()
        except Exception:
            _log.exception("controller tick failed")
        self._tick_handle = self.loop.call_later(self.tick_interval_s, self._tick)
