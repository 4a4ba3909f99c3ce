"""DeleteTopics (20): forwarded to the controller (answers once committed); the metadata
publisher then stops the replicas and deletes the logs. Refused with TOPIC_DELETION_DISABLED
when delete.topic.enable is false."""

from __future__ import annotations

from broker.handlers.base import RequestContext, handler
from broker.handlers.forward import respond_when_committed
from broker.security.access import check, enabled
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation, ResourceType


@handler(ApiKey.DELETE_TOPICS, access="DELETE on TOPIC")
def handle(ctx: RequestContext, body: Body) -> Body | None:
    services = ctx.services
    names = list(body["topic_names"])
    if not bool(getattr(services.config, "delete_topic_enable", True)):
        return {
            "responses": [
                {
                    "name": n,
                    "error_code": int(ErrorCode.TOPIC_DELETION_DISABLED),
                    "error_message": "delete.topic.enable is false",
                }
                for n in names
            ],
            "throttle_time_ms": 0,
        }
    if not names:
        return {"responses": [], "throttle_time_ms": 0}
    local: list[Body | None] = []
    for n in names:  # DELETE on the topic
        denied = check(ctx, AclOperation.DELETE, ResourceType.TOPIC, n) if enabled(ctx) else None
        local.append(
            None
            if denied is None
            else {"name": n, "error_code": denied[0], "error_message": denied[1]}
        )
    forward = [n for n, r in zip(names, local, strict=True) if r is None]
    if not forward:
        return {"responses": local, "throttle_time_ms": 0}
    respond_when_committed(
        ctx,
        services.controller.delete_topics(forward),
        local,
        forward,
        lambda name, code, message: {"name": name, "error_code": code, "error_message": message},
        lambda responses: {"responses": responses, "throttle_time_ms": 0},
        "delete_topics",
    )
    return None
