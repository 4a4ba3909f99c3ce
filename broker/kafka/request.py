"""A Kafka request on its way through Gregor's request path (network thread → request
channel → I/O thread), and the context its translation answers through.

`decode_request` runs on the network thread (Connection.decode for a KAFKA listener): it reads
only the fixed header fields; the body stays raw bytes until an I/O thread decodes it with kio
(broker/kafka/codec.py), so the network threads do no schema work for either protocol.

`KafkaContext` is the Kafka side of one request: `respond(dict)` builds the API's kio response
entity for the request's version, encodes and sends it (once). `NativeCall` is the Gregor side:
a RequestContext handed to one of the native handlers (broker/handlers/), whose answers, a
native response dict or an error, come back to a callback instead of going to the socket.

Threads: `decode_request` on a network thread; the rest on any thread (answers may come from
a flusher or timer thread when a native handler parks a delayed operation).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.handlers.base import RequestContext, error_body
from broker.kafka.classic_groups import ClassicGroups
from broker.kafka.codec import MalformedKafkaRequest, build, encode_response, peek_header
from broker.network.request import Request
from client.config.loader import setting
from client.errors import ErrorCode, InvalidRequestError
from client.protocol.body import Body
from client.protocol.framing import MalformedFrameError
from client.protocol.schema import API_SPECS

if TYPE_CHECKING:
    from broker.network.connection import Connection
    from broker.services import Services

log = logging.getLogger(__name__)


class KafkaRequest(Request):
    """`payload` is the whole request (header included), decoded on the I/O thread; `body`,
    the native map, stays empty."""

    protocol = "KAFKA"
    __slots__ = ("payload",)

    def __init__(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int,
        client_id: str | None,
        payload: bytes | bytearray,
        connection: Connection,
    ) -> None:
        super().__init__(
            api_key, api_version, correlation_id, client_id, {}, len(payload), connection
        )
        self.payload = payload


def decode_request(payload: bytes | bytearray, connection: Connection) -> Request:
    """Connection.decode for KAFKA listeners: MalformedFrameError closes the connection."""
    try:
        api_key, api_version, correlation_id, client_id = peek_header(payload)
    except MalformedKafkaRequest as exc:
        raise MalformedFrameError(f"Kafka request header: {exc}") from None
    # the payload stays raw until an I/O thread decodes it
    return KafkaRequest(api_key, api_version, correlation_id, client_id, payload, connection)


class KafkaState:
    """What the Kafka listener keeps between requests: the classic groups, made on first use
    with the node's timer (its produce purgatory's; the node shuts it down). Any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: ClassicGroups | None = None

    def close(self) -> None:
        """Shutdown: the classic groups answer their waiting requests (NOT_COORDINATOR)."""
        with self._lock:
            groups = self._groups
        if groups is not None:
            groups.close()

    def classic_groups(self, services: Services) -> ClassicGroups:
        with self._lock:
            if self._groups is None:
                delay = setting(
                    getattr(services, "config", None), "group_initial_rebalance_delay_ms", 0
                )
                self._groups = ClassicGroups(
                    services.produce_purgatory.timer, initial_delay_ms=int(delay)
                )
            return self._groups


class KafkaContext:
    """One Kafka request being answered. `respond`, `no_response` and `close` claim the answer:
    exactly one of them, once (a second is a bug, logged and ignored)."""

    def __init__(self, request: Request, services: Services, state: KafkaState) -> None:
        self.request = request
        self.services = services
        self.state = state
        self.api_key = request.api_key
        self.api_version = request.api_version
        self._done = False
        self._lock = threading.Lock()

    @property
    def responded(self) -> bool:
        return self._done

    def _claim(self) -> bool:
        with self._lock:
            if self._done:
                log.error("Kafka request %r answered twice; ignoring the second", self.request)
                return False
            self._done = True
            return True

    def respond(self, data: Body, error_code: int = 0) -> None:
        """Send `data` (Kafka's field names, any version's) as this request's response."""
        from broker.kafka.codec import response_class

        cls = response_class(self.api_key, self.api_version)
        frame = encode_response(
            self.api_key, self.api_version, self.request.correlation_id, build(cls, data)
        )
        quotas = getattr(self.services, "quotas", None)
        if quotas is not None:  # client quotas (broker/quota/manager.py)
            wait = quotas.throttle(self.request, len(frame))
            if wait:
                self.request.throttle_ms = wait
                if "throttle_time" in data:
                    data = {**data, "throttle_time": wait}
                    frame = encode_response(
                        self.api_key,
                        self.api_version,
                        self.request.correlation_id,
                        build(cls, data),
                    )
        if self._claim():
            self.request.complete(frame)
            self._count_errors(data, error_code)

    def respond_then_close(self, data: Body, reason: str, delay_s: float) -> None:
        """Send `data` after `delay_s`, then close the connection logging `reason` (a failed
        authentication, answered late to slow guessing)."""
        from broker.kafka.codec import response_class

        cls = response_class(self.api_key, self.api_version)
        frame = encode_response(
            self.api_key, self.api_version, self.request.correlation_id, build(cls, data)
        )
        if self._claim():
            self.request.complete_then_close(frame, reason, delay_s)
            self._count_errors(data, 0)

    def respond_frame(self, frame: bytes) -> None:
        if self._claim():
            self.request.complete(frame)

    def no_response(self) -> None:
        quotas = getattr(self.services, "quotas", None)
        if quotas is not None:  # acks=0 over a quota: muted all the same
            self.request.throttle_ms = quotas.throttle(self.request, 0)
        if self._claim():
            self.request.complete(None)

    def close(self, reason: str) -> None:
        if self._claim():
            self.request.fail_close(reason)

    def _count_errors(self, data: Body, error_code: int) -> None:
        """Error codes by API, as native answers are counted (broker/request_metrics.py; the
        latency is recorded by the network layer once the answer is sent, for both kinds)."""
        errors = getattr(self.services, "metrics", None)
        if errors is not None:
            errors.count(
                self.api_key, data if "error_code" in data else {**data, "error_code": error_code}
            )

    def call_native(self, api_key: int, body: Body, on_answer: Callable[[Body], None]) -> None:
        """Run Gregor's own handler for `api_key` on `body` (checked against its schema, at its
        newest version); `on_answer(response dict)` gets its answer, now or later, on whatever
        thread answers. A native whole-request error arrives as {error_code, error_message};
        an acks=0 produce's silence as no_response here; a native close closes this one."""
        from broker.handlers import HANDLERS

        spec = API_SPECS[api_key]
        call = NativeCall(self, api_key, spec.max_version, on_answer)
        try:
            checked = spec.check_request(body, spec.max_version)
        except InvalidRequestError as exc:  # our translation's bug, not the client's
            raise AssertionError(f"native {spec.name} body: {exc.message}") from exc
        try:
            result = HANDLERS[api_key](call, checked)
        except Exception as exc:
            code = getattr(exc, "code", None)
            if code is None:
                raise
            call.respond_raw(error_body(int(code), getattr(exc, "message", str(exc))))
            return
        if result is not None:
            call.respond(result)


class NativeCall(RequestContext):
    """The RequestContext a native handler answers through on behalf of a Kafka request."""

    __slots__ = ("kafka", "on_answer")

    def __init__(
        self,
        kafka: KafkaContext,
        api_key: int,
        api_version: int,
        on_answer: Callable[[Body], None],
    ) -> None:
        super().__init__(kafka.request, kafka.services)
        self.api_key = api_key
        self.api_version = api_version
        self.kafka = kafka
        self.on_answer = on_answer

    def _send(self, body: Body, what: str) -> None:
        self._claim(what)
        try:
            self.on_answer(body)
        except Exception:
            log.exception("Kafka translation of a native answer failed for %r", self.request)
            if not self.kafka.responded:
                self.kafka.close("internal error translating the answer")

    def no_response(self) -> None:
        self._claim("no_response")
        self.kafka.no_response()

    def close_connection(self, reason: str) -> None:
        self._claim("close_connection")
        self.kafka.close(reason)


def whole_error(answer: Body) -> int:
    """The whole-request error code of a native answer (0 when it is a normal answer)."""
    if set(answer) <= {"error_code", "error_message"}:
        return int(answer.get("error_code", ErrorCode.UNKNOWN_SERVER_ERROR))
    return 0
