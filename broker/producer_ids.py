"""ProducerIdManager: the producer ids a broker hands out (InitProducerId) come from blocks the
controller allocates through the metadata log (AllocateProducerIds), so no id is given twice
in the cluster, across restarts and controller changes. A block is asked for when the current
one is used up; callers waiting meanwhile get their id when it arrives. Any thread."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Protocol

from client.errors import error_for_code
from controller.results import ProducerIdsResult

_log = logging.getLogger(__name__)


class ProducerIdSource(Protocol):
    """The one call of the ControllerChannel (controller/channel.py) this manager makes."""

    def allocate_producer_ids(
        self, broker_id: int, broker_epoch: int
    ) -> Future[ProducerIdsResult]: ...


class ProducerIdManager:
    def __init__(
        self, channel: ProducerIdSource, broker_id: int, broker_epoch: Callable[[], int]
    ) -> None:
        self._channel = channel
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._lock = threading.Lock()
        self._next = 0
        self._end = 0
        self._waiters: list[Future[int]] = []
        self._asking = False

    def next_id(self) -> Future[int]:
        """A Future of a new producer id (or the controller's error)."""
        fut: Future[int] = Future()
        with self._lock:
            if self._next < self._end:
                fut.set_result(self._next)
                self._next += 1
                return fut
            self._waiters.append(fut)
            if self._asking:
                return fut
            self._asking = True
        try:
            ask = self._channel.allocate_producer_ids(self._broker_id, self._broker_epoch())
        except Exception as exc:  # (the channel refused at once, e.g. closed)
            self._got(None, exc)
        else:
            ask.add_done_callback(lambda f: self._got(f, None))
        return fut

    def _got(self, f: Future[ProducerIdsResult] | None, exc: BaseException | None) -> None:
        resp: ProducerIdsResult | None = None
        if exc is None and f is not None:
            exc = f.exception()
            if exc is None:
                resp = f.result()
                if resp.get("error_code", 0):
                    exc = error_for_code(resp["error_code"])("AllocateProducerIds")
        with self._lock:
            self._asking = False
            waiters, self._waiters = self._waiters, []
            if exc is None and resp is not None:
                self._next = int(resp["producer_id_start"])
                self._end = self._next + int(resp["producer_id_len"])
                _log.info("producer ids %d..%d allocated", self._next, self._end - 1)
            served: list[tuple[Future[int], int | None]] = []
            for w in waiters:
                if exc is None and self._next < self._end:
                    served.append((w, self._next))
                    self._next += 1
                else:
                    served.append((w, None))
        for w, pid in served:
            if pid is not None:
                w.set_result(pid)
            elif exc is not None:
                w.set_exception(exc)
            else:
                self.next_id().add_done_callback(functools.partial(_copy, dst=w))


def _copy(src: Future[int], dst: Future[int]) -> None:
    exc = src.exception()
    if exc is not None:
        dst.set_exception(exc)
    else:
        dst.set_result(src.result())
