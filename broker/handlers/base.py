"""What every request handler needs: `RequestContext`, the `@handler(ApiKey.X)` registry.

A handler is

    @handler(ApiKey.METADATA, access="DESCRIBE on TOPIC")
    def handle(ctx: RequestContext, body: dict) -> dict | None: ...

`body` has passed the API's schema check (defaults filled in). Return the response body, or
None when the response comes later: then the handler (or the delayed operation it parked) calls
`ctx.respond(body)` exactly once, from any thread, or `ctx.no_response()` (acks=0 produce).
Raise a BrokerResponseError for a whole-request error: the dispatcher turns it into
`{"error_code": code, "error_message": msg}`. Anything else becomes UNKNOWN_SERVER_ERROR with a
logged traceback; the broker keeps serving.

Threads: handlers run on I/O threads; `respond`/`no_response`/`close_connection` on any thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.network.request import Request
from client.errors import ErrorCode, InvalidRequestError
from client.protocol.body import Body
from client.protocol.framing import encode_response
from client.protocol.schema import API_SPECS

if TYPE_CHECKING:
    from broker.services import Services

log = logging.getLogger(__name__)

Handler = Callable[["RequestContext", Body], "Body | None"]
HANDLERS: dict[int, Handler] = {}
# api key -> what the authorizer checks for it (docs/security.md, "What each API needs"): the
# handler makes the checks (broker/security/access.py); this says which, for the docs and the
# ACL matrix test, which enumerates every API here
ACCESS: dict[int, str] = {}


def handler(api_key: int, access: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of `api_key` (once per key); `access`:
    the operations and resource types it checks ("none" for the handshake APIs)."""

    def register(fn: Handler) -> Handler:
        assert int(api_key) not in HANDLERS, f"two handlers for api key {int(api_key)}"
        HANDLERS[int(api_key)] = fn
        ACCESS[int(api_key)] = access
        return fn

    return register


class RequestContext:
    """One request as a handler sees it. `services` is the node's services object (see
    broker/node.py): config, node_id, replica_manager, metadata, purgatories, ..."""

    __slots__ = (
        "request",
        "services",
        "api_key",
        "api_version",
        "correlation_id",
        "client_id",
        "_done",
        "_lock",
    )

    def __init__(self, request: Request, services: Services) -> None:
        self.request = request
        self.services = services
        self.api_key = request.api_key
        self.api_version = request.api_version
        self.correlation_id = request.correlation_id
        self.client_id = request.client_id
        self._done = False
        self._lock = threading.Lock()

    @property
    def connection_id(self) -> str:
        return self.request.connection_id

    @property
    def client_host(self) -> str:
        """The client's address as the broker saw it, as Kafka shows it: `/127.0.0.1`."""
        return self.request.client_host

    @property
    def listener(self) -> str:
        """The name of the listener the request came in on (broker/listeners.py)."""
        return getattr(self.request.connection, "listener", "PLAINTEXT")

    def advertised(self) -> tuple[str, int]:
        """This broker's advertised address on the request's listener."""
        services = self.services
        advertised_for = getattr(services, "advertised_for", None)
        return services.advertised if advertised_for is None else advertised_for(self.listener)

    @property
    def responded(self) -> bool:
        return self._done

    def _claim(self, what: str) -> None:
        with self._lock:
            if self._done:
                raise RuntimeError(f"{what}: request {self.request!r} already answered")
            self._done = True

    def respond(self, body: Body) -> None:
        """Send `body` (checked against the API's response schema, defaults filled). Once."""
        spec = API_SPECS.get(self.api_key)
        if spec is not None:
            try:
                body = spec.check_response(body, self.api_version)
            except InvalidRequestError as exc:
                # A handler bug: say so loudly, and still answer the client.
                log.error(
                    "%s v%d response does not match its schema: %s",
                    spec.name,
                    self.api_version,
                    exc.message,
                )
                body = error_body(ErrorCode.UNKNOWN_SERVER_ERROR, "malformed response")
        self._send(body, "respond")

    def respond_error(self, code: int, message: str | None = None) -> None:
        """Send a whole-request error body `{"error_code": code, "error_message": message}`."""
        self._send(error_body(code, message), "respond_error")

    def respond_raw(self, body: Body) -> None:
        """Send `body` without the schema check (the dispatcher's own error bodies)."""
        self._send(body, "respond_raw")

    def _send(self, body: Body, what: str) -> None:
        try:
            frame = encode_response(self.correlation_id, body)
            quotas = getattr(self.services, "quotas", None)
            if quotas is not None:  # client quotas (broker/quota/manager.py)
                wait = quotas.throttle(self.request, len(frame))
                if wait:
                    self.request.throttle_ms = wait
                    if "throttle_time_ms" in body:
                        body = {**body, "throttle_time_ms": wait}
                        frame = encode_response(self.correlation_id, body)
        except Exception:
            log.exception("cannot encode the response to %r", self.request)
            frame = encode_response(
                self.correlation_id,
                error_body(ErrorCode.UNKNOWN_SERVER_ERROR, "response could not be encoded"),
            )
        self._claim(what)
        self.request.complete(frame)
        errors = getattr(self.services, "metrics", None)
        if errors is not None:  # error codes by API (broker/request_metrics.py ErrorCounter);
            errors.count(self.api_key, body)  # the latency is recorded once the answer is sent

    def respond_then_close(self, body: Body, reason: str, delay_s: float) -> None:
        """Send `body` after `delay_s`, then close the connection logging `reason` (a failed
        authentication, answered late to slow guessing). Once."""
        spec = API_SPECS.get(self.api_key)
        if spec is not None:
            body = spec.check_response(body, self.api_version)
        frame = encode_response(self.correlation_id, body)
        self._claim("respond_then_close")
        self.request.complete_then_close(frame, reason, delay_s)
        errors = getattr(self.services, "metrics", None)
        if errors is not None:  # error codes by API (broker/request_metrics.py ErrorCounter)
            errors.count(self.api_key, body)

    def no_response(self) -> None:
        """Write nothing and unmute the connection (acks=0 produce; over a quota: after the
        throttle time, with no answer to carry it). Once."""
        quotas = getattr(self.services, "quotas", None)
        if quotas is not None:
            self.request.throttle_ms = quotas.throttle(self.request, 0)
        self._claim("no_response")
        self.request.complete(None)

    def close_connection(self, reason: str) -> None:
        """Write nothing and close the connection, logging `reason`. Counts as the answer."""
        self._claim("close_connection")
        self.request.fail_close(reason)


def error_body(code: int, message: str | None = None) -> Body:
    code = int(code)
    try:
        default = ErrorCode(code).name
    except ValueError:
        default = f"error {code}"
    return {"error_code": code, "error_message": message or default}


def by_topic(results: list[Body]) -> list[Body]:
    """Per-partition results carrying a "topic" key, regrouped into the response's nesting
    `[{"name": topic, "partitions": [result without "topic", ...]}, ...]` (first-seen order)."""
    topics: list[Body] = []
    by_name: dict[str, Body] = {}
    for r in results:
        name = r["topic"]
        t = by_name.get(name)
        if t is None:
            t = by_name[name] = {"name": name, "partitions": []}
            topics.append(t)
        p = r.copy()  # (a C copy and one delete: a fetch answer regroups hundreds)
        del p["topic"]
        t["partitions"].append(p)
    return topics
