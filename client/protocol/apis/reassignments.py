"""Partition reassignment APIs (KIP-455): AlterPartitionReassignments (45) and
ListPartitionReassignments (46), with Kafka's field names; and DescribeLogDirs (35), the
size of each replica a broker holds (what a move has left to copy).

Both go to the active controller through whichever broker receives them. A reassignment in
flight shows as the union of the original and target replicas (`replicas`), with the replicas
being added and removed; it completes once every target replica is in the ISR.
"""

from __future__ import annotations

from typing import Any

from client.protocol.api_keys import ApiKey
from client.protocol.apis.admin import ERROR_MESSAGE
from client.protocol.apis.data import THROTTLE
from client.protocol.schema import (
    BOOL,
    INT16,
    INT32,
    INT64,
    STRING,
    ApiSpec,
    Array,
    Field,
    Nullable,
    Struct,
    register,
)

ALTER_PARTITION_REASSIGNMENTS = register(
    ApiSpec(
        key=ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        name="AlterPartitionReassignments",
        doc="Start, replace or cancel partition reassignments (answered once the records are "
        "committed). `replicas` is the target replica list; nil cancels the partition's "
        "reassignment in flight (NO_REASSIGNMENT_IN_PROGRESS when there is none) and returns "
        "it to its original replicas. The added replicas catch up as followers and join the "
        "ISR; once all the target replicas are in the ISR the leader moves off a removed "
        "replica and the removed replicas stop and delete their logs. Targets naming an "
        "unregistered or fenced broker, duplicates or no broker: INVALID_REPLICA_ASSIGNMENT.",
        request=Struct(
            Field("timeout_ms", INT32, default=60_000),
            Field(
                "topics",
                Array(
                    Struct(
                        Field("name", STRING),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    Field("partition_index", INT32),
                                    Field(
                                        "replicas",
                                        Nullable(Array(INT32)),
                                        default=None,
                                        doc="the target replicas; nil cancels",
                                    ),
                                    name="ReassignablePartition",
                                )
                            ),
                        ),
                        name="ReassignableTopic",
                    )
                ),
            ),
        ),
        response=Struct(
            THROTTLE,
            Field("error_code", INT16, default=0, doc="whole-request error"),
            ERROR_MESSAGE,
            Field(
                "responses",
                Array(
                    Struct(
                        Field("name", STRING),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    Field("partition_index", INT32),
                                    Field("error_code", INT16),
                                    ERROR_MESSAGE,
                                    name="ReassignablePartitionResponse",
                                )
                            ),
                        ),
                        name="ReassignableTopicResponse",
                    )
                ),
            ),
        ),
    )
)

LIST_PARTITION_REASSIGNMENTS = register(
    ApiSpec(
        key=ApiKey.LIST_PARTITION_REASSIGNMENTS,
        name="ListPartitionReassignments",
        doc="The reassignments in flight: of the partitions named, or of every partition when "
        "`topics` is nil. Partitions without one (or unknown) are left out of the answer.",
        request=Struct(
            Field("timeout_ms", INT32, default=60_000),
            Field(
                "topics",
                Nullable(
                    Array(
                        Struct(
                            Field("name", STRING),
                            Field("partition_indexes", Array(INT32)),
                            name="ListPartitionReassignmentsTopics",
                        )
                    )
                ),
                default=None,
                doc="nil = every partition",
            ),
        ),
        response=Struct(
            THROTTLE,
            Field("error_code", INT16, default=0),
            ERROR_MESSAGE,
            Field(
                "topics",
                Array(
                    Struct(
                        Field("name", STRING),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    Field("partition_index", INT32),
                                    Field("replicas", Array(INT32)),
                                    Field("adding_replicas", Array(INT32)),
                                    Field("removing_replicas", Array(INT32)),
                                    name="OngoingPartitionReassignment",
                                )
                            ),
                        ),
                        name="OngoingTopicReassignment",
                    )
                ),
            ),
        ),
    )
)


DESCRIBE_LOG_DIRS = register(
    ApiSpec(
        key=ApiKey.DESCRIBE_LOG_DIRS,
        name="DescribeLogDirs",
        doc="The log directories of the broker asked (each broker answers for itself), with "
        "the size in bytes of each replica it holds there: of the partitions named, or of all "
        "when `topics` is nil. A directory that failed answers KAFKA_STORAGE_ERROR. "
        "`offset_lag` is 0 and `is_future_key` false (replicas do not move between log dirs).",
        request=Struct(
            Field(
                "topics",
                Nullable(
                    Array(
                        Struct(
                            Field("topic", STRING),
                            Field("partitions", Array(INT32)),
                            name="DescribableLogDirTopic",
                        )
                    )
                ),
                default=None,
                doc="nil = every replica",
            ),
        ),
        response=Struct(
            THROTTLE,
            Field("error_code", INT16, default=0),
            Field(
                "results",
                Array(
                    Struct(
                        Field("error_code", INT16),
                        Field("log_dir", STRING),
                        Field(
                            "topics",
                            Array(
                                Struct(
                                    Field("name", STRING),
                                    Field(
                                        "partitions",
                                        Array(
                                            Struct(
                                                Field("partition_index", INT32),
                                                Field("partition_size", INT64),
                                                Field("offset_lag", INT64, default=0),
                                                Field("is_future_key", BOOL, default=False),
                                                name="DescribeLogDirsPartition",
                                            )
                                        ),
                                    ),
                                    name="DescribeLogDirsTopic",
                                )
                            ),
                        ),
                        Field("total_bytes", INT64, default=-1),
                        Field("usable_bytes", INT64, default=-1),
                        name="DescribeLogDirsResult",
                    )
                ),
            ),
        ),
    )
)


def group_topic_partitions(partitions: list[tuple[str, int]] | None) -> list[dict[str, Any]] | None:
    """[(topic, partition)] → ListPartitionReassignments' topics ([{name, partition_indexes}])."""
    if partitions is None:
        return None
    grouped: dict[str, list[int]] = {}
    for topic, p in partitions:
        grouped.setdefault(topic, []).append(p)
    return [{"name": t, "partition_indexes": ps} for t, ps in grouped.items()]


def flatten_topic_partitions(topics: list[dict[str, Any]] | None) -> list[tuple[str, int]] | None:
    """Inverse of group_topic_partitions."""
    if topics is None:
        return None
    return [(t["name"], p) for t in topics for p in t["partition_indexes"]]
