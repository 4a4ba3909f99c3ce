"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), forwarded to the
controller (combined mode: the local quorum on its own thread), which answers the first once
the PartitionChange records are committed. The response is sent from the future's callback,
so no I/O thread waits on the controller. A controller failure (no active controller, a
timeout) becomes the whole request's error, and each partition's for AlterPartitionReassignments.
"""

from __future__ import annotations

import concurrent.futures
import logging

from broker.handlers.base import RequestContext, handler
from broker.security.access import require
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.apis.reassignments import flatten_topic_partitions
from client.protocol.body import Body
from client.security.acl import AclOperation, ResourceType
from controller.results import OngoingTopicReassignment, ReassignmentTopicResult

log = logging.getLogger(__name__)


def _failure(exc: BaseException) -> tuple[int, str]:
    log.warning("reassignment request failed in the controller: %s", exc)
    return int(getattr(exc, "code", ErrorCode.UNKNOWN_SERVER_ERROR)), str(exc)


@handler(ApiKey.ALTER_PARTITION_REASSIGNMENTS, access="ALTER on CLUSTER")
def handle_alter(ctx: RequestContext, body: Body) -> Body | None:
    require(ctx, AclOperation.ALTER, ResourceType.CLUSTER)
    services = ctx.services
    topics = [
        {
            "name": t["name"],
            "partitions": [
                {"partition_index": p["partition_index"], "replicas": p["replicas"]}
                for p in t["partitions"]
            ],
        }
        for t in body["topics"]
    ]

    def done(f: concurrent.futures.Future[list[ReassignmentTopicResult]]) -> None:
        exc = f.exception()
        if exc is None:
            ctx.respond(
                {
                    "throttle_time_ms": 0,
                    "error_code": 0,
                    "error_message": None,
                    "responses": f.result(),
                }
            )
            return
        code, msg = _failure(exc)
        responses = [
            {
                "name": t["name"],
                "partitions": [
                    {
                        "partition_index": p["partition_index"],
                        "error_code": code,
                        "error_message": msg,
                    }
                    for p in t["partitions"]
                ],
            }
            for t in topics
        ]
        ctx.respond(
            {
                "throttle_time_ms": 0,
                "error_code": code,
                "error_message": msg,
                "responses": responses,
            }
        )

    services.controller.alter_partition_reassignments(topics).add_done_callback(done)
    return None


@handler(ApiKey.LIST_PARTITION_REASSIGNMENTS, access="DESCRIBE on CLUSTER")
def handle_list(ctx: RequestContext, body: Body) -> Body | None:
    require(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER)
    services = ctx.services
    partitions = flatten_topic_partitions(body["topics"])

    def done(f: concurrent.futures.Future[list[OngoingTopicReassignment]]) -> None:
        exc = f.exception()
        if exc is None:
            ctx.respond(
                {
                    "throttle_time_ms": 0,
                    "error_code": 0,
                    "error_message": None,
                    "topics": f.result(),
                }
            )
            return
        code, msg = _failure(exc)
        ctx.respond({"throttle_time_ms": 0, "error_code": code, "error_message": msg, "topics": []})

    services.controller.list_partition_reassignments(partitions).add_done_callback(done)
    return None
