"""The acceptor: one listener's socket and one thread (its own uvloop loop) that accepts
connections and hands them to the network threads round-robin, tagged with the listener's name
(one acceptor per listener; the network threads are shared).

Past `max.connections` live connections a new one is accepted and closed at once (so it does
not sit in the backlog and the listening socket does not stay readable: the accept loop never
spins), and the refusal logged as a warning at most once every `refusal_log_interval_s` (10 s),
with the count refused since the previous warning.
On a TLS listener each connection is handed over with the listener's current SSLContext (read
per connection, so a reload on SIGHUP reaches the next connection); the handshake runs on the
network thread. Binding happens in `bind()` (the caller's thread), so the bound address is known as soon as it
returns; port 0 gives an ephemeral port.

Threads: `bind`, `start`, `stop` from the server's control thread; `_on_readable` on the
acceptor's loop.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import threading
import time
from collections.abc import Sequence

from broker.network.processor import Processor
from client.security.tls import ReloadableContext

log = logging.getLogger(__name__)

_RESOURCE_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


class ConnectionQuota:
    """Live-connection count against max.connections. Any thread."""

    def __init__(self, max_connections: int) -> None:
        self.max_connections = max_connections
        self._count = 0
        self._lock = threading.Lock()

    def try_acquire(self) -> bool:
        with self._lock:
            if self._count >= self.max_connections:
                return False
            self._count += 1
            return True

    def release(self) -> None:
        with self._lock:
            self._count -= 1
            assert self._count >= 0, "connection released twice"

    @property
    def count(self) -> int:
        return self._count


class Acceptor:
    def __init__(
        self,
        host: str,
        port: int,
        processors: Sequence[Processor],
        quota: ConnectionQuota,
        backlog: int = 512,
        refusal_log_interval_s: float = 10.0,
        listener: str = "PLAINTEXT",
        tls: ReloadableContext | None = None,
        sasl: bool = False,
    ) -> None:
        self.listener = listener  # its name (broker/listeners.py), given to each connection
        self.tls = tls  # TLS listener (SSL, SASL_SSL): each connection gets its current context
        self.sasl = sasl  # SASL listener: connections authenticate first
        self.host = host
        self.port = port
        self._processors = processors
        self._quota = quota
        self._backlog = backlog
        self._sock: socket.socket | None = None
        self._next = 0
        self.refused = 0
        self._refusal_log_interval_s = refusal_log_interval_s
        self._refusal_log_at = float("-inf")  # monotonic time of the last refusal warning
        self._refused_logged = 0  # self.refused when it was logged
        self._starved_log_at = float("-inf")  # last "out of descriptors" error logged
        self._starved = 0  # accept failures for lack of descriptors or memory (a statistic)
        self.address: tuple[str, int] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    def bind(self) -> tuple[str, int]:
        """Create the listening socket; returns the bound (host, port)."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.create_server((self.host, self.port), family=family, backlog=self._backlog)
        sock.setblocking(False)
        self._sock = sock
        host, port = sock.getsockname()[:2]
        self.address = (host, port)
        return self.address

    def start(self) -> None:
        assert self._sock is not None, "bind() first"
        name = "acceptor" if self.listener == "PLAINTEXT" else f"acceptor-{self.listener}"
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        if not self._ready.wait(10.0):
            raise RuntimeError("acceptor thread did not start")

    def _run(self) -> None:
        import uvloop

        loop = uvloop.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        assert self._sock is not None
        loop.add_reader(self._sock.fileno(), self._on_readable)
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    def _on_readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        while True:
            try:
                conn, peer = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _RESOURCE_ERRNOS:
                    # Out of descriptors: stop accepting for a moment rather than spin, and
                    # say so at most once per refusal-log interval (not every 100 ms).
                    self._starved += 1
                    now = time.monotonic()
                    if now - self._starved_log_at >= self._refusal_log_interval_s:
                        self._starved_log_at = now
                        log.error(
                            "accept failed (%s); pausing accepts for 100 ms at a time"
                            " (%d times so far; logged at most every %.0f s)",
                            exc,
                            self._starved,
                            self._refusal_log_interval_s,
                        )
                    assert self._loop is not None
                    self._loop.remove_reader(sock.fileno())
                    self._loop.call_later(0.1, self._resume_accepting)
                    return
                log.warning("accept failed: %s", exc)
                return
            if not self._quota.try_acquire():
                self._refused(peer)  # counted before the close the client sees
                conn.close()
                continue
            conn.setblocking(False)
            if conn.family in (socket.AF_INET, socket.AF_INET6):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            processor = self._processors[self._next % len(self._processors)]
            self._next += 1
            try:
                processor.accept(
                    conn,
                    peer,
                    self.listener,
                    None if self.tls is None else self.tls.context,
                    self.sasl,
                )
            except RuntimeError:  # its loop is closed: we are shutting down
                conn.close()
                self._quota.release()

    def _refused(self, peer: object) -> None:
        self.refused += 1
        now = time.monotonic()
        if now - self._refusal_log_at < self._refusal_log_interval_s:
            return
        log.warning(
            "refusing connection from %s: max.connections=%d reached "
            "(%d refused since the previous warning; at most one warning per %.0f s)",
            peer,
            self._quota.max_connections,
            self.refused - self._refused_logged,
            self._refusal_log_interval_s,
        )
        self._refusal_log_at = now
        self._refused_logged = self.refused

    def _resume_accepting(self) -> None:
        if self._sock is not None and self._loop is not None:
            self._loop.add_reader(self._sock.fileno(), self._on_readable)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting and close the listening socket."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            return
        try:
            loop.call_soon_threadsafe(self._stop_on_loop)
        except RuntimeError:
            pass  # loop already closed
        thread.join(timeout)
        if thread.is_alive():
            log.error("acceptor did not stop within %.1fs", timeout)

    def _stop_on_loop(self) -> None:
        assert self._loop is not None
        if self._sock is not None:
            self._loop.remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
        self._loop.stop()
