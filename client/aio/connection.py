"""One TCP connection to one broker: ApiVersions first, correlation ids, pipelining.

    request(api_key, body) ──> [frame] ──socket──> broker
              ^                                       |
              └── future <── in-flight deque (FIFO) <─┘  responses arrive in request order

At most `max_in_flight` requests wait for responses; further callers wait for a slot. A request
that gets no answer within its timeout fails with GregorTimeoutError and closes the connection
(the responses behind it could no longer be matched), failing every other in-flight request
with ConnectionFailedError naming the address. Produce with acks=0 expects no response.

Owned by the event loop that opened it: every method must be called on that loop.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import ssl as ssl_module
from typing import Any

from client.errors import (
    ClientClosedError,
    ConnectionFailedError,
    ErrorCode,
    GregorTimeoutError,
    IllegalSaslStateError,
    InvalidRequestError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
    error_for_code,
)
from client.protocol import (
    API_SPECS,
    ApiKey,
    decode_response,
    encode_request,
    encode_request_parts,
)
from client.protocol.body import Body
from client.protocol.frame_reader import FrameReader, socket_queued_bytes
from client.security.scram import (
    AuthenticationFailed,
    SaslCredentials,
    ScramClient,
    plain_message,
)

log = logging.getLogger(__name__)


class _Protocol(asyncio.BufferedProtocol):
    """Reads frames in place (FrameReader: a big fetch response lands in its own array, no
    re-buffering) for the owning connection; tracks write pausing for back-pressure."""

    def __init__(self, conn: BrokerConnection) -> None:
        self._conn = conn
        self.paused = False
        self.drain_waiter: asyncio.Future[None] | None = None
        self._fd = -1

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        tls = transport.get_extra_info("ssl_object") is not None  # FIONREAD counts ciphertext
        self._fd = sock.fileno() if sock is not None and not tls else -1

    def get_buffer(self, sizehint: int) -> memoryview:
        reader = self._conn._reader
        if reader.room_needed():  # a large response's array grows: take what has arrived
            reader.grow(socket_queued_bytes(self._fd))
        return reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._conn._on_data(nbytes)

    def connection_lost(self, exc: Exception | None) -> None:
        self._conn._on_lost(exc)
        self._wake_drain()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._wake_drain()

    def _wake_drain(self) -> None:
        w, self.drain_waiter = self.drain_waiter, None
        if w is not None and not w.done():
            w.set_result(None)


class BrokerConnection:
    """A connection to `host:port` (broker `node_id`, -1 for a bootstrap address)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int = -1,
        client_id: str | None = None,
        max_in_flight: int = 5,
        request_timeout_ms: int = 30_000,
        connect_timeout_ms: int = 10_000,
        max_frame_bytes: int = 100 * 1024 * 1024,
        ssl: ssl_module.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
    ) -> None:
        """`ssl`: TLS with this context (security.protocol=SSL or SASL_SSL); the server's
        certificate must name `host` unless the context's check_hostname is off. `sasl`:
        authenticate after ApiVersions (security.protocol=SASL_*)."""
        self.ssl = ssl
        self.sasl = sasl
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._max_in_flight = max_in_flight
        self._slots = asyncio.Semaphore(max_in_flight)
        self._reader = FrameReader(max_frame_bytes)
        self._in_flight: collections.deque[tuple[int, int, int, asyncio.Future[Body], Any]] = (
            collections.deque()
        )
        self._next_corr = 0
        self._transport: asyncio.Transport | None = None
        self._protocol: _Protocol | None = None
        self._closed_exc: Exception | None = None
        self._connected = False
        # Client quotas (KIP-219): a response with throttle_time_ms > 0 means the broker reads
        # nothing more from this connection for that long; no request is sent before then.
        self.throttled_until = 0.0  # loop time

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.address} in_flight={len(self._in_flight)}>"

    @property
    def connected(self) -> bool:
        return self._connected and self._closed_exc is None

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    # -- lifecycle -----------------------------------------------------------------------------

    async def connect(self) -> None:
        """Open the socket and exchange ApiVersions. Raises ConnectionFailedError."""
        loop = asyncio.get_running_loop()
        try:
            self._transport, self._protocol = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Protocol(self),
                    self.host,
                    self.port,
                    ssl=self.ssl,
                    server_hostname=self.host if self.ssl is not None else None,
                ),
                self.connect_timeout_ms / 1000,
            )
        except ssl_module.SSLCertVerificationError as exc:
            raise ConnectionFailedError(
                f"cannot connect to {self.address}: TLS: the broker's certificate is not"
                f" trusted: {exc.verify_message} (ssl.cafile,"
                " ssl.endpoint.identification.algorithm)"
            ) from exc
        except ssl_module.SSLError as exc:
            raise ConnectionFailedError(
                f"cannot connect to {self.address}: TLS handshake failed: {exc.reason or exc}"
            ) from exc
        except OSError as exc:  # includes TimeoutError
            reason = str(exc) or type(exc).__name__
            if self.ssl is not None and isinstance(exc, ConnectionResetError | TimeoutError):
                reason += " (during the TLS handshake: is the listener TLS, and does it need a client certificate?)"
            raise ConnectionFailedError(f"cannot connect to {self.address}: {reason}") from exc
        assert self._transport is not None
        sock = self._transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except (OSError, ValueError) as exc:
                # the peer reset the connection as it was made: uvloop's socket then has no
                # descriptor left (ValueError), the kernel's says EBADF/ECONNRESET (OSError)
                self.close()
                raise ConnectionFailedError(
                    f"cannot connect to {self.address}: closed at once ({exc})"
                ) from exc
        self._connected = True
        try:
            body = await self.request(ApiKey.API_VERSIONS, {}, version=0)
        except ConnectionFailedError as exc:
            if self.ssl is None:
                raise
            # TLS 1.3: the client's side of the handshake is done before the broker has
            # checked the client certificate, so a refused one shows up here.
            raise ConnectionFailedError(
                f"cannot connect to {self.address}: the broker closed the TLS connection right"
                " after the handshake: it probably refused our client certificate (none sent,"
                " not signed by a CA it trusts, or expired: ssl.certfile, ssl.keyfile)"
            ) from exc
        assert body is not None
        if body["error_code"] not in (0, 35):
            self.close()
            raise error_for_code(body["error_code"])(f"ApiVersions from {self.address}")
        self.api_versions = {
            a["api_key"]: (a["min_version"], a["max_version"]) for a in body["api_keys"]
        }
        if self.sasl is not None:
            try:
                await self._authenticate(self.sasl)
            except BaseException:
                self.close()
                raise
        log.debug(
            "connected to %s (node %s), %d APIs", self.address, self.node_id, len(self.api_versions)
        )

    async def _authenticate(self, creds: SaslCredentials) -> None:
        """SaslHandshake, then the mechanism's SaslAuthenticate round trips. Raises
        SaslAuthenticationFailedError (not retriable: the same credentials would fail again),
        UnsupportedSaslMechanismError or IllegalSaslStateError naming what to change."""
        mechanism = creds.mechanism
        hs = await self.request(ApiKey.SASL_HANDSHAKE, {"mechanism": mechanism})
        assert hs is not None
        if hs["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            hint = ""
            if mechanism == "PLAIN" and self.ssl is None:
                hint = (
                    " (PLAIN sends the password itself: brokers offer it only over TLS,"
                    " security.protocol=SASL_SSL)"
                )
            raise UnsupportedSaslMechanismError(
                f"broker at {self.address} does not offer SASL mechanism {mechanism}; it"
                f" offers {', '.join(hs['mechanisms']) or 'none'}{hint}"
            )
        if hs["error_code"] == ErrorCode.ILLEGAL_SASL_STATE:
            raise IllegalSaslStateError(
                f"broker at {self.address} refused SaslHandshake: its listener is not a SASL"
                " one (check security.protocol against the broker's listener)"
            )
        if hs["error_code"]:
            raise error_for_code(hs["error_code"])(f"SaslHandshake at {self.address}")
        if mechanism == "PLAIN":
            await self._sasl_step(creds, plain_message(creds.username, creds.password))
            return
        scram = ScramClient(mechanism, creds.username, creds.password)
        server_first = await self._sasl_step(creds, scram.first())
        try:
            server_final = await self._sasl_step(creds, scram.final(server_first))
            scram.verify(server_final)
        except AuthenticationFailed as exc:
            raise SaslAuthenticationFailedError(
                f"broker at {self.address} failed to prove it knows {creds.username!r}'s"
                f" credentials ({exc}): not the cluster you meant?"
            ) from exc

    async def _sasl_step(self, creds: SaslCredentials, data: bytes) -> bytes:
        try:
            resp = await self.request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": data})
        except ConnectionFailedError as exc:
            raise SaslAuthenticationFailedError(
                f"authentication as {creds.username!r} with {creds.mechanism} at"
                f" {self.address}: the broker closed the connection ({exc})"
            ) from exc
        assert resp is not None
        if resp["error_code"]:
            raise error_for_code(resp["error_code"])(
                f"authentication as {creds.username!r} with {creds.mechanism} at"
                f" {self.address} failed: {resp.get('error_message') or 'refused'}"
            )
        return bytes(resp["auth_bytes"])

    def close(self, exc: Exception | None = None) -> None:
        """Close the socket and fail every in-flight request (idempotent)."""
        if self._closed_exc is None:
            self._closed_exc = exc or ClientClosedError(f"connection to {self.address} closed")
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        self._fail_all(self._closed_exc)

    # -- requests ------------------------------------------------------------------------------

    def version_for(self, api_key: int) -> int:
        spec = API_SPECS[api_key]
        if api_key == ApiKey.API_VERSIONS:
            return 0
        theirs = self.api_versions.get(api_key)
        if theirs is None:
            raise UnsupportedVersionError(
                f"broker at {self.address} does not support {spec.name} (api key {api_key})"
            )
        lo, hi = max(theirs[0], spec.min_version), min(theirs[1], spec.max_version)
        if lo > hi:
            raise UnsupportedVersionError(
                f"broker at {self.address} supports {spec.name} v{theirs[0]}-{theirs[1]}, "
                f"client v{spec.min_version}-{spec.max_version}"
            )
        return hi

    async def request(
        self,
        api_key: int,
        body: Body,
        *,
        version: int | None = None,
        timeout_ms: int | None = None,
        expect_response: bool = True,
        vectored: bool = False,
    ) -> Body | None:
        """Send one request and wait for its (schema-checked) response body.

        A response that is only `{"error_code": N}` (a whole-request error, e.g. unsupported
        version) raises the exception for N. Returns None when expect_response is False.
        `vectored`: the body holds large bins or BinParts; encode it with encode_request_parts
        and hand the socket the buffers themselves (no copy of the bins).
        """
        if self._closed_exc is not None:
            raise self._raise_closed()
        if version is None:
            version = self.version_for(api_key)
        await self._slots.acquire()
        held = True  # the in-flight slot, released once (acks=0: as soon as it is written)
        try:
            wait = self.throttled_until - asyncio.get_running_loop().time()
            if wait > 0:  # throttled by a broker quota: send nothing until it has passed
                await asyncio.sleep(wait)
            if self._closed_exc is not None:
                raise self._raise_closed()
            corr = self._next_corr
            self._next_corr = (corr + 1) & 0x7FFFFFFF
            if vectored:
                frame = encode_request_parts(api_key, version, corr, self.client_id, body)
            else:
                frame = [encode_request(api_key, version, corr, self.client_id, body)]
            transport = self._transport
            assert transport is not None
            if not expect_response:
                transport.writelines(frame)
                held = False
                self._slots.release()  # nothing comes back: the slot is free once written
                await self._drain()
                return None
            fut = asyncio.get_running_loop().create_future()
            timeout = (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
            timer = asyncio.get_running_loop().call_later(timeout, self._on_timeout, corr, timeout)
            self._in_flight.append((corr, api_key, version, fut, timer))
            transport.writelines(frame)
            if self._protocol is not None and self._protocol.paused:
                await self._drain()
        except BaseException:
            if held:
                self._slots.release()
            raise
        try:
            raw = await fut
        finally:
            self._slots.release()
        return self._check(api_key, version, raw)

    async def _drain(self) -> None:
        p = self._protocol
        if p is None or not p.paused:
            return
        if p.drain_waiter is None or p.drain_waiter.done():
            p.drain_waiter = asyncio.get_running_loop().create_future()
        await p.drain_waiter
        if self._closed_exc is not None:
            raise self._raise_closed()

    def _check(self, api_key: int, version: int, raw: Body) -> Body:
        spec = API_SPECS[api_key]
        code = raw.get("error_code")
        if (
            type(code) is int
            and code != 0
            and set(raw) <= {"error_code", "error_message"}
            and not any(f.name == "error_code" for f in spec.response.fields)
        ):  # a whole-request error (authorization, ...) of an API whose answer has no code
            raise error_for_code(code)(raw.get("error_message") or f"{spec.name} to {self.address}")
        try:
            return spec.check_response(raw, version)
        except InvalidRequestError as exc:
            if type(code) is int and code != 0:
                message = raw.get("error_message") or f"{spec.name} to {self.address}"
                raise error_for_code(code)(message) from None
            raise InvalidRequestError(
                f"malformed {spec.name} response from {self.address}: {exc}"
            ) from None

    def _raise_closed(self) -> Exception:
        exc = self._closed_exc
        if isinstance(exc, ConnectionFailedError | ClientClosedError):
            return type(exc)(str(exc))
        return ConnectionFailedError(f"connection to {self.address} closed: {exc}")

    # -- protocol callbacks --------------------------------------------------------------------

    def _on_data(self, nbytes: int) -> None:
        try:
            payloads = self._reader.buffer_updated(nbytes)
            for payload in payloads:
                corr, body = decode_response(payload)
                if not self._in_flight:
                    raise InvalidRequestError(f"unexpected response (correlation id {corr})")
                exp, _key, _ver, fut, timer = self._in_flight.popleft()
                if corr != exp:
                    raise InvalidRequestError(
                        f"correlation id {corr} does not match the oldest request ({exp})"
                    )
                timer.cancel()
                throttle = body.get("throttle_time_ms") if type(body) is dict else None
                if type(throttle) is int and throttle > 0:
                    until = asyncio.get_running_loop().time() + throttle / 1000.0
                    self.throttled_until = max(self.throttled_until, until)
                if not fut.done():
                    fut.set_result(body)
        except InvalidRequestError as exc:
            log.warning("protocol error from %s: %s; closing", self.address, exc)
            self.close(ConnectionFailedError(f"protocol error from {self.address}: {exc}"))

    def _on_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if self._closed_exc is None:
            reason = f": {exc}" if exc else " by the broker"
            self._closed_exc = ConnectionFailedError(f"connection to {self.address} lost{reason}")
            log.info("connection to %s (node %s) lost%s", self.address, self.node_id, reason)
        self._fail_all(self._closed_exc)

    def _on_timeout(self, corr: int, timeout: float) -> None:
        name = next(
            (API_SPECS[k].name for c, k, _v, _f, _t in self._in_flight if c == corr), "request"
        )
        err = GregorTimeoutError(
            f"{name} to {self.address} got no response within {timeout * 1000:.0f} ms"
        )
        for c, _k, _v, fut, _t in self._in_flight:
            if c == corr and not fut.done():
                fut.set_exception(err)
        log.warning("%s; closing the connection", err)
        self.close(ConnectionFailedError(f"connection to {self.address} closed after a timeout"))

    def _fail_all(self, exc: Exception) -> None:
        while self._in_flight:
            _c, _k, _v, fut, timer = self._in_flight.popleft()
            timer.cancel()
            if not fut.done():
                fut.set_exception(self._raise_closed() if exc is self._closed_exc else exc)
