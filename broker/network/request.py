"""A decoded request on its way from a network thread to an I/O thread and back.

The header (api key, version, correlation id, client id) is decoded on the network thread;
the body is the raw decoded msgpack map, schema-checked later by the dispatcher.
`complete(frame)` may be called from any thread, exactly once per request (RequestContext
enforces that); it hands the response to the owning network thread's event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.network.connection import Connection

log = logging.getLogger(__name__)


class Request:
    protocol = "GREGOR"  # the wire protocol it came in (broker.kafka's requests say KAFKA)

    __slots__ = (
        "api_key",
        "api_version",
        "correlation_id",
        "client_id",
        "body",
        "size",
        "connection",
        "received_ns",
        "dequeued_ns",
        "local_done_ns",
        "responded_ns",
        "sent_ns",
        "done",
        "direct_write",
        "answered",
        "throttle_ms",
        "quota_sent",
    )

    def __init__(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int,
        client_id: str | None,
        body: dict[str, Any],
        size: int,
        connection: Connection,
    ) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.body = body
        self.size = size
        self.connection = connection
        self.received_ns = time.monotonic_ns()
        # the request's way through the broker, for the metrics (broker/request_metrics.py):
        # set by the I/O thread, `_finish`, and a direct write; 0 until then
        self.dequeued_ns = 0
        self.local_done_ns = 0
        self.responded_ns = 0
        self.sent_ns = 0
        self.done = False
        # Set by the connection: nothing is queued on its transport, so the answering thread
        # may write a small response to the socket itself (Connection.complete_threadsafe).
        self.direct_write = False
        # Set (under the connection's lock) by the answering thread when it wrote the whole
        # answer itself and finished the request there, while the network thread kept reading:
        # that thread then unmutes when it next looks (Connection._busy), with no wake-up.
        self.answered = False
        # Client quotas (broker/quota/): after this request's answer is written the connection
        # reads nothing for `throttle_ms`; `quota_sent(ns)` gets the network thread's time
        # spent writing the answer (the request quota counts it).
        self.throttle_ms = 0
        self.quota_sent: Callable[[int], None] | None = None

    @property
    def connection_id(self) -> str:
        return self.connection.connection_id

    @property
    def client_host(self) -> str:
        """The client's address as Kafka shows it, e.g. `/127.0.0.1`."""
        return self.connection.peer_host

    def complete(self, frame: bytes | None) -> None:
        """Any thread: write `frame` (None: write nothing) on the owning loop, then unmute."""
        self._finish(frame, None)

    def fail_close(self, reason: str) -> None:
        """Any thread: write nothing and close the connection, logging `reason`."""
        self._finish(None, reason)

    def complete_then_close(self, frame: bytes, reason: str, delay_s: float) -> None:
        """Any thread: after `delay_s` write `frame`, then close the connection (logging
        `reason`): the answer to a failed authentication."""
        if self.done:
            log.error("%r answered twice; ignoring the second answer", self)
            return
        self.done = True
        self.connection.complete_then_close_threadsafe(self, frame, reason, delay_s)

    def _finish(self, frame: bytes | None, close: str | None) -> None:
        if self.done:  # RequestContext already prevents this; a second answer is a bug
            log.error("%r answered twice; ignoring the second answer", self)
            return
        self.done = True
        self.responded_ns = now = time.monotonic_ns()
        if not self.local_done_ns:  # answered before its handler returned: no remote time
            self.local_done_ns = now
        self.connection.complete_threadsafe(self, frame, close)

    def __repr__(self) -> str:
        return (
            f"<Request api_key={self.api_key} v{self.api_version} corr={self.correlation_id} "
            f"client={self.client_id!r} conn={self.connection.connection_id}>"
        )
