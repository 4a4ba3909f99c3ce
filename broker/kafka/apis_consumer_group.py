"""ConsumerGroupHeartbeat (KIP-848) on the Kafka listener, translated to Gregor's own group
coordinator (broker/group/), whose protocol it is: a Kafka client with
`group.protocol=consumer` and a Gregor client can be members of the same group.

    API                      versions  notes
    ConsumerGroupHeartbeat   0-1       Kafka names partitions by topic id; the coordinator by
                                       topic name: both directions go through the metadata
                                       image. A name used by a classic group with members is
                                       refused with GROUP_ID_NOT_FOUND, as Kafka answers a
                                       consumer-protocol member of a classic group.
    ConsumerGroupDescribe    0-1       the coordinator's description (states as Kafka names
                                       them, assignments with topic ids and names); a classic
                                       group or an unknown one: GROUP_ID_NOT_FOUND, as Kafka
                                       answers; members are all consumer-protocol (type 1).

Threads: I/O threads.
"""

from __future__ import annotations

import uuid

from broker.group import GroupError
from broker.kafka.apis import api
from broker.kafka.apis_group_admin import kafka_group_state
from broker.kafka.codec import ZERO_UUID, millis
from broker.kafka.kio_requests import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from broker.kafka.request import KafkaContext, whole_error
from broker.security.access import allowed
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation, ResourceType


def _ids(ctx: KafkaContext) -> tuple[dict[uuid.UUID, str], dict[str, uuid.UUID]]:
    by_id, by_name = {}, {}
    for name, t in ctx.services.metadata.topics.items():
        raw = getattr(t, "topic_id", b"")
        if isinstance(raw, bytes) and len(raw) == 16:
            tid = uuid.UUID(bytes=raw)
            by_id[tid], by_name[name] = name, tid
    return by_id, by_name


@api(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1)
def consumer_group_heartbeat(ctx: KafkaContext, body: ConsumerGroupHeartbeatRequest) -> None:
    def refuse(code: int, message: str) -> None:
        ctx.respond(
            {"throttle_time": 0, "error_code": code, "error_message": message,
             "member_id": body.member_id or None, "member_epoch": -1, "heartbeat_interval": 0,
             "assignment": None},
            code,
        )  # fmt: skip

    if ctx.state.classic_groups(ctx.services).is_classic(body.group_id):
        refuse(int(ErrorCode.GROUP_ID_NOT_FOUND), f"group {body.group_id} is a classic group")
        return
    by_id, by_name = _ids(ctx)
    owned = None
    if body.topic_partitions is not None:
        owned = [
            {"topic": by_id[tp.topic_id], "partitions": list(tp.partitions)}
            for tp in body.topic_partitions
            if tp.topic_id in by_id  # a deleted topic: nothing left to own
        ]
    rebalance = getattr(body, "rebalance_timeout", None)
    native = {
        "group_id": body.group_id,
        "member_id": body.member_id,
        "member_epoch": int(body.member_epoch),
        "instance_id": body.instance_id,
        "rack_id": body.rack_id,
        "rebalance_timeout_ms": millis(rebalance) if rebalance is not None else -1,
        "subscribed_topic_names": (
            None if body.subscribed_topic_names is None else list(body.subscribed_topic_names)
        ),
        "server_assignor": body.server_assignor,
        "owned_topic_partitions": owned,
    }

    def answer(a: Body) -> None:
        code = whole_error(a) or int(a.get("error_code", 0))
        if code:
            refuse(code, a.get("error_message") or "")
            return
        assignment = a.get("assignment")
        ctx.respond(
            {
                "throttle_time": 0,
                "error_code": 0,
                "member_id": a.get("member_id"),
                "member_epoch": a.get("member_epoch", -1),
                "heartbeat_interval": a.get("heartbeat_interval_ms", 0),
                "assignment": None
                if assignment is None
                else {
                    "topic_partitions": [
                        {
                            "topic_id": by_name.get(t["topic"], ZERO_UUID),
                            "partitions": t["partitions"],
                        }
                        for t in assignment
                    ]
                },
            }
        )

    ctx.call_native(ApiKey.CONSUMER_GROUP_HEARTBEAT, native, answer)


@api(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1)
def consumer_group_describe(ctx: KafkaContext, body: ConsumerGroupDescribeRequest) -> None:
    _, by_name = _ids(ctx)
    classic = ctx.state.classic_groups(ctx.services)

    def assignment(nested: list[Body]) -> Body:
        return {
            "topic_partitions": [
                {"topic_id": by_name.get(t["topic"], ZERO_UUID), "topic_name": t["topic"],
                 "partitions": t["partitions"]}
                for t in nested
            ]
        }  # fmt: skip

    def one(gid: str) -> Body:
        def missing(code: int, message: str) -> Body:
            return {"error_code": code, "error_message": message, "group_id": gid,
                    "group_state": "", "group_epoch": 0, "assignment_epoch": 0,
                    "assignor_name": "", "members": []}  # fmt: skip

        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
            return missing(
                int(ErrorCode.GROUP_AUTHORIZATION_FAILED),
                f"not authorized to DESCRIBE group {gid}",
            )
        if classic.is_classic(gid):
            return missing(
                int(ErrorCode.GROUP_ID_NOT_FOUND), f"Group {gid} is not a consumer group."
            )
        try:
            d = ctx.services.group_coordinator.describe(gid)
        except GroupError as exc:
            return missing(int(exc.code), exc.message)
        return {
            "error_code": 0,
            "group_id": gid,
            "group_state": kafka_group_state(d["group_state"]),
            "group_epoch": d["group_epoch"],
            "assignment_epoch": d["assignment_epoch"],
            "assignor_name": d["assignor_name"],
            "members": [
                {
                    "member_id": m["member_id"],
                    "member_epoch": m["member_epoch"],
                    "client_id": m["client_id"],
                    "client_host": m["client_host"],
                    "subscribed_topic_names": m["subscribed_topic_names"],
                    "subscribed_topic_regex": m["subscribed_topic_regex"],
                    "assignment": assignment(m["assignment"]),
                    "target_assignment": assignment(m["target_assignment"]),
                    "member_type": 1,
                }
                for m in d["members"]
            ],
        }

    ctx.respond({"throttle_time": 0, "groups": [one(gid) for gid in body.group_ids]})
