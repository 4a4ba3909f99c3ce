"""A network thread (Kafka's Processor): its own uvloop event loop and the connections it owns.

The acceptor hands it accepted sockets (`accept`, any thread). It attaches each as a
`Connection`, closes connections idle for longer than connections.max.idle.ms and those whose
partly received frame is older than socket.request.receive.timeout.ms, and keeps the
connections whose request is waiting for room in the request channel (`park`): when the channel
frees space it retries them in arrival order.

Threads: `start`, `accept`, `stop_processing`, `shutdown` from any thread; everything else runs
on the loop thread this object owns.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.network.connection import Connection
from broker.request_channel import RequestChannel

if TYPE_CHECKING:
    from broker.network.memory_pool import MemoryPool
    from broker.network.socket_server import NetworkSettings

log = logging.getLogger(__name__)

TLS_FAILURE_LOG_INTERVAL_S = 10.0


class Processor:
    def __init__(
        self,
        index: int,
        channel: RequestChannel,
        memory_pool: MemoryPool,
        settings: NetworkSettings,
        on_connection_closed: Callable[[], None],
    ) -> None:
        self.index = index
        self.channel = channel
        self.memory_pool = memory_pool
        self.max_frame_bytes = settings.socket_request_max_bytes
        self.idle_ms = settings.connections_max_idle_ms
        self.receive_timeout_ms = settings.socket_request_receive_timeout_ms
        self.sasl_max_receive_bytes = settings.sasl_server_max_receive_size
        self.authentication_timeout_ms = settings.sasl_server_authentication_timeout_ms
        self.failed_authentication_delay_s = (
            settings.connection_failed_authentication_delay_ms / 1000.0
        )
        self._decoders = dict(settings.decoders)
        self._on_connection_closed = on_connection_closed
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # set by _run
        self.draining = False
        self.connections: set[Connection] = set()
        self._attaching: set[asyncio.Task[Any]] = set()
        self._parked: deque[Connection] = deque()
        self._waiting_for_space = False
        self._next_id = 0
        self.direct_writes = 0  # responses written by the answering thread (approximate; metrics)
        # of those, requests finished here only when the client's next frame came, with no
        # wake-up of this loop (Connection "watching"; approximate; metrics and tests)
        self.unmuted_on_read = 0
        self.tls_handshake_failures = 0  # a statistic
        self._tls_failure_logged_at = float("-inf")
        # broker.request_metrics.StageRecorder while metrics are on (set before start), else None
        self.recorder: Any = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"network-{index}", daemon=True)

    # -- any thread ----------------------------------------------------------------------------
    @property
    def native_thread_id(self) -> int | None:
        """The OS id of this network thread (metrics: its CPU time); None before it starts."""
        return self._thread.native_id

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(10.0):
            raise RuntimeError(f"network thread {self.index} did not start")

    def accept(
        self,
        sock: socket.socket,
        peer: object,
        listener: str = "PLAINTEXT",
        tls: ssl.SSLContext | None = None,
        sasl: bool = False,
    ) -> None:
        """Take ownership of an accepted, non-blocking socket, accepted on `listener` (its name:
        the handlers answer with the addresses advertised for it); `tls`: the TLS listener's
        context (the handshake must finish within socket.request.receive.timeout.ms); `sasl`:
        a SASL listener (the connection must authenticate first)."""
        self.loop.call_soon_threadsafe(self._attach, sock, peer, listener, tls, sasl)

    def stop_processing(self) -> None:
        """Stop taking new requests (in-flight ones still get their responses written)."""
        self.draining = True

    def shutdown(self, timeout: float = 5.0) -> None:
        """Close every connection (flushing written responses), stop the loop, join the thread."""
        if not self._thread.is_alive():
            return
        try:
            self.loop.call_soon_threadsafe(self._close_all, self.loop.time() + timeout)
        except RuntimeError:
            pass  # loop already closed: the thread is exiting
        self._thread.join(timeout + 1.0)
        if self._thread.is_alive():
            log.error("network thread %d did not stop within %.1fs", self.index, timeout)

    # -- loop thread ---------------------------------------------------------------------------
    def _run(self) -> None:
        import uvloop

        loop = uvloop.new_event_loop()
        asyncio.set_event_loop(loop)
        self.loop = loop
        loop.call_later(self._sweep_interval_s, self._sweep)
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    @property
    def _sweep_interval_s(self) -> float:
        shortest = min(self.idle_ms, self.receive_timeout_ms, self.authentication_timeout_ms)
        return min(1.0, max(0.005, shortest / 4000.0))

    def _attach(
        self,
        sock: socket.socket,
        peer: object,
        listener: str = "PLAINTEXT",
        tls: ssl.SSLContext | None = None,
        sasl: bool = False,
    ) -> None:
        if self.draining:
            sock.close()
            self._on_connection_closed()
            return
        self._next_id += 1
        conn_id = f"{self.index}-{self._next_id}-{_fmt_peer(peer)}"
        host = _peer_host(peer)
        decode = self._decoders.get(listener)
        if tls is None:
            coro = self.loop.connect_accepted_socket(
                lambda: Connection(self, conn_id, listener, host, sasl, decode), sock
            )
        else:
            coro = self.loop.connect_accepted_socket(
                lambda: Connection(self, conn_id, listener, host, sasl, decode),
                sock,
                ssl=tls,
                ssl_handshake_timeout=self.receive_timeout_ms / 1000.0,
            )
        task = self.loop.create_task(coro)
        self._attaching.add(task)
        task.add_done_callback(lambda t: self._attached(t, sock, conn_id, tls is not None))

    def _attached(
        self, task: asyncio.Task[Any], sock: socket.socket, conn_id: str, tls: bool
    ) -> None:
        self._attaching.discard(task)
        if task.cancelled() or task.exception() is not None:
            exc = None if task.cancelled() else task.exception()
            if tls and not task.cancelled():
                # A failed TLS handshake (untrusted or expired client certificate, not TLS at
                # all, too slow): the client's own problem, one line without a traceback, at
                # most one every TLS_FAILURE_LOG_INTERVAL_S with the count since the last.
                self.tls_handshake_failures += 1
                now = self.loop.time()
                if now - self._tls_failure_logged_at >= TLS_FAILURE_LOG_INTERVAL_S:
                    log.info(
                        "connection %s: TLS handshake failed: %s (%d failed handshakes on"
                        " this network thread so far; logged at most every %.0f s)",
                        conn_id,
                        _why(exc),
                        self.tls_handshake_failures,
                        TLS_FAILURE_LOG_INTERVAL_S,
                    )
                    self._tls_failure_logged_at = now
            else:
                log.warning("connection %s: could not attach: %r", conn_id, exc)
            sock.close()
            self._on_connection_closed()

    def register(self, conn: Connection) -> None:
        self.connections.add(conn)
        log.debug("connection %s opened", conn.connection_id)

    def unregister(self, conn: Connection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            self._on_connection_closed()
            log.debug("connection %s closed", conn.connection_id)

    def park(self, conn: Connection) -> None:
        """`conn`'s request found the channel full: retry when it has room (back-pressure)."""
        self._parked.append(conn)
        if not self._waiting_for_space:
            self._waiting_for_space = True
            self.channel.notify_when_space(self._space_available)

    def _space_available(self) -> None:  # I/O thread (or this loop, when space is free at once)
        try:
            self.loop.call_soon_threadsafe(self._send_parked)
        except RuntimeError:
            log.debug("network thread %d: loop closed, parked requests dropped", self.index)

    def _send_parked(self) -> None:
        self._waiting_for_space = False
        parked = self._parked
        while parked:
            if not parked[0].send_parked():
                self._waiting_for_space = True
                self.channel.notify_when_space(self._space_available)
                return
            parked.popleft()

    def _sweep(self) -> None:
        """Close idle connections and those too slow to send a whole frame."""
        now = self.loop.time()
        idle_s = self.idle_ms / 1000.0
        receive_s = self.receive_timeout_ms / 1000.0
        for conn in list(self.connections):
            if conn.idle and now - conn.last_active > idle_s:
                conn.close(
                    f"idle for more than connections.max.idle.ms={self.idle_ms}", logging.INFO
                )
                continue
            deadline = conn.authentication_deadline
            if deadline is not None and now > deadline and not conn.authenticated:
                conn.close(
                    "not authenticated within sasl.server.authentication.timeout.ms="
                    f"{self.authentication_timeout_ms}",
                    logging.INFO,
                )
                continue
            started = conn.partial_since
            if started is not None and now - started > receive_s:
                conn.close(
                    f"{conn.partial_bytes} bytes of a frame still incomplete after "
                    f"socket.request.receive.timeout.ms={self.receive_timeout_ms}"
                )
        if not self.loop.is_closed():
            self.loop.call_later(self._sweep_interval_s, self._sweep)

    def _close_all(self, deadline: float) -> None:
        self.draining = True
        for task in list(self._attaching):
            task.cancel()
        for conn in list(self.connections):
            conn.close()
        self._stop_when_closed(deadline)

    def _stop_when_closed(self, deadline: float) -> None:
        if self.connections and self.loop.time() < deadline:
            self.loop.call_later(0.005, self._stop_when_closed, deadline)
            return
        if self.connections:
            log.warning(
                "network thread %d: %d connections still open at shutdown",
                self.index,
                len(self.connections),
            )
            for conn in list(self.connections):
                if conn.transport is not None:
                    conn.transport.abort()
        self.loop.stop()


def _peer_host(peer: object) -> str:
    """The client host as Kafka shows it (ConsumerGroupDescribe's client_host, the HOST column
    of kafka-consumer-groups.sh): the peer's IP address after a slash, e.g. `/127.0.0.1`."""
    if isinstance(peer, tuple) and peer:
        return f"/{peer[0]}"
    return f"/{peer}" if peer else ""


def _fmt_peer(peer: object) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


def _why(exc: BaseException | None) -> str:
    """An exception as one line, its type when its message is empty (a handshake timeout)."""
    if exc is None:
        return "cancelled"
    return str(exc) or type(exc).__name__
