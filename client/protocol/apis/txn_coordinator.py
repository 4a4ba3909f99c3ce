"""Transaction coordinator APIs: AddPartitionsToTxn (24), EndTxn (26) (docs/transactions.md).

InitProducerId (22) with a transactional_id and FindCoordinator (10) with key_type 1 reach the
same coordinator; their schemas are in data.py and groups.py. WriteTxnMarkers (27), which the
coordinator sends to partition leaders, is declared with the partition side's APIs.
"""

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

ADD_PARTITIONS_TO_TXN = register(
    ApiSpec(
        key=ApiKey.ADD_PARTITIONS_TO_TXN,
        name="AddPartitionsToTxn",
        doc="Add partitions to the producer's ongoing transaction (Empty or Complete*: a new one "
        "starts) before it produces to them. Answered once `__transaction_state` has the "
        "record (acks=all). Per partition: NONE, or the transaction's error (PRODUCER_FENCED, "
        "INVALID_PRODUCER_ID_MAPPING, CONCURRENT_TRANSACTIONS while the previous one is being "
        "ended, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...); a partition refused "
        "alone (TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION) makes the others "
        "OPERATION_NOT_ATTEMPTED, as Kafka.",
        request=Struct(
            Field("transactional_id", STRING),
            Field("producer_id", INT64),
            Field("producer_epoch", INT16),
            Field(
                "topics",
                Array(
                    Struct(
                        Field("name", STRING),
                        Field("partitions", Array(INT32)),
                        name="AddPartitionsTopic",
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
                        Field("name", STRING),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    Field("partition_index", INT32),
                                    Field("error_code", INT16),
                                    name="AddPartitionsPartitionResult",
                                )
                            ),
                        ),
                        name="AddPartitionsTopicResult",
                    )
                ),
                default=[],
            ),
        ),
    )
)

END_TXN = register(
    ApiSpec(
        key=ApiKey.END_TXN,
        name="EndTxn",
        doc="Commit (`committed` true) or abort the producer's transaction. Answered once "
        "PrepareCommit/PrepareAbort is in `__transaction_state` (acks=all); the coordinator "
        "then writes the COMMIT/ABORT markers to every partition of the transaction "
        "(WriteTxnMarkers) and CompleteCommit/CompleteAbort. A retried EndTxn of a finished "
        "transaction answers NONE; the other outcome INVALID_TXN_STATE; while the markers are "
        "being written CONCURRENT_TRANSACTIONS.",
        request=Struct(
            Field("transactional_id", STRING),
            Field("producer_id", INT64),
            Field("producer_epoch", INT16),
            Field("committed", BOOL),
        ),
        response=Struct(
            THROTTLE,
            Field("error_code", INT16),
            Field("error_message", Nullable(STRING), default=None),
        ),
    )
)
