"""DescribeQuorum (55) on a broker: the metadata quorum through the ControllerChannel (a
combined server's own one-voter quorum, or the answer of a remote quorum's controller), so
`gregor quorum describe` and `gregor cluster status` work against a broker's port. Answered from
the channel future's callback; no I/O thread waits."""

from __future__ import annotations

import logging
from typing import Any

from broker.handlers.base import RequestContext, handler
from broker.security.access import require
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation, ResourceType

log = logging.getLogger(__name__)


@handler(ApiKey.DESCRIBE_QUORUM, access="DESCRIBE on CLUSTER")
def handle(ctx: RequestContext, body: Body) -> Body | None:
    require(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER)
    services = ctx.services
    if services.controller is None:  # a node with no link to any quorum (tests' network-only)
        ctx.respond_error(ErrorCode.UNSUPPORTED_VERSION, "no controller quorum behind this node")
        return None
    host, port = ctx.advertised()
    fut = services.controller.describe_quorum(f"{host}:{port}")

    def done(f: Any) -> None:
        exc = f.exception()
        if exc is not None:
            log.warning("describe_quorum failed: %s", exc)
            ctx.respond_error(getattr(exc, "code", ErrorCode.UNKNOWN_SERVER_ERROR), str(exc))
        else:
            ctx.respond(f.result())

    fut.add_done_callback(done)
    return None
