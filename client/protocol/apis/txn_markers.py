"""The partition leaders' side of transactions. WriteTxnMarkers (27), Kafka's v1 shape: the
transaction coordinator asks partition leaders to append COMMIT or ABORT markers
(client/records/control.py) ending a producer's transaction (an inter-broker API:
CLUSTER_ACTION on the cluster). DescribeProducers (61): each partition's producer state."""

from __future__ import annotations

from client.protocol.api_keys import ApiKey
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

WRITE_TXN_MARKERS = register(
    ApiSpec(
        key=ApiKey.WRITE_TXN_MARKERS,
        name="WriteTxnMarkers",
        doc="Append a transaction marker (a control batch: COMMIT when transaction_result is "
        "true, else ABORT) for each producer to each named partition, as its leader. A "
        "partition is answered once the high watermark passed its marker (acks=all). Per "
        "partition: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH "
        "(an epoch older than the producer's on that partition), "
        "TRANSACTION_COORDINATOR_FENCED (a coordinator epoch older than the last marker's), "
        "NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT. Sent by the transaction coordinator.",
        request=Struct(
            Field(
                "markers",
                Array(
                    Struct(
                        Field("producer_id", INT64),
                        Field("producer_epoch", INT16),
                        Field("transaction_result", BOOL, doc="true COMMIT, false ABORT"),
                        Field(
                            "topics",
                            Array(
                                Struct(
                                    Field("name", STRING, doc="topic name"),
                                    Field("partition_indexes", Array(INT32)),
                                    name="WritableTxnMarkerTopic",
                                )
                            ),
                        ),
                        Field("coordinator_epoch", INT32),
                        name="WritableTxnMarker",
                    )
                ),
            ),
        ),
        response=Struct(
            Field(
                "markers",
                Array(
                    Struct(
                        Field("producer_id", INT64),
                        Field(
                            "topics",
                            Array(
                                Struct(
                                    Field("name", STRING, doc="topic name"),
                                    Field(
                                        "partitions",
                                        Array(
                                            Struct(
                                                Field("partition_index", INT32),
                                                Field("error_code", INT16),
                                                name="WritableTxnMarkerPartitionResult",
                                            )
                                        ),
                                    ),
                                    name="WritableTxnMarkerTopicResult",
                                )
                            ),
                        ),
                        name="WritableTxnMarkerResult",
                    )
                ),
            ),
        ),
    )
)

DESCRIBE_PRODUCERS = register(
    ApiSpec(
        key=ApiKey.DESCRIBE_PRODUCERS,
        name="DescribeProducers",
        doc="The active producers of each named partition, as its leader's producer state "
        "holds them (Kafka's; what `gregor transactions describe-producers` shows). Per "
        "partition: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, "
        "TOPIC_AUTHORIZATION_FAILED (READ on the TOPIC), KAFKA_STORAGE_ERROR. Per producer: "
        "`last_sequence` of its last batch (-1: none since its epoch began), `last_timestamp` "
        "the max timestamp of its last batch or marker (-1: unknown, a state restored from a "
        "snapshot written before it was kept), `coordinator_epoch` of its last marker (-1: "
        "none), `current_txn_start_offset` the first offset of its open transaction (-1: none).",
        request=Struct(
            Field(
                "topics",
                Array(
                    Struct(
                        Field("name", STRING, doc="topic name"),
                        Field("partition_indexes", Array(INT32)),
                        name="DescribeProducersTopic",
                    )
                ),
            ),
        ),
        response=Struct(
            THROTTLE,
            Field(
                "topics",
                Array(
                    Struct(
                        Field("name", STRING, doc="topic name"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    Field("partition_index", INT32),
                                    Field("error_code", INT16),
                                    Field("error_message", Nullable(STRING), default=None),
                                    Field(
                                        "active_producers",
                                        Array(
                                            Struct(
                                                Field("producer_id", INT64),
                                                Field("producer_epoch", INT32),
                                                Field("last_sequence", INT32, default=-1),
                                                Field("last_timestamp", INT64, default=-1),
                                                Field("coordinator_epoch", INT32, default=-1),
                                                Field(
                                                    "current_txn_start_offset", INT64, default=-1
                                                ),
                                                name="ProducerState",
                                            )
                                        ),
                                        default=[],
                                    ),
                                    name="DescribeProducersPartition",
                                )
                            ),
                        ),
                        name="DescribeProducersTopicResult",
                    )
                ),
            ),
        ),
    )
)
