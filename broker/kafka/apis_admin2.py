"""More admin APIs on the Kafka listener, each translated to the native handler:

    API                       versions  native
    CreatePartitions          0-3       CreatePartitions (37)
    DeleteRecords             0-2       DeleteRecords (21)
    AlterConfigs              0-2       AlterConfigs (33): the resource's dynamic configs
                                        replaced by those given (the others deleted)
    IncrementalAlterConfigs   0-1       IncrementalAlterConfigs (44): set, delete, append,
                                        subtract (the last two on list-typed keys)
    DescribeCluster           0-1       DescribeCluster (60): brokers at their address on
                                        the request's listener
    ElectLeaders              0-2       ElectLeaders (43): preferred (0) or unclean (1)

Threads: I/O threads; answers from the thread the native handler answers on.
"""

from __future__ import annotations

from broker.kafka.apis import api, controller_for_clients
from broker.kafka.codec import millis
from broker.kafka.kio_requests import (
    AlterConfigsRequest,
    CreatePartitionsRequest,
    DeleteRecordsRequest,
    DescribeClusterRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
)
from broker.kafka.request import KafkaContext, whole_error
from client.protocol import ApiKey
from client.protocol.body import Body


@api(ApiKey.CREATE_PARTITIONS, 0, 3)
def create_partitions(ctx: KafkaContext, body: CreatePartitionsRequest) -> None:
    native = {
        "topics": [
            {
                "name": t.name,
                "count": int(t.count),
                "assignments": None
                if t.assignments is None
                else [{"broker_ids": list(a.broker_ids)} for a in t.assignments],
            }
            for t in body.topics
        ],
        "timeout_ms": millis(body.timeout),
        "validate_only": bool(body.validate_only),
    }

    def answer(a: Body) -> None:
        code = whole_error(a)
        rows = a.get("results") or [
            {"name": t.name, "error_code": code, "error_message": a.get("error_message")}
            for t in body.topics
        ]
        ctx.respond({"throttle_time": 0, "results": rows})

    ctx.call_native(ApiKey.CREATE_PARTITIONS, native, answer)


@api(ApiKey.DELETE_RECORDS, 0, 2)
def delete_records(ctx: KafkaContext, body: DeleteRecordsRequest) -> None:
    native = {
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {"partition": int(p.partition_index), "offset": int(p.offset)}
                    for p in t.partitions
                ],
            }
            for t in body.topics
        ],
        "timeout_ms": millis(body.timeout),
    }

    def answer(a: Body) -> None:
        code = whole_error(a)
        if code:
            topics = [
                {"name": t.name, "partitions": [
                    {"partition_index": p.partition_index, "low_watermark": -1, "error_code": code}
                    for p in t.partitions]}
                for t in body.topics
            ]  # fmt: skip
        else:
            topics = [
                {"name": t["name"], "partitions": [
                    {"partition_index": p["partition"], "low_watermark": p["low_watermark"],
                     "error_code": p["error_code"]}
                    for p in t["partitions"]]}
                for t in a["topics"]
            ]  # fmt: skip
        ctx.respond({"throttle_time": 0, "topics": topics})

    ctx.call_native(ApiKey.DELETE_RECORDS, native, answer)


def _operation(c: object) -> Body:
    """An IncrementalAlterConfigs entry's operation (AlterConfigs' entries have none)."""
    op = getattr(c, "config_operation", None)
    return {"config_operation": int(op)} if op is not None else {}


@api(ApiKey.ALTER_CONFIGS, 0, 2)
@api(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)
def alter_configs(
    ctx: KafkaContext, body: AlterConfigsRequest | IncrementalAlterConfigsRequest
) -> None:
    """Both to the native API of the same key: AlterConfigs' entries are name and value (the
    controller deletes the keys not named), IncrementalAlterConfigs' carry an operation."""
    native = {
        "resources": [
            {
                "resource_type": int(r.resource_type),
                "resource_name": r.resource_name,
                "configs": [{"name": c.name, "value": c.value} | _operation(c) for c in r.configs],
            }
            for r in body.resources
        ],
        "validate_only": bool(body.validate_only),
    }

    def answer(a: Body) -> None:
        code = whole_error(a)
        rows = a.get("responses") or [
            {"error_code": code, "error_message": a.get("error_message"),
             "resource_type": r.resource_type, "resource_name": r.resource_name}
            for r in body.resources
        ]  # fmt: skip
        ctx.respond({"throttle_time": 0, "responses": rows})

    ctx.call_native(ctx.api_key, native, answer)


@api(ApiKey.DESCRIBE_CLUSTER, 0, 1)
def describe_cluster(ctx: KafkaContext, body: DescribeClusterRequest) -> None:
    def answer(a: Body) -> None:
        ctx.respond(
            {
                "throttle_time": 0,
                "error_code": a.get("error_code", 0),
                "error_message": a.get("error_message"),
                "endpoint_type": 1,  # brokers
                "cluster_id": a.get("cluster_id") or "",
                "controller_id": controller_for_clients(
                    ctx, a.get("controller_id"), list(a.get("brokers", ()))
                ),
                "brokers": [
                    {
                        "broker_id": b["broker_id"],
                        "host": b["host"],
                        "port": b["port"],
                        "rack": b.get("rack"),
                    }
                    for b in a.get("brokers", ())
                ],
                "cluster_authorized_operations": -2147483648,
            }
        )

    ctx.call_native(ApiKey.DESCRIBE_CLUSTER, {"include_fenced_brokers": False}, answer)


@api(ApiKey.ELECT_LEADERS, 0, 2)
def elect_leaders(ctx: KafkaContext, body: ElectLeadersRequest) -> None:
    requested = body.topic_partitions
    native = {
        "election_type": int(getattr(body, "election_type", 0)),  # v0: preferred only
        "topic_partitions": None
        if requested is None
        else [{"topic": t.topic, "partitions": list(t.partitions)} for t in requested],
        "timeout_ms": millis(body.timeout),
    }

    def answer(a: Body) -> None:
        code = whole_error(a)
        ctx.respond(
            {
                "throttle_time": 0,
                "error_code": code or a.get("error_code", 0),
                "replica_election_results": [] if code else a["replica_election_results"],
            },
            code,
        )

    ctx.call_native(ApiKey.ELECT_LEADERS, native, answer)
