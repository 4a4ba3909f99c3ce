"""One client connection, owned by one network thread (an asyncio Protocol on its uvloop loop).

Read path: the socket is read straight into a FrameReader's memory (asyncio.BufferedProtocol:
small frames through a 64 KiB scratch buffer, a large produce request into its own array, no
per-read bytes objects or re-buffering; the length prefix is checked against
socket.request.max.bytes before anything is allocated for it; oversized → logged, closed) → whole payloads → header decoded
(malformed → logged, closed) → `Request` → request channel.

Memory (docs/broker.md, "Memory bounds"): a large frame's array grows with the bytes received
(and those already waiting in the kernel), each growth reserved first in the broker's
MemoryPool (queued.max.request.bytes). When the pool refuses, reading pauses until it grants
the bytes (FIFO). Every payload holds its size in the pool until its request is finished
(answered or dropped). A partly received frame must be complete within
socket.request.receive.timeout.ms of reading it (`partial_since`; the clock restarts whenever
reading resumes, so time the broker spends not reading is not held against the client).

Muting (per-client ordering): once a request is handed on, the connection is *muted*: reading
is paused and later frames already received wait in `_pending`, until the response has been
written (or `no_response()` was called). Only then is the next request taken. So responses
leave in request order and one connection holds at most one request in the broker, plus what
one socket read delivered. Writes respect transport flow control: while the transport's write
buffer is above its high-water mark the connection stays muted. Once the processor drains
(shutdown: no new requests), a connection that was reading stops at its next read: reading is
never left on without room made for it through the pool (`_read_more`).

Response path: the thread that answers (an I/O worker, a flusher completing an acks=all
produce, the timer) writes a small response (<= 256 KiB) straight to the socket when the
request was taken with nothing queued on the transport (`Request.direct_write`): the connection
is muted, so nothing else can write to it meanwhile, and the response leaves without waiting
for the network thread to wake up and take the GIL. The write goes through a dup of the
socket's fd, closed in connection_lost under `_direct_lock`, so it can never reach another
connection that reused the fd number. When the send left something over, the network thread is
told (it writes the rest, in order, then unmutes).

When the whole answer went, the network thread is not woken at all if it is *watching*: a
request taken with nothing else pending from a plain connection (no TLS, no SASL, no quota or
throttle) leaves reading on, so the client's next frame is what wakes the network thread, and
it finds the request answered (`Request.answered`) and unmutes then (`_busy`). Waking an event
loop from another thread costs a write to its eventfd with the GIL held and a second wake-up of
the network thread per request (docs/broker.md, "Hand-offs"); a client waits for its answer
before it sends again, so the wake-up it saves is the one nobody needed. Reading on while muted
takes at most one read: the first bytes that arrive while the request is still unanswered stop
the watching (under `_direct_lock`, so exactly one side finishes the request) and pause reading,
and the answering thread then wakes the loop as before.

TLS (an SSL or SASL_SSL listener): the handshake is done before `connection_made`; the
principal is the client certificate's subject when one was checked. Direct writes are off (the
TLS state belongs to the loop) and the kernel's queued-bytes hint is not used (it counts
ciphertext). SASL (a SASL_* listener): until a SASL handler calls `mark_authenticated`, only
PRE_AUTH_APIS are taken (anything else closes the connection), frames are limited to
sasl.server.max.receive.size and the processor closes the connection at its authentication
deadline; a failed authentication is answered late, then closed (`complete_then_close_threadsafe`).

Throttling (client quotas, KIP-219): a request answered with `throttle_ms` > 0 keeps the
connection muted for that long after its answer is written (`_throttled`); then the next
request is taken. Nothing is refused and nothing is dropped; the client sees throttle_time_ms in
the answer and waits too.

Threads: everything runs on the owning loop except `complete_threadsafe`,
`complete_then_close_threadsafe` and `mark_authenticated` (any thread).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.network.request import Request
from client.protocol.frame_reader import FrameReader, socket_queued_bytes
from client.protocol.framing import FrameTooLargeError, MalformedFrameError, decode_request
from client.security.tls import ANONYMOUS, principal_from_cert

if TYPE_CHECKING:
    from broker.network.processor import Processor

log = logging.getLogger(__name__)

DIRECT_WRITE_MAX = 256 * 1024  # larger responses (fetches) are written by the network thread
# what a connection on a SASL listener may ask before it authenticated: ApiVersions,
# SaslHandshake, SaslAuthenticate (numbers: the network layer knows no API names)
PRE_AUTH_APIS = frozenset((17, 18, 36))


class Connection(asyncio.BufferedProtocol):
    def __init__(
        self,
        processor: Processor,
        connection_id: str,
        listener: str = "PLAINTEXT",
        peer_host: str = "",
        sasl: bool = False,
        decode: Callable[[bytes | bytearray, Connection], Request] | None = None,
    ) -> None:
        self.processor = processor
        self.connection_id = connection_id
        self.peer_host = peer_host  # "/127.0.0.1": the client's address as Kafka prints it
        self.listener = listener  # the name of the listener it was accepted on
        # payload -> Request (MalformedFrameError: close): the listener's protocol; the
        # default is Gregor's msgpack header (a Kafka listener passes broker.kafka's)
        self._decode = decode or _decode_native
        self._reader = FrameReader(processor.max_frame_bytes)
        self._pool = processor.memory_pool
        self._grant_callback = self._memory_granted_threadsafe  # one identity, for cancel()
        self._waiting_memory = 0  # bytes asked of the pool and not granted yet (0: not waiting)
        self._waiting_queued = 0  # the kernel-queued bytes that request was sized with
        self.partial_since: float | None = None  # loop time a partial frame's clock started
        self._pending: deque[bytes | bytearray] = deque()
        self.transport: asyncio.Transport | None = None
        self.in_flight: Request | None = None  # the request we are muted on
        self._parked = False  # in_flight waits for channel space (back-pressure)
        self._reading = True
        self._write_paused = False
        self._throttled = False  # muted after an answer, for its throttle time
        self._eof = False
        self.closed = False
        self.last_active = 0.0
        self.requests = 0
        self._direct_fd = -1  # dup of the socket fd for direct writes; -1 once closed
        self._direct_lock = threading.Lock()
        # reading stays on while in_flight is in the broker: its answering thread finishes it
        # without waking the loop (module docstring); set by the loop, turned off under
        # _direct_lock
        self._watching = False
        self.tls = False  # a TLS connection: every write goes through the TLS transport
        # who the client is: the certificate subject on a TLS listener with client auth
        # (User:CN=...), else User:ANONYMOUS (docs/security.md)
        self.principal = ANONYMOUS
        # A SASL listener's connection: only PRE_AUTH_APIS, frames of at most
        # sasl.server.max.receive.size, until the SASL handlers call authenticated();
        # `sasl_state` is theirs (broker/security/sasl.py), opaque here.
        self.sasl = sasl
        self.authenticated = not sasl
        self.sasl_state: object | None = None
        self.authentication_deadline: float | None = None
        if sasl:
            self._reader.set_limit(processor.sasl_max_receive_bytes, "sasl.server.max.receive.size")

    # -- asyncio callbacks (loop thread) -------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's TCPTransport
        ssl_object = transport.get_extra_info("ssl_object")
        sock = transport.get_extra_info("socket")
        if ssl_object is not None:  # handshake done: no direct writes (they would be clear text)
            self.tls = True
            self.principal = principal_from_cert(ssl_object.getpeercert())
            log.debug("connection %s: TLS, principal %s", self.connection_id, self.principal)
        elif sock is not None:
            try:
                self._direct_fd = os.dup(sock.fileno())
            except OSError as exc:  # e.g. out of fds: answers go through the loop only
                log.debug("connection %s: no direct writes: %s", self.connection_id, exc)
        self.last_active = self.processor.loop.time()
        if self.sasl:
            self.authentication_deadline = (
                self.last_active + self.processor.authentication_timeout_ms / 1000.0
            )
        self.processor.register(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        need = self._reader.room_needed()
        if need:  # reading is on only after _read_more made room: a bug, but stay accounted
            log.error("connection %s: frame array grown outside the memory pool", self)
            self._pool.force_reserve(need)
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        now = self.last_active = self.processor.loop.time()
        reader = self._reader
        reserved = reader.reserved
        try:
            payloads = reader.buffer_updated(nbytes)
        except FrameTooLargeError as exc:
            self.close(f"refused frame: {exc.message}")
            return
        if reader.buffered:
            if self.partial_since is None:
                self.partial_since = now
        else:
            self.partial_since = None
        if payloads:
            # A large payload leaves with the bytes its array had reserved; small ones are
            # counted now (they never wait: see MemoryPool).
            size = sum(len(p) for p in payloads)
            if reserved:
                self._pool.frame_done(self._grant_callback)
            self._pool.force_reserve(size - (reserved - reader.reserved))
            self._pending.extend(payloads)
            self._pump()
        else:
            self._read_more()

    def eof_received(self) -> bool:
        # Half-close from the client: let an in-flight response go out, then close.
        if not self._busy() and not self._pending:
            return False  # asyncio closes the transport
        self._eof = True
        self._pause_reading()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            log.debug("connection %s lost: %s", self.connection_id, exc)
        self.closed = True
        self.partial_since = None
        pool = self._pool
        if self._waiting_memory and pool.cancel(self._grant_callback):
            self._waiting_memory = 0  # else the grant is on its way: _memory_granted gives it back
        pool.frame_done(self._grant_callback)
        pool.release(self._reader.reserved + sum(len(p) for p in self._pending))
        self._pending.clear()
        with self._direct_lock:
            fd, self._direct_fd = self._direct_fd, -1
        if fd >= 0:
            os.close(fd)
        self._busy()  # an answer written while watching is finished here (its metrics)
        if self._parked:  # never reached the channel: nobody else will finish it
            self._parked = False
            assert self.in_flight is not None
            self._request_finished(self.in_flight)
        self.processor.unregister(self)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._pump()

    # -- request flow (loop thread) ------------------------------------------------------------
    def _pump(self) -> None:
        """Take the next pending request if the connection is not muted."""
        if self.closed or self._busy() or self._write_paused or self._throttled:
            self._pause_reading()
            return
        if self.processor.draining:
            self._pause_reading()  # shutting down: no new requests
            return
        if not self._pending:
            if self._eof:
                self.close()
            else:
                self._read_more()
            return
        payload = self._pending.popleft()
        try:
            request = self._decode(payload, self)
        except MalformedFrameError as exc:
            self.close(f"malformed request header: {exc.message}")
            return
        if not self.authenticated and request.api_key not in PRE_AUTH_APIS:
            self.close(
                f"api key {request.api_key} before SASL authentication (only ApiVersions,"
                " SaslHandshake and SaslAuthenticate are served until then)"
            )
            return
        assert self.transport is not None
        request.direct_write = not self.tls and self.transport.get_write_buffer_size() == 0
        self.requests += 1
        self.in_flight = request
        self.processor.channel.request_started()
        # Watch (keep reading, unmute when the client's next frame shows the answer went) only
        # with nothing else received: no frame pending, none partly read
        self._watching = (
            request.direct_write
            and not self.sasl
            and not self._pending
            and not self._reader.buffered
        )
        if self._watching:
            self._resume_reading()
        else:
            self._pause_reading()
        if log.isEnabledFor(logging.DEBUG):
            log.debug("received %r", request)
        if not self.processor.channel.try_send(request):
            self._parked = True
            self.processor.park(self)

    def send_parked(self) -> bool:
        """Retry handing the parked request to the channel; True when it went (or was dropped:
        connection closed, or channel closed at shutdown)."""
        if not self._parked:
            return True
        channel = self.processor.channel
        if self.closed or channel.closed:
            self._parked = False
            assert self.in_flight is not None
            self._request_finished(self.in_flight)  # dropped unanswered: connection going away
            return True
        if channel.try_send(self.in_flight):
            self._parked = False
            return True
        return False

    def complete_threadsafe(self, request: Request, frame: bytes | None, close: str | None) -> None:
        """Any thread: hand the outcome of `request` to the owning loop (after writing a small
        response directly when the transport had nothing queued; see the module docstring)."""
        rest: bytes | memoryview | None = frame
        if frame is not None and close is None and request.direct_write:
            if len(frame) <= DIRECT_WRITE_MAX:
                rest = self._write_direct(frame, request)
                if request.answered:  # written whole while watching: the loop unmutes at
                    self._request_finished(request)  # the next frame (_busy)
                    return
        try:
            self.processor.loop.call_soon_threadsafe(self._complete, request, rest, close)
        except RuntimeError:  # the loop is closed: the connection is gone with it
            log.debug("connection %s: loop closed, dropping response", self.connection_id)
            self._request_finished(request)

    def mark_authenticated(self, principal: str) -> None:
        """Any thread (the SASL handler, while this connection is muted on its request): the
        client authenticated as `principal`; the frame limit goes back to
        socket.request.max.bytes once the answer is written."""
        self.principal = principal
        self.authenticated = True

    def complete_then_close_threadsafe(
        self, request: Request, frame: bytes, reason: str, delay_s: float
    ) -> None:
        """Any thread: after `delay_s`, write `frame` (the answer to `request`) and close
        (a failed authentication: connection.failed.authentication.delay.ms)."""
        loop = self.processor.loop
        try:
            loop.call_soon_threadsafe(
                loop.call_later, delay_s, self._complete_then_close, request, frame, reason
            )
        except RuntimeError:  # the loop is closed: the connection is gone with it
            self._request_finished(request)

    def _complete_then_close(self, request: Request, frame: bytes, reason: str) -> None:
        self._request_finished(request)
        self.in_flight = None
        if self.closed or self.transport is None or self.transport.is_closing():
            return
        self.transport.write(frame)
        self.close(reason, logging.INFO)

    def _write_direct(self, frame: bytes, request: Request) -> bytes | memoryview | None:
        """Any thread: send what the socket takes now; return the rest (None: all sent). All
        sent to a watching connection, with no quota or throttle bookkeeping for the loop:
        `request.answered`, decided under the same hold of `_direct_lock` as the write, so the
        loop cannot look at the request (_busy) between the two, whatever the client sends
        meanwhile."""
        with self._direct_lock:
            fd = self._direct_fd
            if fd < 0:
                return frame
            try:
                n = os.write(fd, frame)
            except BlockingIOError:
                return frame
            except OSError as exc:  # the peer is gone; the loop sees it on its side too
                log.debug("connection %s: direct write failed: %s", self.connection_id, exc)
                return frame
            if n == len(frame):
                request.sent_ns = time.monotonic_ns()
                request.answered = (
                    self._watching and request.throttle_ms == 0 and request.quota_sent is None
                )
        self.processor.direct_writes += 1
        if n == len(frame):
            return None
        return memoryview(frame)[n:]

    def _complete(
        self, request: Request, frame: bytes | memoryview | None, close: str | None
    ) -> None:
        picked_ns = time.monotonic_ns()
        self._request_finished(request)
        if request is not self.in_flight:
            raise AssertionError(f"completing {request!r} but in flight is {self.in_flight!r}")
        self.in_flight = None
        if self.closed:
            return
        self.last_active = self.processor.loop.time()
        if close is not None:
            self.close(close)
            return
        if frame is not None:
            assert self.transport is not None
            if self.transport.is_closing():
                return  # the client hung up; connection_lost follows
            self.transport.write(frame)
        if self.sasl and self.authenticated and self.authentication_deadline is not None:
            self.authentication_deadline = None  # authenticated: the full frame size again
            self._reader.set_limit(self.processor.max_frame_bytes, "socket.request.max.bytes")
        recorder = self.processor.recorder
        sent_ns = time.monotonic_ns()
        if recorder is not None:  # metrics on (broker/request_metrics.py)
            recorder.sent(request, picked_ns, sent_ns)
        if request.quota_sent is not None:
            request.quota_sent(sent_ns - picked_ns)
        if request.throttle_ms > 0:
            self._throttled = True
            self._pause_reading()
            self.processor.loop.call_later(request.throttle_ms / 1000.0, self._unthrottle)
            return
        self._pump()

    def _busy(self) -> bool:
        """A request of this connection is in the broker (loop thread). One answered by its
        answering thread while we were watching is finished here; one not answered yet ends the
        watching (its answering thread then wakes the loop: _complete), since the caller is
        about to stop reading."""
        request = self.in_flight
        if request is None:
            return False
        if not self._watching:
            return True
        with self._direct_lock:
            self._watching = False
            answered = request.answered
        if not answered:
            return True
        self.in_flight = None
        self.last_active = self.processor.loop.time()
        self.processor.unmuted_on_read += 1
        recorder = self.processor.recorder
        if recorder is not None:  # metrics on: the direct write's time is in request.sent_ns
            recorder.sent(request, request.sent_ns, request.sent_ns)
        return False

    def _unthrottle(self) -> None:
        self._throttled = False
        if not self.closed:
            self._pump()

    def _request_finished(self, request: Request) -> None:
        """Any thread: `request` is answered or dropped; its payload leaves the memory pool."""
        self.processor.channel.request_done()
        self._pool.release(request.size)

    # -- memory (loop thread, except _memory_granted_threadsafe) -------------------------------
    def _read_more(self) -> None:
        """Reading should go on: make room for the next read first (reserving it in the memory
        pool, or waiting for it with reading paused), then resume reading."""
        if self._waiting_memory or self.closed:
            return
        if self._busy() or self._write_paused or self._throttled or self.processor.draining:
            # Muted, or draining (set from another thread while this connection was reading):
            # no room is made, so no read may land either. _pump calls again once it may read
            # (never, when draining: shutdown closes the connection).
            self._pause_reading()
            return
        queued = self._kernel_queued()
        need = self._reader.room_needed(queued)
        if need:
            self._waiting_queued = queued
            self._waiting_memory = need
            if not self._pool.reserve_or_wait(need, self._reader.reserved, self._grant_callback):
                self._pause_reading()  # _memory_granted resumes
                log.debug("connection %s: waiting for %d bytes of memory", self, need)
                return
            self._waiting_memory = 0
            self._reader.grow(queued)
        self._resume_reading()

    def _memory_granted_threadsafe(self) -> None:
        """Any thread (the one that released memory): the pool reserved our bytes."""
        try:
            self.processor.loop.call_soon_threadsafe(self._memory_granted)
        except RuntimeError:  # loop closed: the connection is gone
            self._pool.release(self._waiting_memory)

    def _memory_granted(self) -> None:
        need, self._waiting_memory = self._waiting_memory, 0
        if self.closed:
            self._pool.release(need)
            return
        self.last_active = self.processor.loop.time()
        assert self._reader.room_needed(self._waiting_queued) == need, "reader changed while paused"
        self._reader.grow(self._waiting_queued)
        self._read_more()

    def _kernel_queued(self) -> int:
        """Bytes already in the socket's receive queue, when the reader needs room (0 else)."""
        if self._reader.room_needed() == 0:
            return 0
        return socket_queued_bytes(self._direct_fd)

    # -- helpers -------------------------------------------------------------------------------
    def _pause_reading(self) -> None:
        if self._reading and self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()
            self._reading = False
            self.partial_since = None  # the receive clock runs only while we read

    def _resume_reading(self) -> None:
        if not self._reading and self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()
            self._reading = True
            if self._reader.buffered:
                self.partial_since = self.processor.loop.time()

    @property
    def reading(self) -> bool:
        """The transport is reading (loop thread; from another thread, a snapshot)."""
        return self._reading

    @property
    def partial_bytes(self) -> int:
        """Bytes of the frame being received (0 between frames)."""
        return self._reader.buffered

    @property
    def idle(self) -> bool:
        """No request in the broker, none waiting, not waiting for memory: the idle timer may
        close it."""
        request = self.in_flight
        return (
            (request is None or request.answered)
            and not self._pending
            and not self._waiting_memory
            and not self._throttled
        )

    def close(self, reason: str | None = None, level: int = logging.WARNING) -> None:
        """Close (buffered responses are flushed first). `reason` is logged at `level`."""
        if reason is not None:
            log.log(level, "closing connection %s: %s", self.connection_id, reason)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        self.closed = True

    def __repr__(self) -> str:
        return f"<Connection {self.connection_id}>"


def _decode_native(payload: bytes | bytearray, connection: Connection) -> Request:
    """Gregor's request header (msgpack) → Request; MalformedFrameError when it is not one."""
    api_key, api_version, correlation_id, client_id, body = decode_request(payload)
    return Request(api_key, api_version, correlation_id, client_id, body, len(payload), connection)
