"""The classic group protocol on the Kafka listener: JoinGroup, SyncGroup, Heartbeat and
LeaveGroup, answered by broker/kafka/classic_groups.py on the group's coordinator (the broker
that leads the group's __consumer_offsets partition, as for Gregor's own groups).

    API          versions  notes
    JoinGroup    0-7       v4+: MEMBER_ID_REQUIRED first (KIP-394); static membership
                           (group.instance.id) is not served: refused with INVALID_REQUEST
    SyncGroup    0-5       assignments passed through from the leader
    Heartbeat    0-4
    LeaveGroup   0-5       v3+: several members at once

Threads: I/O threads; JoinGroup/SyncGroup answers may come from another member's request
thread or the timer's reaper thread.
"""

from __future__ import annotations

from broker.group import GroupError
from broker.kafka.apis import api
from broker.kafka.codec import millis
from broker.kafka.kio_requests import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupBatched,
    LeaveGroupRequest,
    SyncGroupRequest,
)
from broker.kafka.request import KafkaContext
from broker.security.access import allowed
from client.errors import ErrorCode
from client.security.acl import AclOperation, ResourceType

# Kafka's api keys for the classic group APIs (Gregor's own protocol has no twin of them)
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14


def _coordinator_error(ctx: KafkaContext, group_id: str) -> int:
    """0 when this broker coordinates `group_id` and Gregor's own protocol does not use the
    name; else the error code to answer with."""
    services = ctx.services
    if not group_id:
        return int(ErrorCode.INVALID_GROUP_ID)
    code, node, *_ = services.group_coordinator.find(group_id, services.controller)
    if code:
        return int(code)
    if node != services.node_id:
        return int(ErrorCode.NOT_COORDINATOR)
    try:
        native = services.group_coordinator.describe(group_id)
    except GroupError:
        return 0  # no such native group
    if native.get("members"):
        return int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)  # a KIP-848 group has the name
    return 0


def _group_error(ctx: KafkaContext, group_id: str) -> int:
    """READ on the group (every classic group API), else GROUP_AUTHORIZATION_FAILED; then
    the coordinator checks of `_coordinator_error`."""
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return _coordinator_error(ctx, group_id)


def _simple_error(ctx: KafkaContext, code: int) -> None:
    ctx.respond({"throttle_time": 0, "error_code": code, "members": []}, code)


@api(JOIN_GROUP, 0, 7)
def join_group(ctx: KafkaContext, body: JoinGroupRequest) -> None:
    code = _group_error(ctx, body.group_id)
    if not code and getattr(body, "group_instance_id", None):
        code = int(ErrorCode.INVALID_REQUEST)  # static membership is not served
    if code:
        ctx.respond(
            {"throttle_time": 0, "error_code": code, "generation_id": -1, "protocol_name": "",
             "leader": "", "member_id": body.member_id, "members": []},
            code,
        )  # fmt: skip
        return
    session_ms = millis(body.session_timeout)
    rebalance = getattr(body, "rebalance_timeout", None)  # v1+; v0 used the session timeout
    ctx.state.classic_groups(ctx.services).join(
        body.group_id,
        body.member_id,
        body.protocol_type,
        [(p.name, bytes(p.metadata)) for p in body.protocols],
        session_ms,
        millis(rebalance) if rebalance is not None else session_ms,
        ctx.request.client_id or "",
        ctx.request.client_host,
        ctx.api_version >= 4,
        lambda out: ctx.respond({"throttle_time": 0, **out}, out["error_code"]),
    )


@api(SYNC_GROUP, 0, 5)
def sync_group(ctx: KafkaContext, body: SyncGroupRequest) -> None:
    code = _group_error(ctx, body.group_id)
    if code:
        ctx.respond({"throttle_time": 0, "error_code": code, "assignment": b""}, code)
        return
    ctx.state.classic_groups(ctx.services).sync(
        body.group_id,
        body.member_id,
        int(body.generation_id),
        {a.member_id: bytes(a.assignment) for a in body.assignments},
        lambda out: ctx.respond({"throttle_time": 0, **out}, out["error_code"]),
    )


@api(HEARTBEAT, 0, 4)
def heartbeat(ctx: KafkaContext, body: HeartbeatRequest) -> None:
    code = _group_error(ctx, body.group_id)
    if not code:
        code = ctx.state.classic_groups(ctx.services).heartbeat(
            body.group_id, body.member_id, int(body.generation_id)
        )
    ctx.respond({"throttle_time": 0, "error_code": code}, code)


@api(LEAVE_GROUP, 0, 5)
def leave_group(ctx: KafkaContext, body: LeaveGroupRequest) -> None:
    batched = isinstance(body, LeaveGroupBatched)  # v3+: a list of members
    ids = (
        [m.member_id for m in body.members]
        if isinstance(body, LeaveGroupBatched)
        else [body.member_id]
    )
    code = _group_error(ctx, body.group_id)
    codes = [code] * len(ids)
    if not code:
        codes = ctx.state.classic_groups(ctx.services).leave(body.group_id, ids)
    if batched:
        ctx.respond(
            {"throttle_time": 0, "error_code": code, "members": [
                {"member_id": m, "group_instance_id": None, "error_code": c}
                for m, c in zip(ids, codes, strict=True)]},
            code,
        )  # fmt: skip
    else:
        ctx.respond({"throttle_time": 0, "error_code": codes[0]}, codes[0])
