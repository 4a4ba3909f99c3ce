"""Consumer group APIs, answered by the group coordinator (broker/group/): FindCoordinator (10),
OffsetCommit (8), OffsetFetch (9), ListGroups (16), DeleteGroups (42), OffsetDelete (47),
ConsumerGroupHeartbeat (68), ConsumerGroupDescribe (69). A GroupError becomes the API's error code (per partition for
OffsetCommit, per group for ConsumerGroupDescribe, whole-request otherwise). OffsetCommit,
DeleteGroups and OffsetDelete are answered later, from the flusher/timer thread, once their
records are replicated.
"""

from __future__ import annotations

import functools
import threading

from broker.group import GroupError
from broker.handlers.base import RequestContext, handler
from client.errors import ErrorCode
from client.protocol import ApiKey


@handler(ApiKey.FIND_COORDINATOR)
def find_coordinator(ctx: RequestContext, body: dict) -> dict:
    services = ctx.services
    out = []
    msg: str | None
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
    services = ctx.services
    try:
        return services.group_coordinator.heartbeat(body, ctx.client_id, ctx.client_host)
    except GroupError as exc:
        return {"error_code": exc.code, "error_message": exc.message}


@handler(ApiKey.OFFSET_COMMIT)
def offset_commit(ctx: RequestContext, body: dict) -> None:
    ctx.services.group_coordinator.commit(body, ctx.respond)
    return None


@handler(ApiKey.OFFSET_FETCH)
def offset_fetch(ctx: RequestContext, body: dict) -> dict:
    services = ctx.services
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
    services = ctx.services
    out = []
    for gid in body["group_ids"]:
        try:
            out.append(services.group_coordinator.describe(gid))
        except GroupError as exc:
            out.append({"error_code": exc.code, "error_message": exc.message, "group_id": gid})
    return {"groups": out}


@handler(ApiKey.DELETE_GROUPS)
def delete_groups(ctx: RequestContext, body: dict) -> None:
    services = ctx.services
    names = list(dict.fromkeys(body["groups_names"]))
    results: dict[str, dict] = {}
    lock = threading.Lock()
    if not names:
        ctx.respond({"results": []})
        return None

    def answered(gid: str, code: int, message: str | None) -> None:
        with lock:
            results[gid] = {"group_id": gid, "error_code": code, "error_message": message}
            done = len(results) == len(names)
        if done:
            ctx.respond({"results": [results[g] for g in names]})

    for gid in names:
        services.group_coordinator.delete_group(gid, functools.partial(answered, gid))
    return None


@handler(ApiKey.OFFSET_DELETE)
def offset_delete(ctx: RequestContext, body: dict) -> None:
    tps = [(t["name"], p) for t in body["topics"] for p in t["partitions"]]

    def answer(codes: dict, group_code: int) -> None:
        ctx.respond({
            "error_code": group_code,
            "topics": [] if group_code else [
                {"name": t["name"], "partitions": [
                    {"partition": p, "error_code": codes.get((t["name"], p), 0)}
                    for p in t["partitions"]]}
                for t in body["topics"]
            ],
        })  # fmt: skip

    ctx.services.group_coordinator.delete_offsets(body["group_id"], tps, answer)
    return None
