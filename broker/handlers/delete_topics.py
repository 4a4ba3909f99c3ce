"""DeleteTopics (20): forwarded to the controller (answers once committed); the metadata
publisher then stops the replicas and deletes the logs. Refused with TOPIC_DELETION_DISABLED
when delete.topic.enable is false."""

from __future__ import annotations

from broker.handlers.base import RequestContext, handler
from broker.handlers.forward import respond_when_committed
from client.errors import ErrorCode
from client.protocol import ApiKey


@handler(ApiKey.DELETE_TOPICS)
def handle(ctx: RequestContext, body: dict) -> dict | None:
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
    respond_when_committed(
        ctx,
        services.controller.delete_topics(names),
        [None] * len(names),
        names,
        lambda name, code, message: {"name": name, "error_code": code, "error_message": message},
        lambda responses: {"responses": responses, "throttle_time_ms": 0},
        "delete_topics",
    )
    return None
