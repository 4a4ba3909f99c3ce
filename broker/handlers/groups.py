"""Consumer group APIs, answered by the group coordinator (broker/group/): FindCoordinator (10),
OffsetCommit (8), OffsetFetch (9), TxnOffsetCommit (28), ListGroups (16), DeleteGroups (42), OffsetDelete (47),
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
from broker.security.access import (
    allowed,
    check,
    denial,
    enabled,
    quietly_allowed,
    split_partitions,
)
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation, ResourceType


@handler(
    ApiKey.FIND_COORDINATOR, access="DESCRIBE on GROUP; key_type 1: DESCRIBE on TRANSACTIONAL_ID"
)
def find_coordinator(ctx: RequestContext, body: Body) -> Body:
    services = ctx.services
    out = []
    msg: str | None
    for key in body["coordinator_keys"]:
        if body["key_type"] == 1:  # TRANSACTION (broker/txn/topic.py)
            if not key:
                code, node, host, port, msg = (int(ErrorCode.INVALID_REQUEST), -1, "", -1,
                                               "transactional id is empty")  # fmt: skip
            elif (denied := check(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                  key)) is not None:  # fmt: skip
                code, node, host, port, msg = denied[0], -1, "", -1, denied[1]
            else:
                code, node, host, port, msg = services.txn_coordinator.find(
                    key, services.controller
                )
        elif body["key_type"] != 0:
            code, node, host, port, msg = (int(ErrorCode.INVALID_REQUEST), -1, "", -1,
                                           "key_type is 0 (group) or 1 (transaction)")  # fmt: skip
        elif not key:
            code, node, host, port, msg = (int(ErrorCode.INVALID_GROUP_ID), -1, "", -1,
                                           "group id is empty")  # fmt: skip
        elif (denied := check(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key)) is not None:
            code, node, host, port, msg = denied[0], -1, "", -1, denied[1]
        else:
            code, node, host, port, msg = services.group_coordinator.find(key, services.controller)
        out.append({"key": key, "node_id": node, "host": host, "port": port,
                    "error_code": code, "error_message": msg})  # fmt: skip
    return {"coordinators": out}


@handler(ApiKey.CONSUMER_GROUP_HEARTBEAT, access="READ on GROUP and DESCRIBE on TOPIC")
def consumer_group_heartbeat(ctx: RequestContext, body: Body) -> Body:
    services = ctx.services
    denied = check(ctx, AclOperation.READ, ResourceType.GROUP, body["group_id"])
    if denied is not None:  # READ on the group
        return {"error_code": denied[0], "error_message": denied[1]}
    for name in body.get("subscribed_topic_names") or ():  # DESCRIBE on each topic (KIP-848)
        denied = check(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        if denied is not None:
            return {"error_code": denied[0], "error_message": denied[1]}
    try:
        return services.group_coordinator.heartbeat(body, ctx.client_id, ctx.client_host)
    except GroupError as exc:
        return {"error_code": exc.code, "error_message": exc.message}


@handler(ApiKey.OFFSET_COMMIT, access="READ on GROUP and READ on TOPIC")
def offset_commit(ctx: RequestContext, body: Body) -> None:
    if not enabled(ctx):
        ctx.services.group_coordinator.commit(body, ctx.respond)
        return

    def refused(topics: list[Body], code: int, why: str | None = None) -> list[Body]:
        return [
            {"name": t["name"],
             "partitions": [{"partition": p["partition"], "error_code": code,
                             "error_message": why or denial(
                                 ctx, AclOperation.READ, ResourceType.TOPIC, t["name"])}
                            for p in t["partitions"]]}
            for t in topics
        ]  # fmt: skip

    # READ on the group, then READ on each topic; refused partitions are not committed
    denied = check(ctx, AclOperation.READ, ResourceType.GROUP, body["group_id"])
    if denied is not None:
        ctx.respond({"topics": refused(body["topics"], denied[0], denied[1])})
        return
    ok, topics_denied = [], []
    for t in body["topics"]:
        if allowed(ctx, AclOperation.READ, ResourceType.TOPIC, t["name"]):
            ok.append(t)
        else:
            topics_denied.append(t)
    extra = refused(topics_denied, int(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    if not ok:
        ctx.respond({"topics": extra})
        return

    def respond(answer: Body) -> None:
        if "topics" in answer:
            answer = {**answer, "topics": list(answer["topics"]) + extra}
        ctx.respond(answer)

    ctx.services.group_coordinator.commit({**body, "topics": ok}, respond)
    return


@handler(
    ApiKey.TXN_OFFSET_COMMIT,
    access="WRITE on TRANSACTIONAL_ID, READ on GROUP and READ on TOPIC",
)
def txn_offset_commit(ctx: RequestContext, body: Body) -> None:
    """TxnOffsetCommit (28), to the group's coordinator: as Kafka, WRITE on the transactional
    id and READ on the group refuse the whole request, READ on a topic its partitions."""

    def every(topics: list[Body], code: int) -> list[Body]:
        return [{"name": t["name"],
                 "partitions": [{"partition": p["partition"], "error_code": code}
                                for p in t["partitions"]]}
                for t in topics]  # fmt: skip

    for op, rtype, name in (
        (AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body["transactional_id"]),
        (AclOperation.READ, ResourceType.GROUP, body["group_id"]),
    ):
        denied = check(ctx, op, rtype, name)
        if denied is not None:
            ctx.respond({"topics": every(body["topics"], denied[0])})
            return
    ok = [
        t for t in body["topics"] if allowed(ctx, AclOperation.READ, ResourceType.TOPIC, t["name"])
    ]
    extra = every([t for t in body["topics"] if t not in ok],
                  int(ErrorCode.TOPIC_AUTHORIZATION_FAILED))  # fmt: skip
    if not ok:
        ctx.respond({"topics": extra})
        return

    def respond(answer: Body) -> None:
        ctx.respond({**answer, "topics": list(answer["topics"]) + extra})

    try:
        ctx.services.group_coordinator.txn_commit({**body, "topics": ok}, respond)
    except GroupError as exc:
        ctx.respond({"topics": every(body["topics"], exc.code)})


@handler(ApiKey.OFFSET_FETCH, access="DESCRIBE on GROUP and DESCRIBE on TOPIC")
def offset_fetch(ctx: RequestContext, body: Body) -> Body:
    services = ctx.services
    denied = check(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, body["group_id"])
    if denied is not None:  # DESCRIBE on the group
        return {"error_code": denied[0], "error_message": denied[1], "topics": []}
    try:
        topics = services.group_coordinator.fetch_offsets(
            body["group_id"], body["topics"], body["require_stable"]
        )
    except GroupError as exc:
        return {"error_code": exc.code, "error_message": exc.message, "topics": []}
    if enabled(ctx):  # DESCRIBE on each topic: named ones refused, the others left out
        named = body["topics"] is not None
        out = []
        for t in topics:
            if quietly_allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t["name"]):
                out.append(t)
            elif named:
                code = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                out.append({"name": t["name"], "partitions": [
                    {"partition": p["partition"], "committed_offset": -1, "error_code": code}
                    for p in t["partitions"]]})  # fmt: skip
        topics = out
    return {"error_code": 0, "topics": topics}


@handler(ApiKey.LIST_GROUPS, access="DESCRIBE on CLUSTER or DESCRIBE on GROUP")
def list_groups(ctx: RequestContext, body: Body) -> Body:
    groups = ctx.services.group_coordinator.list_groups()
    if enabled(ctx) and not quietly_allowed(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER):
        groups = [  # DESCRIBE on the cluster lists all; else the groups it may DESCRIBE
            g for g in groups
            if quietly_allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g["group_id"])
        ]  # fmt: skip
    wanted = {s.lower() for s in body["states_filter"]}
    if wanted:
        groups = [g for g in groups if g["group_state"] in wanted]
    return {"error_code": 0, "groups": groups}


@handler(ApiKey.CONSUMER_GROUP_DESCRIBE, access="DESCRIBE on GROUP")
def consumer_group_describe(ctx: RequestContext, body: Body) -> Body:
    services = ctx.services
    out = []
    for gid in body["group_ids"]:
        denied = check(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, gid)
        if denied is not None:  # DESCRIBE on the group
            out.append({"error_code": denied[0], "error_message": denied[1], "group_id": gid})
            continue
        try:
            out.append(services.group_coordinator.describe(gid))
        except GroupError as exc:
            out.append({"error_code": exc.code, "error_message": exc.message, "group_id": gid})
    return {"groups": out}


@handler(ApiKey.DELETE_GROUPS, access="DELETE on GROUP")
def delete_groups(ctx: RequestContext, body: Body) -> None:
    services = ctx.services
    names = list(dict.fromkeys(body["groups_names"]))
    results: dict[str, Body] = {}
    lock = threading.Lock()
    if not names:
        ctx.respond({"results": []})
        return

    def answered(gid: str, code: int, message: str | None) -> None:
        with lock:
            results[gid] = {"group_id": gid, "error_code": code, "error_message": message}
            done = len(results) == len(names)
        if done:
            ctx.respond({"results": [results[g] for g in names]})

    for gid in names:
        denied = check(ctx, AclOperation.DELETE, ResourceType.GROUP, gid)
        if denied is not None:  # DELETE on the group: not deleted
            answered(gid, *denied)
            continue
        services.group_coordinator.delete_group(gid, functools.partial(answered, gid))
    return


@handler(ApiKey.OFFSET_DELETE, access="DELETE on GROUP and READ on TOPIC")
def offset_delete(ctx: RequestContext, body: Body) -> None:
    tps = [(t["name"], p) for t in body["topics"] for p in t["partitions"]]

    def answer(codes: dict[tuple[str, int], int], group_code: int) -> None:
        codes = {**codes, **codes_refused}
        ctx.respond({
            "error_code": group_code,
            "topics": [] if group_code else [
                {"name": t["name"], "partitions": [
                    {"partition": p, "error_code": codes.get((t["name"], p), 0)}
                    for p in t["partitions"]]}
                for t in body["topics"]
            ],
        })  # fmt: skip

    denied = check(ctx, AclOperation.DELETE, ResourceType.GROUP, body["group_id"])
    if denied is not None:  # DELETE on the group
        ctx.respond({"error_code": denied[0], "topics": []})
        return
    keep, refused = split_partitions(ctx, AclOperation.READ, tps)  # READ on each topic
    codes_refused = {(r["topic"], r["partition"]): r["error_code"] for r in refused}
    if not keep:
        answer({}, 0)
        return
    ctx.services.group_coordinator.delete_offsets(body["group_id"], keep, answer)
    return
