"""DeleteTopics (20): forwarded to the controller (answers once committed); the metadata
publisher then stops the replicas and deletes the logs. Refused with TOPIC_DELETION_DISABLED
when delete.topic.enable is false."""

from __future__ import annotations

import logging
from typing import Any

from broker.handlers.base import RequestContext, handler
from client.errors import ErrorCode
from client.protocol import ApiKey

log = logging.getLogger(__name__)


@handler(ApiKey.DELETE_TOPICS)
def handle(ctx: RequestContext, body: dict) -> dict | None:
    services: Any = ctx.services
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
    fut = services.controller.delete_topics(names)

    def done(f: Any) -> None:
        exc = f.exception()
        if exc is not None:
            code = int(getattr(exc, "code", ErrorCode.UNKNOWN_SERVER_ERROR))
            log.warning("delete_topics failed in the controller: %s", exc)
            responses = [{"name": n, "error_code": code, "error_message": str(exc)} for n in names]
        else:
            responses = f.result()
        ctx.respond({"responses": responses, "throttle_time_ms": 0})

    fut.add_done_callback(done)
    return None
