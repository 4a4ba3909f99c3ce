"""DescribeQuorum (55) on a combined server: the one-voter metadata quorum of this process (its
leader, term, high watermark and the voter's log end offset), so `gregor quorum describe
--bootstrap-controller HOST:PORT` works against `gregor server`'s port. Answered from the
controller loop's future callback; no I/O thread waits."""

from __future__ import annotations

import logging
from typing import Any

from broker.handlers.base import RequestContext, handler
from client.errors import ErrorCode
from client.protocol import ApiKey

log = logging.getLogger(__name__)


@handler(ApiKey.DESCRIBE_QUORUM)
def handle(ctx: RequestContext, body: dict) -> dict | None:
    services: Any = ctx.services
    describe = getattr(services.controller, "describe_quorum", None)
    if describe is None:  # not a combined node: the quorum lives in controller processes
        ctx.respond_error(ErrorCode.UNSUPPORTED_VERSION, "no controller in this process")
        return None
    host, port = services.advertised
    fut = describe(f"{host}:{port}")

    def done(f: Any) -> None:
        exc = f.exception()
        if exc is not None:
            log.warning("describe_quorum failed: %s", exc)
            ctx.respond_error(getattr(exc, "code", ErrorCode.UNKNOWN_SERVER_ERROR), str(exc))
        else:
            ctx.respond(f.result())

    fut.add_done_callback(done)
    return None
