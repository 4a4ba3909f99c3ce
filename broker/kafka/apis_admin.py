"""Admin and leader-epoch APIs on the Kafka listener, each translated to the native handler:

    API                    versions  native
    CreateTopics           2-7       CreateTopics (19): forwarded to the controller
    DeleteTopics           1-5       DeleteTopics (20) (v6 names topics by id: not served)
    DescribeConfigs        1-4       DescribeConfigs (32): every entry; config_source says
                                     whether a value is the topic's own or the default
    OffsetForLeaderEpoch   2-4       OffsetForLeaderEpoch (23): consumers validate their
                                     position after a leader change (KIP-320)

Threads: I/O threads; answers from the thread the native handler answers on.
"""

from __future__ import annotations

from broker.kafka.apis import api
from broker.kafka.codec import millis
from broker.kafka.kio_requests import (
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    OffsetForLeaderEpochRequest,
)
from broker.kafka.request import KafkaContext, whole_error
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body

TOPIC_RESOURCE = 2
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5


@api(ApiKey.CREATE_TOPICS, 2, 7)
def create_topics(ctx: KafkaContext, body: CreateTopicsRequest) -> None:
    native = {
        "topics": [
            {
                "name": t.name,
                "num_partitions": int(t.num_partitions),
                "replication_factor": int(t.replication_factor),
                "assignments": [
                    {"partition": int(a.partition_index), "broker_ids": list(a.broker_ids)}
                    for a in t.assignments
                ],
                "configs": [{"name": c.name, "value": c.value} for c in t.configs],
            }
            for t in body.topics
        ],
        "timeout_ms": millis(body.timeout),
        "validate_only": bool(getattr(body, "validate_only", False)),
    }

    def answer(a: Body) -> None:
        code = whole_error(a)
        rows = a.get("topics") or [
            {"name": t.name, "error_code": code, "error_message": a.get("error_message")}
            for t in body.topics
        ]
        ctx.respond(
            {
                "throttle_time": 0,
                "topics": [
                    {
                        "name": r["name"],
                        "topic_id": None,
                        "error_code": r["error_code"],
                        "error_message": r.get("error_message"),
                        "num_partitions": r.get("num_partitions", -1),
                        "replication_factor": r.get("replication_factor", -1),
                        "configs": None,
                    }
                    for r in rows
                ],
            }
        )

    ctx.call_native(ApiKey.CREATE_TOPICS, native, answer)


@api(ApiKey.DELETE_TOPICS, 1, 5)
def delete_topics(ctx: KafkaContext, body: DeleteTopicsRequest) -> None:
    names = list(body.topic_names)

    def answer(a: Body) -> None:
        code = whole_error(a)
        rows = a.get("responses") or [
            {"name": n, "error_code": code, "error_message": a.get("error_message")} for n in names
        ]
        ctx.respond({"throttle_time": 0, "responses": rows})

    ctx.call_native(
        ApiKey.DELETE_TOPICS, {"topic_names": names, "timeout_ms": millis(body.timeout)}, answer
    )


@api(ApiKey.DESCRIBE_CONFIGS, 1, 4)
def describe_configs(ctx: KafkaContext, body: DescribeConfigsRequest) -> None:
    native = {
        "resources": [
            {
                "resource_type": int(r.resource_type),
                "resource_name": r.resource_name,
                "configuration_keys": (
                    None if r.configuration_keys is None else list(r.configuration_keys)
                ),
            }
            for r in body.resources
        ]
    }

    def answer(a: Body) -> None:
        code = whole_error(a)
        results: list[Body]
        if code:
            results = [
                {"error_code": code, "error_message": a.get("error_message"),
                 "resource_type": r.resource_type, "resource_name": r.resource_name,
                 "configs": []}
                for r in body.resources
            ]  # fmt: skip
        else:
            results = [
                {
                    "error_code": r["error_code"],
                    "error_message": r.get("error_message"),
                    "resource_type": r["resource_type"],
                    "resource_name": r["resource_name"],
                    "configs": [
                        {
                            "name": c["name"],
                            "value": c["value"],
                            "read_only": c.get("read_only", False),
                            "config_source": _source(r["resource_type"], c),
                            "is_sensitive": c.get("is_sensitive", False),
                            "synonyms": [],
                            "documentation": None,
                        }
                        for c in r.get("configs", ())
                    ],
                }
                for r in a["results"]
            ]
        ctx.respond({"throttle_time": 0, "results": results})

    ctx.call_native(ApiKey.DESCRIBE_CONFIGS, native, answer)


def _source(resource_type: int, c: Body) -> int:
    if c.get("is_default"):
        return DEFAULT_CONFIG
    return DYNAMIC_TOPIC_CONFIG if resource_type == TOPIC_RESOURCE else STATIC_BROKER_CONFIG


@api(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4)
def offset_for_leader_epoch(ctx: KafkaContext, body: OffsetForLeaderEpochRequest) -> None:
    native = {
        "replica_id": int(getattr(body, "replica_id", -1)),
        "topics": [
            {
                "name": t.topic,
                "partitions": [
                    {
                        "partition": int(p.partition),
                        "current_leader_epoch": int(p.current_leader_epoch),
                        "leader_epoch": int(p.leader_epoch),
                    }
                    for p in t.partitions
                ],
            }
            for t in body.topics
        ],
    }

    def answer(a: Body) -> None:
        code = whole_error(a)
        if code:
            topics = [
                {"topic": t.topic, "partitions": [
                    {"partition": p.partition, "error_code": code or ErrorCode.UNKNOWN_SERVER_ERROR}
                    for p in t.partitions]}
                for t in body.topics
            ]  # fmt: skip
        else:
            topics = [{"topic": t["name"], "partitions": t["partitions"]} for t in a["topics"]]
        ctx.respond({"throttle_time": 0, "topics": topics})

    ctx.call_native(ApiKey.OFFSET_FOR_LEADER_EPOCH, native, answer)
