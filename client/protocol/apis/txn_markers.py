"""WriteTxnMarkers (27), Kafka's v1 shape: the transaction coordinator asks partition leaders
to append COMMIT or ABORT markers (client/records/control.py) ending a producer's transaction.
An inter-broker API (CLUSTER_ACTION on the cluster)."""

from __future__ import annotations

from client.protocol.api_keys import ApiKey
from client.protocol.schema import (
    BOOL,
    INT16,
    INT32,
    INT64,
    STRING,
    ApiSpec,
    Array,
    Field,
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
