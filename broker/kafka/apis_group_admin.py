"""Group administration on the Kafka listener: ListGroups, DescribeGroups and DeleteGroups,
over both kinds of group a broker coordinates: classic groups (broker/kafka/classic_groups.py,
with their members' protocol metadata and assignments) and Gregor's own (KIP-848-style,
broker/group/; described with protocol type "consumer" and no per-member bytes, which that
protocol does not have).

    API             versions  notes
    ListGroups      0-4       states as Kafka names them (Stable, Empty, ...)
    DescribeGroups  0-5       a group nobody knows answers state "Dead", as Kafka does
    DeleteGroups    0-2       a classic group with members: NON_EMPTY_GROUP; then the
                              coordinator deletes the committed offsets as the native API does
    OffsetDelete    0         DELETE on the group, READ on each topic; a partition of a topic
                              a member of the group subscribes to: GROUP_SUBSCRIBED_TO_TOPIC
                              (a classic group's from its members' consumer protocol
                              metadata, a native group's from the coordinator); a classic
                              group with members of another protocol type: NON_EMPTY_GROUP

Threads: I/O threads; DeleteGroups answers from the thread the native handler answers on.
"""

from __future__ import annotations

import struct

from kio.schema.offset_delete.v0.request import OffsetDeleteRequest

from broker.group import GroupError
from broker.kafka.apis import api
from broker.kafka.kio_requests import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from broker.kafka.request import KafkaContext, whole_error
from broker.security.access import allowed, enabled, quietly_allowed
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation, ResourceType

DESCRIBE_GROUPS = 15  # Kafka's api key (Gregor's own protocol has ConsumerGroupDescribe)
NON_EMPTY_GROUP = 68


def kafka_group_state(native_state: str) -> str:
    """Gregor's lower-case group states as Kafka writes them (stable → Stable)."""
    return "".join(part.capitalize() for part in native_state.split("_")) or "Empty"


@api(ApiKey.LIST_GROUPS, 0, 4)
def list_groups(ctx: KafkaContext, body: ListGroupsRequest) -> None:
    classic = ctx.state.classic_groups(ctx.services).listing()
    wanted = {s.lower() for s in getattr(body, "states_filter", ()) or ()}
    rows = {}
    for g in ctx.services.group_coordinator.list_groups():
        rows[g["group_id"]] = (kafka_group_state(g["group_state"]), "consumer")
    rows.update(classic)
    if enabled(ctx) and not quietly_allowed(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER):
        rows = {  # DESCRIBE on the cluster lists all; else the groups it may DESCRIBE
            g: row for g, row in rows.items()
            if quietly_allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g)
        }  # fmt: skip
    ctx.respond(
        {
            "throttle_time": 0,
            "error_code": 0,
            "groups": [
                {"group_id": gid, "protocol_type": ptype, "group_state": state}
                for gid, (state, ptype) in sorted(rows.items())
                if not wanted or state.lower() in wanted
            ],
        }
    )


@api(DESCRIBE_GROUPS, 0, 5)
def describe_groups(ctx: KafkaContext, body: DescribeGroupsRequest) -> None:
    classic = ctx.state.classic_groups(ctx.services)
    out = []
    for gid in body.groups:
        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
            out.append({"error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED), "group_id": gid,
                        "group_state": "", "protocol_type": "", "protocol_data": "",
                        "members": []})  # fmt: skip
            continue
        entry = classic.describe(gid)
        if entry is None:
            entry = _native(ctx, gid)
        out.append(entry)
    ctx.respond({"throttle_time": 0, "groups": out})


def _native(ctx: KafkaContext, gid: str) -> Body:
    try:
        d = ctx.services.group_coordinator.describe(gid)
    except GroupError:
        return {"error_code": 0, "group_id": gid, "group_state": "Dead", "protocol_type": "",
                "protocol_data": "", "members": []}  # fmt: skip
    return {
        "error_code": 0,
        "group_id": gid,
        "group_state": kafka_group_state(d.get("group_state", "")),
        "protocol_type": "consumer",
        "protocol_data": d.get("assignor_name", ""),
        "members": [
            {
                "member_id": m["member_id"],
                "group_instance_id": None,
                "client_id": m.get("client_id", ""),
                "client_host": m.get("client_host", ""),
                "member_metadata": b"",
                "member_assignment": b"",
            }
            for m in d.get("members", ())
        ],
    }


@api(ApiKey.DELETE_GROUPS, 0, 2)
def delete_groups(ctx: KafkaContext, body: DeleteGroupsRequest) -> None:
    names = list(dict.fromkeys(body.groups_names))
    classic = ctx.state.classic_groups(ctx.services)
    refused = {  # DELETE on the group, checked before anything is forgotten
        gid: int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        for gid in names
        if not allowed(ctx, AclOperation.DELETE, ResourceType.GROUP, gid)
    }
    refused.update(
        {gid: NON_EMPTY_GROUP for gid in names if gid not in refused and not classic.forget(gid)}
    )
    rest = [gid for gid in names if gid not in refused]

    def answer(a: Body) -> None:
        code = whole_error(a)
        results = {r["group_id"]: r["error_code"] for r in a.get("results", ())}
        ctx.respond(
            {
                "throttle_time": 0,
                "results": [
                    {"group_id": gid,
                     "error_code": refused.get(gid, results.get(gid, code or ErrorCode.UNKNOWN_SERVER_ERROR))}
                    for gid in names
                ],
            }
        )  # fmt: skip

    if not rest:
        answer({"results": []})
        return
    ctx.call_native(ApiKey.DELETE_GROUPS, {"groups_names": rest}, answer)


def _subscribed_topics(metadata: bytes) -> set[str]:
    """The topics of a ConsumerProtocolSubscription (every version starts with int16
    version, then the topics as an array of int16-length strings); empty when malformed."""
    try:
        (count,) = struct.unpack_from(">i", metadata, 2)
        pos, topics = 6, set()
        for _ in range(count):
            (n,) = struct.unpack_from(">h", metadata, pos)
            if n < 0 or pos + 2 + n > len(metadata):
                return set()
            topics.add(metadata[pos + 2 : pos + 2 + n].decode())
            pos += 2 + n
        return topics
    except (struct.error, UnicodeDecodeError):
        return set()


@api(ApiKey.OFFSET_DELETE, 0, 0)
def offset_delete(ctx: KafkaContext, body: OffsetDeleteRequest) -> None:
    gid = body.group_id
    asked = [(t.name, [int(p.partition_index) for p in t.partitions]) for t in body.topics]
    if not allowed(ctx, AclOperation.DELETE, ResourceType.GROUP, gid):  # DELETE on the group
        ctx.respond({"error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED),
                     "throttle_time": 0, "topics": []})  # fmt: skip
        return
    codes: dict[tuple[str, int], int] = {}
    for name, parts in asked:  # READ on each topic (checked before the group's state)
        if not allowed(ctx, AclOperation.READ, ResourceType.TOPIC, name):
            denied = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            codes.update(dict.fromkeys(((name, p) for p in parts), denied))
    classic = ctx.state.classic_groups(ctx.services).subscriptions(gid)
    if classic is not None:
        ptype, metadata = classic
        if ptype != "consumer":  # Kafka: no subscriptions to tell, the group must be empty
            ctx.respond({"error_code": NON_EMPTY_GROUP, "throttle_time": 0, "topics": []})
            return
        subscribed = set().union(*map(_subscribed_topics, metadata))
        for name, parts in asked:
            if name in subscribed:
                for p in parts:
                    codes.setdefault((name, p), int(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC))
    rest = [(n, [p for p in parts if (n, p) not in codes]) for n, parts in asked]
    rest = [(n, parts) for n, parts in rest if parts]

    def answer(a: Body) -> None:
        code = whole_error(a) or int(a.get("error_code", 0))  # the group's code
        if code == ErrorCode.GROUP_ID_NOT_FOUND and classic is not None:
            code = 0  # a classic group with members but nothing committed yet: nothing to delete
            a = {"topics": []}
        if code:
            ctx.respond({"error_code": code, "throttle_time": 0, "topics": []})
            return
        native = {(t["name"], p["partition"]): p["error_code"]
                  for t in a.get("topics", ()) for p in t["partitions"]}  # fmt: skip
        ctx.respond({
            "error_code": 0,
            "throttle_time": 0,
            "topics": [
                {"name": name, "partitions": [
                    {"partition_index": p, "error_code": codes.get((name, p), native.get((name, p), 0))}
                    for p in parts]}
                for name, parts in asked
            ],
        })  # fmt: skip

    if not rest:  # every partition refused (as the native handler, the group is not looked at)
        answer({"topics": []})
        return
    topics = [{"name": n, "partitions": parts} for n, parts in rest]
    ctx.call_native(ApiKey.OFFSET_DELETE, {"group_id": gid, "topics": topics}, answer)
