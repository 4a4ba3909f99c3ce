"""Group offsets through the Kafka listener: FindCoordinator, OffsetCommit, OffsetFetch, each
translated to the native handler (broker/handlers/groups.py), so offsets committed here are
the same offsets Gregor's clients and `gregor groups describe` see.

    API              versions  notes
    FindCoordinator  0-4       group coordinators only; the coordinator's address on the
                               listener the request came in on (a Kafka client is given a
                               Kafka listener)
    OffsetCommit     2-8       commits by classic group members and by consumers outside a
                               group (generation -1: assign() and commit(); UNKNOWN_MEMBER_ID
                               while the classic group has members); metadata kept
    OffsetFetch      1-7       one group per request (v8+ batches groups: not served)

Commits of classic group members (broker/kafka/apis_classic.py) are checked against their
generation first, then stored as commits from outside a group.

Threads: I/O threads; answers from the thread the native handler answers on.
"""

from __future__ import annotations

from broker.kafka.apis import api
from broker.kafka.kio_requests import (
    FindCoordinatorBatched,
    FindCoordinatorRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from broker.kafka.request import KafkaContext, whole_error
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body


def _endpoint(ctx: KafkaContext, node_id: int) -> tuple[str, int] | None:
    broker = ctx.services.metadata.brokers.get(node_id)
    if broker is None:
        return None
    return broker.endpoint(ctx.request.connection.listener)


@api(ApiKey.FIND_COORDINATOR, 0, 4)
def find_coordinator(ctx: KafkaContext, body: FindCoordinatorRequest) -> None:
    batched = isinstance(body, FindCoordinatorBatched)  # v4+: a list of keys
    keys = list(body.coordinator_keys) if isinstance(body, FindCoordinatorBatched) else [body.key]
    key_type = int(getattr(body, "key_type", 0))

    def answer(a: Body) -> None:
        code = whole_error(a)
        rows = []
        for i, key in enumerate(keys):
            c = a["coordinators"][i] if not code else {"error_code": code}
            row: Body = {
                "key": key,
                "node_id": c.get("node_id", -1),
                "host": "",
                "port": -1,
                "error_code": c.get("error_code", 0),
                "error_message": c.get("error_message"),
            }
            if not row["error_code"]:
                ep = _endpoint(ctx, row["node_id"])
                if ep is None:  # the coordinator has no listener of this name
                    row.update(error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), node_id=-1)
                else:
                    row["host"], row["port"] = ep
            rows.append(row)
        if batched:
            ctx.respond({"throttle_time": 0, "coordinators": rows})
        else:
            ctx.respond({"throttle_time": 0, **rows[0]})

    ctx.call_native(
        ApiKey.FIND_COORDINATOR, {"key_type": key_type, "coordinator_keys": keys}, answer
    )


@api(ApiKey.OFFSET_COMMIT, 2, 8)
def offset_commit(ctx: KafkaContext, body: OffsetCommitRequest) -> None:
    generation: int | None = getattr(body, "generation_id_or_member_epoch", None)
    if generation is None:  # the field's name before v8
        generation = getattr(body, "generation_id", -1)
    native: Body = {
        "group_id": body.group_id,
        "member_id": body.member_id,
        "member_epoch": int(generation),
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition": int(p.partition_index),
                        "committed_offset": int(p.committed_offset),
                        "committed_leader_epoch": int(getattr(p, "committed_leader_epoch", -1)),
                        "committed_metadata": p.committed_metadata,
                    }
                    for p in t.partitions
                ],
            }
            for t in body.topics
        ],
    }

    # a partition the metadata does not know is UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers
    # (and nothing is stored for it); the rest go to the coordinator
    image = ctx.services.metadata.topics
    unknown = [
        {"name": t["name"], "partitions": [
            {"partition_index": p["partition"], "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}
            for p in t["partitions"]
            if t["name"] not in image or p["partition"] not in image[t["name"]].partitions]}
        for t in native["topics"]
    ]  # fmt: skip
    unknown = [t for t in unknown if t["partitions"]]
    gone = {(t["name"], p["partition_index"]) for t in unknown for p in t["partitions"]}
    native["topics"] = [
        {**t, "partitions": [p for p in t["partitions"] if (t["name"], p["partition"]) not in gone]}
        for t in native["topics"]
    ]
    native["topics"] = [t for t in native["topics"] if t["partitions"]]

    def answer(a: Body) -> None:
        code = whole_error(a)
        if code:
            topics = [
                {"name": t.name, "partitions": [
                    {"partition_index": p.partition_index, "error_code": code}
                    for p in t.partitions]}
                for t in body.topics
            ]  # fmt: skip
        else:
            topics = [
                {"name": t["name"], "partitions": [
                    {"partition_index": p["partition"], "error_code": p["error_code"]}
                    for p in t["partitions"]]}
                for t in a["topics"]
            ] + unknown  # fmt: skip
        ctx.respond({"throttle_time": 0, "topics": topics})

    # a classic member's commit is checked against its generation here, then stored by the
    # coordinator as a commit from outside a group (Gregor's own groups know no generations)
    refused = ctx.state.classic_groups(ctx.services).check_commit(
        body.group_id, body.member_id, int(generation)
    )
    if refused:
        answer({"error_code": refused})
        return
    native["member_id"], native["member_epoch"] = "", -1
    if not native["topics"]:
        answer({"topics": []})
        return
    ctx.call_native(ApiKey.OFFSET_COMMIT, native, answer)


@api(ApiKey.OFFSET_FETCH, 1, 7)
def offset_fetch(ctx: KafkaContext, body: OffsetFetchRequest) -> None:
    topics = None
    if body.topics is not None:
        topics = [{"name": t.name, "partitions": list(t.partition_indexes)} for t in body.topics]

    def answer(a: Body) -> None:
        ctx.respond(
            {
                "throttle_time": 0,
                "error_code": a.get("error_code", 0),
                "topics": [
                    {"name": t["name"], "partitions": [
                        {"partition_index": p["partition"],
                         "committed_offset": p["committed_offset"],
                         "committed_leader_epoch": p.get("committed_leader_epoch", -1),
                         "metadata": p.get("metadata"),
                         "error_code": p.get("error_code", 0)}
                        for p in t["partitions"]]}
                    for t in a.get("topics", ())
                ],
            }
        )  # fmt: skip

    native = {
        "group_id": body.group_id,
        "topics": topics,
        # v7 (KIP-447): offsets of an open transaction answer UNSTABLE_OFFSET_COMMIT
        "require_stable": bool(getattr(body, "require_stable", False)),
    }
    ctx.call_native(ApiKey.OFFSET_FETCH, native, answer)
