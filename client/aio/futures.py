"""`DeliveryFuture`: a concurrent.futures.Future for per-record delivery, cheap to create.

`concurrent.futures.Future()` builds a Condition (and its RLock) per instance: ~5 us, more than
the rest of a send(). A DeliveryFuture is a real `concurrent.futures.Future` subclass (isinstance
works, and `concurrent.futures.wait`/`as_completed` work through a Condition made on demand) that
creates nothing until someone blocks on it. It starts RUNNING: a queued record cannot be
cancelled. The loop thread resolves it; any thread may wait on it or add callbacks.

The cyclic GC does not track a DeliveryFuture while it runs, callbacks and all (when the C
extension client.records._speedups is built). A send() loop makes one per record and keeps it
for a round trip; tracked, each young collection scanned it and promoted it towards the old
generation, ~0.3 us a record (a third of what a callback per record cost). That is safe
because a running future cannot be garbage: the producer that made it holds it (its batch, in
the accumulator's `incomplete`, until the batch is finished), and finishing a future drops its
callbacks. A producer closed fails what it could not deliver; one garbage-collected without
close() does the same when its loop stops (client.sync, `Producer._abandon`). So a callback
that leads back to its future (a closure over it) forms a cycle only while the future is
reachable anyway. A future that waits (a Condition for concurrent.futures.wait) or holds an
exception or a result that may refer back to it is tracked again (`_may_cycle`).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable
from concurrent.futures._base import FINISHED, RUNNING
from typing import Any

from client.aio.accumulator import Entry
from client.aio.types import RecordMetadata, TopicPartition
from client.records.extensions import optional_extension

log = logging.getLogger(__name__)

_speedups = optional_extension("client.records._speedups")
_gc_untrack: Any = getattr(_speedups, "gc_untrack", None)
_gc_track: Any = getattr(_speedups, "gc_track", None)
# the C fast paths of add_done_callback and of ack_delivery_futures (client/records/_append.c;
# each answers "not here" for anything but the common case, which then runs below)
_append = optional_extension("client.records._append")
_add_callback: Callable[[DeliveryFuture, object, object, str], bool] | None = getattr(
    _append, "add_callback", None
)
_ack: Callable[..., list[object] | None] | None = getattr(_append, "ack", None)
_bind_future: Callable[..., tuple[object, object, object]] | None = getattr(
    _append, "bind_future", None
)
_notify_all_c: Callable[[list[object]], None] | None = getattr(_append, "notify_all", None)

_LOCK = threading.Lock()  # guards lazy waiter objects and callback lists of every future


class DeliveryFuture(concurrent.futures.Future[RecordMetadata]):
    # Slots: no per-instance __dict__, and no lists until they are needed, so a future is one
    # GC-tracked object (was three: the object, `_waiters`, `_done_callbacks`); a benchmark or
    # application that keeps tens of thousands of futures pays less in every full collection.
    __slots__ = (
        "_state",
        "_result",
        "_exception",
        "_waiters",
        "_done_callbacks",
        "_event",
        "_cond",
        "_tp",
        "_offset",
        "_timestamp",
    )

    def __init__(self) -> None:  # no super().__init__: no Condition until someone waits
        self._state = RUNNING
        self._result: Any = None
        self._exception: BaseException | None = None
        self._waiters: Any = ()  # a list once `_condition` exists (wait()/as_completed())
        self._done_callbacks: Any = None  # None, one callable, or a list of them
        self._event: threading.Event | None = None
        self._cond: threading.Condition | None = None
        self._tp: TopicPartition | None = None  # set_acked: the result, made when asked for
        self._offset = -1
        self._timestamp = -1
        if _gc_untrack is not None and type(self) is DeliveryFuture:
            # out of the cyclic GC while it runs (the module's docstring says why it is safe);
            # put back by _may_cycle() before it holds an exception, a result or a
            # concurrent.futures waiter
            _gc_untrack(self)

    def _may_cycle(self) -> None:
        """The future is about to hold an object that may refer back to it: the GC tracks it
        again (a no-op when it is tracked)."""
        if _gc_track is not None:
            _gc_track(self)

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        # Used by concurrent.futures.wait()/as_completed() only; they append to `_waiters`
        # while holding it.
        with _LOCK:
            if self._cond is None:
                self._may_cycle()  # (the waiters hold the futures they wait for)
                self._waiters = []
                self._cond = threading.Condition()
            return self._cond

    def cancel(self) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return self._state == RUNNING

    def done(self) -> bool:
        return self._state == FINISHED

    def set_running_or_notify_cancel(self) -> bool:
        return True

    def _wait(self, timeout: float | None) -> None:
        if self._state == FINISHED:
            return
        with _LOCK:
            if self._event is None:
                self._event = threading.Event()
            ev = self._event
        if self._state != FINISHED and not ev.wait(timeout):
            raise TimeoutError(f"record not acknowledged within {timeout} s")

    def result(self, timeout: float | None = None) -> Any:
        if self._state != FINISHED:
            self._wait(timeout)
        if self._exception is not None:
            raise self._exception
        result = self._result
        tp = self._tp
        if result is None and tp is not None:
            result = self._result = RecordMetadata(
                tp.topic, tp.partition, self._offset, self._timestamp
            )
        return result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state != FINISHED:  # (a callback's usual first call: no _wait() then)
            self._wait(timeout)
        return self._exception

    def add_done_callback(self, fn: Any) -> None:
        if _add_callback is not None and _add_callback(self, fn, _LOCK, RUNNING):
            return  # (the first callback of a running future, stored in C)
        with _LOCK:
            if self._state != FINISHED:  # (stays untracked: see the module's docstring)
                cbs = self._done_callbacks
                if cbs is None:
                    self._done_callbacks = fn
                elif type(cbs) is list:
                    cbs.append(fn)
                else:
                    self._done_callbacks = [cbs, fn]
                return
        self._call(fn)

    def _call(self, fn: Any) -> None:
        try:
            fn(self)
        except Exception:  # as concurrent.futures does: a failing callback is logged, not raised
            log.exception("exception calling callback for %r", self)

    def set_result(self, result: Any) -> None:
        self._finish(result, None)

    def set_acked(self, tp: TopicPartition, offset: int, timestamp: int) -> None:
        """Resolve to RecordMetadata(tp.topic, tp.partition, offset, timestamp), made when
        result() first asks for it: an application that keeps many futures and never reads
        their results keeps one object per record for the cyclic GC to walk, not two (the
        producer resolves tens of thousands a second; full collections walk them all)."""
        self._tp = tp
        self._offset = offset
        self._timestamp = timestamp
        self._finish(None, None)

    def set_exception(self, exception: BaseException | None) -> None:
        self._finish(None, exception)

    def _notify(self, ev: Any, cond: Any, exception: BaseException | None) -> None:
        """Wake the threads blocked in result()/exception() and concurrent.futures.wait():
        `ev` and `cond` as they were when the future finished, read under the lock (a
        Condition made later belongs to a wait() that saw the future done already). Called
        without the lock."""
        if ev is not None:
            ev.set()
        if cond is not None:
            with cond:
                for waiter in self._waiters:
                    if exception is None:
                        waiter.add_result(self)
                    else:
                        waiter.add_exception(self)
                cond.notify_all()

    def _finish(self, result: Any, exception: BaseException | None) -> None:
        if result is not None or exception is not None:
            self._may_cycle()  # (an exception's traceback may reach this future)
        with _LOCK:
            if self._state == FINISHED:
                raise concurrent.futures.InvalidStateError("delivery future already finished")
            self._result = result
            self._exception = exception
            self._state = FINISHED
            callbacks = self._done_callbacks
            if callbacks is not None:
                self._done_callbacks = None
            ev = self._event
            cond = self._cond
        self._notify(ev, cond, exception)
        if type(callbacks) is list:
            for fn in callbacks:
                self._call(fn)
        elif callbacks is not None:
            self._call(callbacks)


def ack_delivery_futures(
    futures: list[Any], tp: TopicPartition, base_offset: int, append_time: int, entries: list[Entry]
) -> list[Any]:
    """Resolve the DeliveryFutures of one acknowledged batch in bulk: `futures` is the batch's
    flat [index, future, index, future, ...] list, record `index` is at `base_offset + index`
    (-1 when the offset is unknown) with timestamp `append_time` (the broker's, LogAppendTime)
    or else its own (`entries[index][3]`). One acquisition of
    the shared lock for the whole batch instead of one per record; a future nobody waits on
    and with no callback is finished by setting its fields. Futures of any other type are
    returned, (index, future) flat, for the caller to resolve; so are none already finished.
    Waiters are woken and callbacks run after the lock is released, in batch order."""
    if _ack is not None:
        done = _ack(futures, DeliveryFuture, FINISHED, tp, base_offset, append_time, entries, _LOCK)
        if done is not None:  # (None: _LOCK was held or another type is present)
            _notify_all(done)
            return []
    others: list[Any] = []
    notify: list[Any] = []  # future, its Event, its Condition, its callbacks, ...
    it = iter(futures)
    with _LOCK:
        for idx, fut in zip(it, it, strict=True):
            if type(fut) is not DeliveryFuture:
                others.append(idx)
                others.append(fut)
                continue
            if fut._state == FINISHED:
                continue
            fut._tp = tp
            fut._offset = base_offset + idx if base_offset >= 0 else -1
            fut._timestamp = append_time if append_time != -1 else entries[idx][3]
            fut._state = FINISHED
            cbs = fut._done_callbacks
            ev = fut._event
            cond = fut._cond
            if cbs is not None or ev is not None or cond is not None:
                fut._done_callbacks = None
                notify += (fut, ev, cond, cbs)
    _notify_all(notify)
    return others


def _notify_all(notify: list[object]) -> None:
    """Wake the waiters and run the callbacks of finished futures, in order: `notify` is
    [future, its Event, its Condition, its callbacks, ...] as they were when it finished.
    (The C notify_all does the same when the extension is built.)"""
    if _notify_all_c is not None:
        _notify_all_c(notify)
        return
    it = iter(notify)
    fut: DeliveryFuture
    for fut, ev, cond, cbs in zip(it, it, it, it, strict=True):  # type: ignore[assignment]
        if ev is not None or cond is not None:
            fut._notify(ev, cond, None)
        if type(cbs) is list:
            for fn in cbs:
                fut._call(fn)
        elif cbs is not None:
            try:  # (fut._call inlined: one callback per record is the common case)
                cbs(fut)  # type: ignore[operator]
            except Exception:
                log.exception("exception calling callback for %r", fut)


# What client.records._append's append_plain copies into each future it makes (no __init__
# run per record). Never handed out, never finished.
FUTURE_PROTOTYPE = DeliveryFuture()


def _callback_failed(fut: DeliveryFuture, exc: BaseException) -> None:
    """A callback run by the C notify_all raised `exc`: logged, as DeliveryFuture._call does."""
    log.error("exception calling callback for %r", fut, exc_info=exc)


# add_done_callback(), exception() and result() as method descriptors of C functions
# (client/records/_append.c, bind_future): the common case (the first callback of a running
# future; a finished future's exception or result) runs with no Python frame; every other
# case calls the Python method defined above, kept as the fallback. A callback per record
# then costs the caller ~0.1 us instead of ~0.4 us, and a callback's f.exception() no frame.
if _bind_future is not None:
    _methods = _bind_future(
        DeliveryFuture,
        _LOCK,
        RUNNING,
        FINISHED,
        RecordMetadata,
        _callback_failed,
        DeliveryFuture.add_done_callback,
        DeliveryFuture.exception,
        DeliveryFuture.result,
    )
    for _name, _method in zip(("add_done_callback", "exception", "result"), _methods, strict=True):
        setattr(DeliveryFuture, _name, _method)
