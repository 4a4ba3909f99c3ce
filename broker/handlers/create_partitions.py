"""CreatePartitions (37): grow topics to `count` partitions in total. Forwarded to the controller
(combined mode: the local quorum on its own thread), which answers once the new partition records
are committed; the metadata publisher then creates the new logs (`ReplicaManager.apply_metadata`).
The response is sent from the future's callback, so no I/O thread waits on the controller.

A topic named twice in one request is refused with INVALID_REQUEST for each occurrence (Kafka's
rule); the controller answers UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (count not above the
current number), INVALID_REPLICA_ASSIGNMENT for the rest.
"""

from __future__ import annotations

import collections

from broker.handlers.base import RequestContext, handler
from broker.handlers.forward import respond_when_committed
from broker.security.access import check, enabled
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation, ResourceType


def _result(name: str, code: ErrorCode | int, message: str | None) -> Body:
    return {"name": name, "error_code": int(code), "error_message": message}


@handler(ApiKey.CREATE_PARTITIONS, access="ALTER on TOPIC")
def handle(ctx: RequestContext, body: Body) -> Body | None:
    services = ctx.services
    counts = collections.Counter(t["name"] for t in body["topics"])
    results: list[Body | None] = []
    forward: list[Body] = []
    authz = enabled(ctx)
    for t in body["topics"]:
        if counts[t["name"]] > 1:
            results.append(
                _result(t["name"], ErrorCode.INVALID_REQUEST, "topic named twice in the request")
            )
            continue
        denied = check(ctx, AclOperation.ALTER, ResourceType.TOPIC, t["name"]) if authz else None
        if denied is not None:  # ALTER on the topic
            results.append(_result(t["name"], denied[0], denied[1]))
            continue
        results.append(None)
        assignments = t["assignments"]
        forward.append(
            {
                "name": t["name"],
                "count": t["count"],
                "assignments": None
                if assignments is None
                else [list(a["broker_ids"]) for a in assignments],
            }
        )
    if not forward:
        return {"results": results, "throttle_time_ms": 0}
    respond_when_committed(
        ctx,
        services.controller.create_partitions(forward, bool(body["validate_only"])),
        results,
        [t["name"] for t in forward],
        _result,
        lambda entries: {"results": entries, "throttle_time_ms": 0},
        "create_partitions",
    )
    return None
