"""Consumer group APIs, answered by the group coordinator (broker/group/): FindCoordinator (10),
OffsetCommit (8), OffsetFetch (9), ListGroups (16), ConsumerGroupHeartbeat (68),
ConsumerGroupDescribe (69). A GroupError becomes the API's error code (per partition for
OffsetCommit, per group for ConsumerGroupDescribe, whole-request otherwise). OffsetCommit is
answered later, from the flusher/timer thread, once its record is replicated.
"""

from __future__ import annotations

from typing import Any

from broker.group import GroupError
from broker.handlers.base import RequestContext, handler
from client.errors import ErrorCode
from client.protocol import ApiKey


@handler(ApiKey.FIND_COORDINATOR)
def find_coordinator(ctx: RequestContext, body: dict) -> dict:
    services: Any = ctx.services
    out = []
    for key in body["coordinator_keys"]:
        if body["key_type"] != 0:
            code, node, host, port, msg = (int(ErrorCode.INVALID_REQUEST), -1, "", -1,
                                           "only group coordinators (key_type 0) exist")  # fmt: skip
        elif not key:
            code, node, host, port, msg = (int(ErrorCode.INVALID_GROUP_ID), -1, "", -1,
                                           "group id is empty")  # fmt: skip
        else:
            code, node, host, port, msg = services.group_coordinator.find(key, services.controller)
        out.append({"key": key, "node_id": node, "host": host, "port": port,
                    "error_code": code, "error_message": msg})  # fmt: skip
    return {"coordinators": out}


@handler(ApiKey.CONSUMER_GROUP_HEARTBEAT)
def consumer_group_heartbeat(ctx: RequestContext, body: dict) -> dict:
    services: Any = ctx.services
    try:
        return services.group_coordinator.heartbeat(body, ctx.client_id, ctx.connection_id)
    except GroupError as exc:
        return {"error_code": exc.code, "error_message": exc.message}


@handler(ApiKey.OFFSET_COMMIT)
def offset_commit(ctx: RequestContext, body: dict) -> None:
    ctx.services.group_coordinator.commit(body, ctx.respond)
    return None


@handler(ApiKey.OFFSET_FETCH)
def offset_fetch(ctx: RequestContext, body: dict) -> dict:
    services: Any = ctx.services
    try:
        topics = services.group_coordinator.fetch_offsets(body["group_id"], body["topics"])
    except GroupError as exc:
        return {"error_code": exc.code, "error_message": exc.message, "topics": []}
    return {"error_code": 0, "topics": topics}


@handler(ApiKey.LIST_GROUPS)
def list_groups(ctx: RequestContext, body: dict) -> dict:
    groups = ctx.services.group_coordinator.list_groups()
    wanted = {s.lower() for s in body["states_filter"]}
    if wanted:
        groups = [g for g in groups if g["group_state"] in wanted]
    return {"error_code": 0, "groups": groups}


@handler(ApiKey.CONSUMER_GROUP_DESCRIBE)
def consumer_group_describe(ctx: RequestContext, body: dict) -> dict:
    services: Any = ctx.services
    out = []
    for gid in body["group_ids"]:
        try:
            out.append(services.group_coordinator.describe(gid))
        except GroupError as exc:
            out.append({"error_code": exc.code, "error_message": exc.message, "group_id": gid})
    return {"groups": out}
