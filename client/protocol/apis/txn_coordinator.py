"""Transaction coordinator APIs: AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
DescribeTransactions (65), ListTransactions (66), and TxnOffsetCommit (28), which the group
coordinator answers (docs/transactions.md).

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

ADD_OFFSETS_TO_TXN = register(
    ApiSpec(
        key=ApiKey.ADD_OFFSETS_TO_TXN,
        name="AddOffsetsToTxn",
        doc="Add the `__consumer_offsets` partition of `group_id` to the producer's transaction "
        "(so EndTxn writes its marker there), before TxnOffsetCommit to the group's "
        "coordinator. Errors as AddPartitionsToTxn's, plus GROUP_AUTHORIZATION_FAILED (READ "
        "on the GROUP) and TRANSACTIONAL_ID_AUTHORIZATION_FAILED (WRITE on the id).",
        request=Struct(
            Field("transactional_id", STRING),
            Field("producer_id", INT64),
            Field("producer_epoch", INT16),
            Field("group_id", STRING),
        ),
        response=Struct(
            THROTTLE,
            Field("error_code", INT16),
        ),
    )
)

TXN_OFFSET_COMMIT = register(
    ApiSpec(
        key=ApiKey.TXN_OFFSET_COMMIT,
        name="TxnOffsetCommit",
        doc="Commit a group's offsets inside the producer's transaction; sent to the GROUP's "
        "coordinator after AddOffsetsToTxn. The offsets are written to `__consumer_offsets` as "
        "a transactional batch of the producer and stay pending (not in OffsetFetch) until "
        "the transaction's COMMIT marker (then they are the group's committed offsets) or "
        "ABORT marker (dropped). `member_id`/`generation_id` (the consumer's member epoch) as "
        "Kafka's v3: checked when given (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); empty/-1 "
        "skips the check. PRODUCER_FENCED for an epoch older than the partition's. READ on "
        "the GROUP, WRITE on the TRANSACTIONAL_ID, READ on each TOPIC.",
        request=Struct(
            Field("transactional_id", STRING),
            Field("group_id", STRING),
            Field("producer_id", INT64),
            Field("producer_epoch", INT16),
            Field("generation_id", INT32, default=-1),
            Field("member_id", STRING, default=""),
            Field("group_instance_id", Nullable(STRING), default=None),
            Field(
                "topics",
                Array(
                    Struct(
                        Field("name", STRING),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    Field("partition", INT32),
                                    Field("committed_offset", INT64),
                                    Field("committed_leader_epoch", INT32, default=-1),
                                    Field("committed_metadata", Nullable(STRING), default=None),
                                    name="TxnOffsetCommitPartition",
                                )
                            ),
                        ),
                        name="TxnOffsetCommitTopic",
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
                                    Field("partition", INT32),
                                    Field("error_code", INT16),
                                    name="TxnOffsetCommitPartitionResult",
                                )
                            ),
                        ),
                        name="TxnOffsetCommitTopicResult",
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

DESCRIBE_TRANSACTIONS = register(
    ApiSpec(
        key=ApiKey.DESCRIBE_TRANSACTIONS,
        name="DescribeTransactions",
        doc="The coordinator's state of each transactional id (send it to the id's coordinator: "
        "FindCoordinator key_type 1). Per id: NONE, NOT_COORDINATOR, "
        "COORDINATOR_LOAD_IN_PROGRESS, TRANSACTIONAL_ID_NOT_FOUND or "
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED (DESCRIBE on the TRANSACTIONAL_ID). "
        "`transaction_state` is Kafka's name (Empty, Ongoing, PrepareCommit, ...); "
        "`transaction_start_time_ms` is -1 outside a transaction; `topics` lists the "
        "transaction's partitions.",
        request=Struct(Field("transactional_ids", Array(STRING))),
        response=Struct(
            THROTTLE,
            Field(
                "transaction_states",
                Array(
                    Struct(
                        Field("error_code", INT16),
                        Field("transactional_id", STRING),
                        Field("transaction_state", STRING, default=""),
                        Field("transaction_timeout_ms", INT32, default=0),
                        Field("transaction_start_time_ms", INT64, default=-1),
                        Field("producer_id", INT64, default=-1),
                        Field("producer_epoch", INT16, default=-1),
                        Field(
                            "topics",
                            Array(
                                Struct(
                                    Field("topic", STRING),
                                    Field("partitions", Array(INT32)),
                                    name="DescribeTransactionsTopic",
                                )
                            ),
                            default=[],
                        ),
                        name="DescribeTransactionsState",
                    )
                ),
                default=[],
            ),
        ),
    )
)

LIST_TRANSACTIONS = register(
    ApiSpec(
        key=ApiKey.LIST_TRANSACTIONS,
        name="ListTransactions",
        doc="The transactional ids this broker coordinates (ask every broker for the whole "
        "cluster), those the principal may DESCRIBE, filtered by state (Kafka's names; "
        "unknown ones are echoed in `unknown_state_filters`), by producer id, and by "
        "`duration_filter_ms` (only transactions open longer than that; -1: all). "
        "COORDINATOR_LOAD_IN_PROGRESS while a partition of `__transaction_state` is loading.",
        request=Struct(
            Field("state_filters", Array(STRING), default=[]),
            Field("producer_id_filters", Array(INT64), default=[]),
            Field("duration_filter_ms", INT64, default=-1),
        ),
        response=Struct(
            THROTTLE,
            Field("error_code", INT16),
            Field("unknown_state_filters", Array(STRING), default=[]),
            Field(
                "transaction_states",
                Array(
                    Struct(
                        Field("transactional_id", STRING),
                        Field("producer_id", INT64),
                        Field("transaction_state", STRING),
                        name="ListTransactionsState",
                    )
                ),
                default=[],
            ),
        ),
    )
)
