"""CreateTopics (19): validate names like Kafka (legal characters [a-zA-Z0-9._-], at most 249,
not "." or ".."), then forward to the controller (combined mode: the local QuorumController on
its own thread), which answers once the records are committed. The response is sent from the
future's callback, so no I/O thread waits on the controller.
"""

from __future__ import annotations

import re

from broker.handlers.base import RequestContext, handler
from broker.handlers.forward import respond_when_committed
from broker.security.access import check, enabled, quietly_allowed
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation, ResourceType

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249


def topic_name_error(name: str) -> str | None:
    """Why `name` is not a legal topic name, or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL.match(name):
        return f"topic name {name!r} has characters outside [a-zA-Z0-9._-]"
    return None


def _error(name: str, code: int, message: str) -> Body:
    return {
        "name": name,
        "error_code": int(code),
        "error_message": message,
        "num_partitions": -1,
        "replication_factor": -1,
    }


@handler(ApiKey.CREATE_TOPICS, access="CREATE on CLUSTER or TOPIC")
def handle(ctx: RequestContext, body: Body) -> Body | None:
    services = ctx.services
    results: list[Body | None] = []
    forward: list[Body] = []
    authz = enabled(ctx)
    on_cluster = authz and quietly_allowed(ctx, AclOperation.CREATE, ResourceType.CLUSTER)
    for t in body["topics"]:
        why = topic_name_error(t["name"])
        denied = (
            check(ctx, AclOperation.CREATE, ResourceType.TOPIC, t["name"])
            if authz and not on_cluster
            else None
        )
        if denied is not None:  # CREATE on the cluster or on the topic
            results.append(_error(t["name"], denied[0], denied[1]))
        elif why is not None:
            results.append(_error(t["name"], ErrorCode.INVALID_TOPIC_EXCEPTION, why))
        else:
            results.append(None)
            forward.append(t)
    if not forward:
        return {"topics": results, "throttle_time_ms": 0}
    respond_when_committed(
        ctx,
        services.controller.create_topics(forward, bool(body["validate_only"])),
        results,
        [t["name"] for t in forward],
        _error,
        lambda topics: {"topics": topics, "throttle_time_ms": 0},
        "create_topics",
    )
    return None
