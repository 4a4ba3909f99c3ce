"""The background event loop of the synchronous clients (client/sync.py): one loop thread per
client object, and the base class that starts it, runs the asyncio core's coroutines on it and
stops it on close() or garbage collection.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, Self, TypeVar

from client.errors import ClientClosedError

log = logging.getLogger(__name__)

T = TypeVar("T")

try:
    import uvloop

    _new_loop: Any = uvloop.new_event_loop
except ImportError:  # pragma: no cover - uvloop is a dependency; plain asyncio works too
    _new_loop = asyncio.new_event_loop


class LoopThread:
    """One event loop running in a daemon thread until stop()."""

    def __init__(self, name: str) -> None:
        self.loop = _new_loop()
        # called on the loop thread once the loop has stopped and its tasks are cancelled
        self.at_stop: list[Callable[[], None]] = []
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        try:
            self.loop.run_forever()
            self._cancel_leftovers()
            for fn in self.at_stop:
                try:
                    fn()
                except Exception:
                    log.exception("error stopping the client's loop")
        finally:
            self.loop.close()

    def _cancel_leftovers(self) -> None:
        """Tasks still on the loop when it stops (a client garbage-collected or left at exit
        without close(); close() itself leaves none) are cancelled and awaited, as
        asyncio.run() does, instead of being destroyed pending."""
        tasks = asyncio.all_tasks(self.loop)
        if not tasks:
            return
        log.debug("cancelling %d task(s) left on the client's loop", len(tasks))
        for t in tasks:
            t.cancel()
        self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if threading.get_ident() == self.thread.ident:
            coro.close()
            raise RuntimeError("blocking client call from its own loop thread (use client.aio)")
        if not self.thread.is_alive():
            coro.close()
            raise ClientClosedError("client is closed")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise

    def stop(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            if threading.get_ident() != self.thread.ident:
                self.thread.join(timeout=10)


def _stop_loop(lt: LoopThread) -> None:
    lt.stop()


class SyncClient:
    _core_cls: type
    _role = "client"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._lt = LoopThread(f"gregor-{self._role}")
        self._finalizer = weakref.finalize(self, _stop_loop, self._lt)
        try:
            self._core = self._lt.run(self._make(args, kwargs))
        except BaseException:
            self._finalizer()
            raise
        self._closed = False

    async def _make(self, args: tuple[object, ...], kwargs: dict[str, object]) -> Any:
        return self._core_cls(*args, **kwargs)

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return self._lt.run(coro, timeout)

    @property
    def config(self) -> Any:
        return self._core.config

    def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._run(self._core.close(timeout) if self._role == "producer" else self._core.close())
        finally:
            self._finalizer()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
