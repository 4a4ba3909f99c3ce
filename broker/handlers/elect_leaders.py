"""ElectLeaders (43): preferred or unclean leader elections, forwarded to the controller
(combined mode: the local quorum on its own thread), which answers once the PartitionChange
records are committed. The response is sent from the future's callback, so no I/O thread waits
on the controller.

An unknown election type is refused here with INVALID_REQUEST; a controller failure (no active
controller, a timeout) becomes the whole request's error and each requested partition's.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Mapping, Sequence

from broker.handlers.base import RequestContext, handler
from broker.security.access import require
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.apis.admin import (
    ELECTION_PREFERRED,
    ELECTION_UNCLEAN,
    group_election_results,
)
from client.protocol.body import Body
from client.security.acl import AclOperation, ResourceType
from controller.results import ElectionResult

log = logging.getLogger(__name__)


def _body(code: int, results: Sequence[Mapping[str, object]]) -> Body:
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "replica_election_results": group_election_results(results),
    }


@handler(ApiKey.ELECT_LEADERS, access="ALTER on CLUSTER")
def handle(ctx: RequestContext, body: Body) -> Body | None:
    require(ctx, AclOperation.ALTER, ResourceType.CLUSTER)
    services = ctx.services
    tps = body["topic_partitions"]
    partitions = None if tps is None else [(t["topic"], p) for t in tps for p in t["partitions"]]

    def failed(code: int, message: str) -> Body:
        entries = [
            {"topic": t, "partition": p, "error_code": code, "error_message": message}
            for t, p in partitions or []
        ]
        return _body(code, entries)

    election_type = body["election_type"]
    if election_type not in (ELECTION_PREFERRED, ELECTION_UNCLEAN):
        return failed(
            int(ErrorCode.INVALID_REQUEST),
            f"unknown election type {election_type} (0 preferred, 1 unclean)",
        )

    def done(f: concurrent.futures.Future[list[ElectionResult]]) -> None:
        exc = f.exception()
        if exc is None:
            ctx.respond(_body(0, f.result()))
            return
        code = int(getattr(exc, "code", ErrorCode.UNKNOWN_SERVER_ERROR))
        log.warning("elect_leaders failed in the controller: %s", exc)
        ctx.respond(failed(code, str(exc)))

    services.controller.elect_leaders(election_type, partitions).add_done_callback(done)
    return None
