"""Admin APIs: Metadata (3), CreateTopics (19), DeleteTopics (20), DescribeConfigs (32),
CreatePartitions (37), ElectLeaders (43), DescribeCluster (60).

Topic and cluster changes go to the active controller through whichever broker receives them;
answers carry one `error_code` (and optional `error_message`) per topic or resource.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from client.protocol.api_keys import ApiKey
from client.protocol.apis.data import THROTTLE
from client.protocol.schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    STRING,
    ApiSpec,
    Array,
    Field,
    Nullable,
    Struct,
    register,
)

ERROR_MESSAGE = Field("error_message", Nullable(STRING), default=None)

METADATA = register(
    ApiSpec(
        key=ApiKey.METADATA,
        name="Metadata",
        doc="Brokers, the controller, and topics with their partitions' leaders, replicas and "
        "ISR. `topics` nil asks for every topic; an unknown topic comes back with "
        "UNKNOWN_TOPIC_OR_PARTITION (or is created when both the request and the broker's "
        "auto.create.topics.enable allow it).",
        request=Struct(
            Field(
                "topics",
                Nullable(Array(Struct(Field("name", STRING), name="MetadataRequestTopic"))),
                default=None,
                doc="nil = all topics",
            ),
            Field("allow_auto_topic_creation", BOOL, default=False),
        ),
        response=Struct(
            Field(
                "brokers",
                Array(
                    Struct(
                        Field("node_id", INT32),
                        Field("host", STRING),
                        Field("port", INT32),
                        Field("rack", Nullable(STRING), default=None),
                        name="MetadataBroker",
                    )
                ),
            ),
            Field("cluster_id", Nullable(STRING), default=None),
            Field("controller_id", INT32, default=-1),
            Field(
                "topics",
                Array(
                    Struct(
                        Field("error_code", INT16),
                        Field("name", STRING),
                        Field(
                            "topic_id",
                            Nullable(STRING),
                            default=None,
                            doc="the id the controller gave the topic when it was created "
                            "(Kafka's form: 22 characters of URL-safe base64); a topic deleted "
                            "and recreated under the same name has a new one. Nil when the "
                            "topic is unknown or not described",
                        ),
                        Field("is_internal", BOOL, default=False),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    Field("error_code", INT16),
                                    Field("partition", INT32),
                                    Field("leader_id", INT32, doc="-1 when offline"),
                                    Field("leader_epoch", INT32, default=-1),
                                    Field("replica_nodes", Array(INT32)),
                                    Field("isr_nodes", Array(INT32)),
                                    Field("offline_replicas", Array(INT32), default=list),
                                    name="MetadataPartition",
                                )
                            ),
                            default=list,
                        ),
                        name="MetadataTopic",
                    )
                ),
            ),
            THROTTLE,
        ),
    )
)

CREATE_TOPICS = register(
    ApiSpec(
        key=ApiKey.CREATE_TOPICS,
        name="CreateTopics",
        doc="Create topics through the controller. -1 partitions / replication factor take the "
        "broker defaults (num.partitions, default.replication.factor); explicit `assignments` "
        "replace both. `validate_only` checks without creating.",
        request=Struct(
            Field(
                "topics",
                Array(
                    Struct(
                        Field("name", STRING),
                        Field("num_partitions", INT32, default=-1),
                        Field("replication_factor", INT16, default=-1),
                        Field(
                            "assignments",
                            Array(
                                Struct(
                                    Field("partition", INT32),
                                    Field("broker_ids", Array(INT32)),
                                    name="CreatableReplicaAssignment",
                                )
                            ),
                            default=list,
                        ),
                        Field(
                            "configs",
                            Array(
                                Struct(
                                    Field("name", STRING),
                                    Field("value", Nullable(STRING)),
                                    name="CreatableTopicConfig",
                                )
                            ),
                            default=list,
                        ),
                        name="CreatableTopic",
                    )
                ),
            ),
            Field("timeout_ms", INT32, default=30_000),
            Field("validate_only", BOOL, default=False),
        ),
        response=Struct(
            Field(
                "topics",
                Array(
                    Struct(
                        Field("name", STRING),
                        Field("error_code", INT16),
                        ERROR_MESSAGE,
                        Field("num_partitions", INT32, default=-1),
                        Field("replication_factor", INT16, default=-1),
                        name="CreatableTopicResult",
                    )
                ),
            ),
            THROTTLE,
        ),
    )
)

DELETE_TOPICS = register(
    ApiSpec(
        key=ApiKey.DELETE_TOPICS,
        name="DeleteTopics",
        doc="Delete topics through the controller; their partitions' data is removed by the "
        "brokers once the deletion is committed.",
        request=Struct(
            Field("topic_names", Array(STRING)),
            Field("timeout_ms", INT32, default=30_000),
        ),
        response=Struct(
            Field(
                "responses",
                Array(
                    Struct(
                        Field("name", STRING),
                        Field("error_code", INT16),
                        ERROR_MESSAGE,
                        name="DeletableTopicResult",
                    )
                ),
            ),
            THROTTLE,
        ),
    )
)

CREATE_PARTITIONS = register(
    ApiSpec(
        key=ApiKey.CREATE_PARTITIONS,
        name="CreatePartitions",
        doc="Grow topics to `count` partitions in total, through the controller (answered once "
        "committed). `count` not above the current number → INVALID_PARTITIONS; unknown topic → "
        "UNKNOWN_TOPIC_OR_PARTITION. `assignments` (nil = placed by the controller) lists the "
        "replicas of each new partition, leader first, one entry per new partition.",
        request=Struct(
            Field(
                "topics",
                Array(
                    Struct(
                        Field("name", STRING),
                        Field("count", INT32, doc="the new total number of partitions"),
                        Field(
                            "assignments",
                            Nullable(
                                Array(
                                    Struct(
                                        Field("broker_ids", Array(INT32)),
                                        name="CreatePartitionsAssignment",
                                    )
                                )
                            ),
                            default=None,
                        ),
                        name="CreatePartitionsTopic",
                    )
                ),
            ),
            Field("timeout_ms", INT32, default=30_000),
            Field("validate_only", BOOL, default=False),
        ),
        response=Struct(
            Field(
                "results",
                Array(
                    Struct(
                        Field("name", STRING),
                        Field("error_code", INT16),
                        ERROR_MESSAGE,
                        name="CreatePartitionsTopicResult",
                    )
                ),
            ),
            THROTTLE,
        ),
    )
)

ELECTION_PREFERRED = 0
ELECTION_UNCLEAN = 1

ELECT_LEADERS = register(
    ApiSpec(
        key=ApiKey.ELECT_LEADERS,
        name="ElectLeaders",
        doc="Elect partition leaders through the controller (answered once committed). "
        "`election_type` 0 (preferred): move leadership to the first replica where it is live "
        "and in the ISR (ELECTION_NOT_NEEDED when it already leads, "
        "PREFERRED_LEADER_NOT_AVAILABLE when it cannot). 1 (unclean): give an offline "
        "partition (no live ISR member) a leader from its live replicas, with ISR = [it], "
        "which may lose acknowledged records (ELECTION_NOT_NEEDED when the partition has a "
        "leader, ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is live). `topic_partitions` "
        "nil = every partition; the answer then lists only the partitions that were elected.",
        request=Struct(
            Field("election_type", INT8, default=ELECTION_PREFERRED, doc="0 preferred, 1 unclean"),
            Field(
                "topic_partitions",
                Nullable(
                    Array(
                        Struct(
                            Field("topic", STRING),
                            Field("partitions", Array(INT32)),
                            name="ElectLeadersTopic",
                        )
                    )
                ),
                default=None,
                doc="nil = all partitions",
            ),
            Field("timeout_ms", INT32, default=30_000),
        ),
        response=Struct(
            THROTTLE,
            Field("error_code", INT16, default=0, doc="whole-request error"),
            Field(
                "replica_election_results",
                Array(
                    Struct(
                        Field("topic", STRING),
                        Field(
                            "partition_result",
                            Array(
                                Struct(
                                    Field("partition_id", INT32),
                                    Field("error_code", INT16),
                                    ERROR_MESSAGE,
                                    name="ElectLeadersPartitionResult",
                                )
                            ),
                        ),
                        name="ElectLeadersTopicResult",
                    )
                ),
            ),
        ),
    )
)


def group_partitions(partitions: list[tuple[str, int]] | None) -> list[dict[str, Any]] | None:
    """[(topic, partition)] → ElectLeaders' topic_partitions ([{topic, partitions}])."""
    if partitions is None:
        return None
    grouped: dict[str, list[int]] = {}
    for topic, p in partitions:
        grouped.setdefault(topic, []).append(p)
    return [{"topic": t, "partitions": ps} for t, ps in grouped.items()]


def flatten_election_results(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ElectLeaders' replica_election_results → [{topic, partition, error_code, error_message}]."""
    return [
        {
            "topic": t["topic"],
            "partition": r["partition_id"],
            "error_code": r["error_code"],
            "error_message": r.get("error_message"),
        }
        for t in results
        for r in t["partition_result"]
    ]


def group_election_results(results: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """[{topic, partition, error_code, error_message}] → ElectLeaders' replica_election_results
    (topics in first-seen order)."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        grouped.setdefault(r["topic"], []).append(
            {
                "partition_id": r["partition"],
                "error_code": r["error_code"],
                "error_message": r.get("error_message"),
            }
        )
    return [{"topic": t, "partition_result": rs} for t, rs in grouped.items()]


RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

DESCRIBE_CONFIGS = register(
    ApiSpec(
        key=ApiKey.DESCRIBE_CONFIGS,
        name="DescribeConfigs",
        doc="Effective configuration of topics (resource_type 2) or brokers (4); "
        "`configuration_keys` nil lists every key.",
        request=Struct(
            Field(
                "resources",
                Array(
                    Struct(
                        Field("resource_type", INT8, doc="2 topic, 4 broker"),
                        Field("resource_name", STRING, doc="topic name or broker id"),
                        Field("configuration_keys", Nullable(Array(STRING)), default=None),
                        name="DescribeConfigsResource",
                    )
                ),
            ),
        ),
        response=Struct(
            Field(
                "results",
                Array(
                    Struct(
                        Field("error_code", INT16),
                        ERROR_MESSAGE,
                        Field("resource_type", INT8),
                        Field("resource_name", STRING),
                        Field(
                            "configs",
                            Array(
                                Struct(
                                    Field("name", STRING),
                                    Field("value", Nullable(STRING)),
                                    Field("read_only", BOOL, default=False),
                                    Field("is_default", BOOL, default=False),
                                    Field("is_sensitive", BOOL, default=False),
                                    name="DescribeConfigsResourceResult",
                                )
                            ),
                            default=list,
                        ),
                        name="DescribeConfigsResult",
                    )
                ),
            ),
            THROTTLE,
        ),
    )
)

INCREMENTAL_ALTER_CONFIGS = register(
    ApiSpec(
        key=ApiKey.INCREMENTAL_ALTER_CONFIGS,
        name="IncrementalAlterConfigs",
        doc="Set (`config_operation` 0) or delete (1, back to the default) configs of topics "
        "(resource_type 2) or brokers (4), or append (2) / subtract (3) items of a list-typed "
        "topic key (`cleanup.policy`; another key → INVALID_CONFIG), through the controller "
        "(answered once committed). "
        "Unknown topic → UNKNOWN_TOPIC_OR_PARTITION; an unknown key or a bad value → "
        "INVALID_CONFIG naming it. Topic changes reach the live logs without a restart.",
        request=Struct(
            Field(
                "resources",
                Array(
                    Struct(
                        Field("resource_type", INT8, doc="2 topic, 4 broker"),
                        Field("resource_name", STRING, doc="topic name or broker id"),
                        Field(
                            "configs",
                            Array(
                                Struct(
                                    Field("name", STRING),
                                    Field(
                                        "config_operation",
                                        INT8,
                                        default=0,
                                        doc="0 set, 1 delete, 2 append, 3 subtract",
                                    ),
                                    Field("value", Nullable(STRING), default=None),
                                    name="AlterableConfig",
                                )
                            ),
                        ),
                        name="AlterConfigsResource",
                    )
                ),
            ),
            Field("validate_only", BOOL, default=False),
        ),
        response=Struct(
            Field(
                "responses",
                Array(
                    Struct(
                        Field("error_code", INT16),
                        ERROR_MESSAGE,
                        Field("resource_type", INT8),
                        Field("resource_name", STRING),
                        name="AlterConfigsResourceResponse",
                    )
                ),
            ),
            THROTTLE,
        ),
    )
)

ALTER_CONFIGS = register(
    ApiSpec(
        key=ApiKey.ALTER_CONFIGS,
        name="AlterConfigs",
        doc="Kafka's legacy AlterConfigs: each resource's dynamic configs become exactly those "
        "given (a key not named goes back to its default; a null value too), checked and "
        "answered as IncrementalAlterConfigs.",
        request=Struct(
            Field(
                "resources",
                Array(
                    Struct(
                        Field("resource_type", INT8, doc="2 topic, 4 broker"),
                        Field("resource_name", STRING, doc="topic name or broker id"),
                        Field(
                            "configs",
                            Array(
                                Struct(
                                    Field("name", STRING),
                                    Field("value", Nullable(STRING), default=None),
                                    name="AlterConfigsEntry",
                                )
                            ),
                        ),
                        name="AlterConfigsReplacedResource",
                    )
                ),
            ),
            Field("validate_only", BOOL, default=False),
        ),
        response=INCREMENTAL_ALTER_CONFIGS.response,
    )
)

DESCRIBE_CLUSTER = register(
    ApiSpec(
        key=ApiKey.DESCRIBE_CLUSTER,
        name="DescribeCluster",
        doc="The cluster id, the active controller and the live (unfenced) brokers; with "
        "`include_fenced_brokers` the fenced ones too, marked `is_fenced`.",
        request=Struct(Field("include_fenced_brokers", BOOL, default=False)),
        response=Struct(
            Field("error_code", INT16),
            ERROR_MESSAGE,
            Field("cluster_id", STRING, default=""),
            Field("controller_id", INT32, default=-1),
            Field(
                "brokers",
                Array(
                    Struct(
                        Field("broker_id", INT32),
                        Field("host", STRING),
                        Field("port", INT32),
                        Field("rack", Nullable(STRING), default=None),
                        Field("is_fenced", BOOL, default=False),
                        name="DescribeClusterBroker",
                    )
                ),
                default=list,
            ),
            THROTTLE,
        ),
    )
)
