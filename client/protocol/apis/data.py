"""Data-path APIs: Produce (0), Fetch (1), ListOffsets (2), DeleteRecords (21),
InitProducerId (22), OffsetForLeaderEpoch (23).

Topic/partition nesting follows Kafka: a request carries `topics: [{name, partitions: [{partition,
...}]}]` and the response mirrors it with a per-partition `error_code`. Record batches travel as
msgpack `bin` in `records` (client/records layout) and are never re-encoded by the broker.
"""

from __future__ import annotations

from client.protocol.api_keys import ApiKey
from client.protocol.schema import (
    BYTES,
    INT8,
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

DEFAULT_FETCH_MAX_BYTES = 50 * 1024 * 1024
DEFAULT_PARTITION_MAX_BYTES = 1024 * 1024


def topics(partition: Struct, prefix: str) -> Array:
    """`[{name, partitions: [partition]}]`: the nesting every data-path API shares."""
    return Array(
        Struct(
            Field("name", STRING, doc="topic name"),
            Field("partitions", Array(partition)),
            name=f"{prefix}Topic",
        )
    )


THROTTLE = Field(
    "throttle_time_ms",
    INT32,
    default=0,
    doc="how long the broker throttles this connection (client quotas): it reads no further"
    " request from it meanwhile, and the client sends it none (KIP-219)",
)

PRODUCE = register(
    ApiSpec(
        key=ApiKey.PRODUCE,
        name="Produce",
        doc="Append record batches to partition leaders. With acks=0 the broker sends no "
        "response at all; acks=1 answers once the leader appended; acks=-1 (all) once the ISR "
        "has the batch and it is flushed per the topic's flush policy.",
        request=Struct(
            Field("transactional_id", Nullable(STRING), default=None),
            Field("acks", INT16, default=-1, doc="-1 all in-sync replicas, 0 none, 1 leader"),
            Field("timeout_ms", INT32, default=30_000, doc="how long to wait for acks"),
            Field(
                "topics",
                topics(
                    Struct(
                        Field("partition", INT32),
                        Field("records", BYTES, doc="one or more record batches"),
                        name="ProducePartition",
                    ),
                    "Produce",
                ),
            ),
        ),
        response=Struct(
            Field(
                "topics",
                topics(
                    Struct(
                        Field("partition", INT32),
                        Field("error_code", INT16),
                        Field("error_message", Nullable(STRING), default=None),
                        Field("base_offset", INT64, default=-1, doc="offset of the first record"),
                        Field("log_append_time_ms", INT64, default=-1, doc="-1 = CreateTime"),
                        Field("log_start_offset", INT64, default=-1),
                        name="ProducePartitionResponse",
                    ),
                    "ProduceResponse",
                ),
            ),
            THROTTLE,
        ),
    )
)

FETCH = register(
    ApiSpec(
        key=ApiKey.FETCH,
        name="Fetch",
        doc="Read record batches from `fetch_offset`. The broker waits up to `max_wait_ms` for "
        "`min_bytes`; consumers (replica_id -1) see only offsets below the high watermark. A "
        "partition's `records` may end with a partial batch, which the reader drops.",
        request=Struct(
            Field("replica_id", INT32, default=-1, doc="-1 for consumers, broker id for followers"),
            Field("max_wait_ms", INT32, default=500),
            Field("min_bytes", INT32, default=1),
            Field("max_bytes", INT32, default=DEFAULT_FETCH_MAX_BYTES),
            Field("isolation_level", INT8, default=0, doc="0 read_uncommitted, 1 read_committed"),
            Field(
                "session_id",
                INT32,
                default=0,
                doc="incremental fetch session (KIP-227, followers only): 0 asks for none or a "
                "new one, else the id the leader gave",
            ),
            Field(
                "session_epoch",
                INT32,
                default=-1,
                doc="-1 full fetch without a session (consumers); 0 full fetch opening a new "
                "session; k > 0 the k-th incremental fetch of `session_id`: `topics` lists only "
                "partitions added or whose fetch state changed",
            ),
            Field(
                "topics",
                topics(
                    Struct(
                        Field("partition", INT32),
                        Field("fetch_offset", INT64),
                        Field("partition_max_bytes", INT32, default=DEFAULT_PARTITION_MAX_BYTES),
                        Field("current_leader_epoch", INT32, default=-1),
                        Field("last_fetched_epoch", INT32, default=-1),
                        Field(
                            "log_start_offset",
                            INT64,
                            default=-1,
                            doc="followers only: their log start offset (a DeleteRecords "
                            "waits until every ISR member's reached its offset)",
                        ),
                        name="FetchPartition",
                    ),
                    "Fetch",
                ),
            ),
            Field(
                "forgotten_topics",
                Array(
                    Struct(
                        Field("name", STRING, doc="topic name"),
                        Field("partitions", Array(INT32)),
                        name="FetchForgottenTopic",
                    )
                ),
                default=list,
                doc="incremental fetches: partitions to drop from the session",
            ),
        ),
        response=Struct(
            Field(
                "error_code",
                INT16,
                default=0,
                doc="whole-request error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH:"
                " the follower starts over with a full fetch)",
            ),
            Field(
                "session_id",
                INT32,
                default=0,
                doc="the fetch session the answer belongs to (0: none). An incremental answer "
                "lists only partitions with records, a changed high watermark or log start "
                "offset, or an error",
            ),
            Field(
                "topics",
                topics(
                    Struct(
                        Field("partition", INT32),
                        Field("error_code", INT16),
                        Field("high_watermark", INT64, default=-1),
                        Field(
                            "last_stable_offset",
                            INT64,
                            default=-1,
                            doc="read_committed: the partition's last stable offset (records "
                            "stop there); read_uncommitted: the high watermark",
                        ),
                        Field(
                            "log_start_offset",
                            INT64,
                            default=-1,
                            doc="the leader's; a follower moves its own up to it (never past "
                            "its log end)",
                        ),
                        Field("records", BYTES, default=b"", doc="record batches, maybe partial"),
                        Field(
                            "aborted_transactions",
                            Array(
                                Struct(
                                    Field("producer_id", INT64),
                                    Field("first_offset", INT64),
                                    name="AbortedTransaction",
                                )
                            ),
                            default=list,
                            doc="read_committed: the aborted transactions overlapping the "
                            "records returned (their producer's records from first_offset up "
                            "to its ABORT marker are to be dropped); empty otherwise",
                        ),
                        Field(
                            "diverging_epoch",
                            INT32,
                            default=-1,
                            doc="the largest leader epoch <= last_fetched_epoch when what the "
                            "fetcher holds or read diverged from the leader's log (KIP-320), "
                            "else -1 (also -1 when the leader knows no epoch that old: then "
                            "diverging_end_offset is its log start)",
                        ),
                        Field(
                            "diverging_end_offset",
                            INT64,
                            default=-1,
                            doc="... and that epoch's end offset on the leader (-1: no "
                            "divergence): a follower truncates to it, a consumer whose position "
                            "is past it detects truncation",
                        ),
                        name="FetchPartitionResponse",
                    ),
                    "FetchResponse",
                ),
                default=list,
            ),
            THROTTLE,
        ),
    )
)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1

LIST_OFFSETS = register(
    ApiSpec(
        key=ApiKey.LIST_OFFSETS,
        name="ListOffsets",
        doc="Offsets by time: timestamp -2 gives the log start offset, -1 the high watermark "
        "(the end; the last stable offset with isolation_level 1), otherwise the first offset whose timestamp is >= the given ms (offset -1 "
        "when there is none).",
        request=Struct(
            Field("replica_id", INT32, default=-1),
            Field(
                "isolation_level",
                INT8,
                default=0,
                doc="1 read_committed: latest (-1) is the last stable offset",
            ),
            Field(
                "topics",
                topics(
                    Struct(
                        Field("partition", INT32),
                        Field("timestamp", INT64, doc="-2 earliest, -1 latest, else ms"),
                        Field("current_leader_epoch", INT32, default=-1),
                        name="ListOffsetsPartition",
                    ),
                    "ListOffsets",
                ),
            ),
        ),
        response=Struct(
            Field(
                "topics",
                topics(
                    Struct(
                        Field("partition", INT32),
                        Field("error_code", INT16),
                        Field("timestamp", INT64, default=-1),
                        Field("offset", INT64, default=-1),
                        Field("leader_epoch", INT32, default=-1),
                        name="ListOffsetsPartitionResponse",
                    ),
                    "ListOffsetsResponse",
                ),
            ),
            THROTTLE,
        ),
    )
)


DELETE_RECORDS_HIGH_WATERMARK = -1

DELETE_RECORDS = register(
    ApiSpec(
        key=ApiKey.DELETE_RECORDS,
        name="DeleteRecords",
        doc="Move partitions' log start offset up to `offset` (Kafka's DeleteRecords): records "
        "below it are no longer readable, and segments wholly below it are deleted. Answered by "
        "partition leaders once every in-sync replica's log start offset reached the offset "
        "(or `timeout_ms` passed: REQUEST_TIMED_OUT, the leader's move stays). `offset` -1 "
        "means the last stable offset (the high watermark unless a transaction is undecided); "
        "an offset above the high watermark or the last stable offset gets "
        "OFFSET_OUT_OF_RANGE; a topic with cleanup.policy=compact alone gets POLICY_VIOLATION; "
        "NOT_LEADER_OR_FOLLOWER and UNKNOWN_TOPIC_OR_PARTITION as for Produce.",
        request=Struct(
            Field(
                "topics",
                topics(
                    Struct(
                        Field("partition", INT32),
                        Field("offset", INT64, doc="the new log start offset; -1 = the HW"),
                        name="DeleteRecordsPartition",
                    ),
                    "DeleteRecords",
                ),
            ),
            Field("timeout_ms", INT32, default=30_000, doc="how long to wait for the replicas"),
        ),
        response=Struct(
            THROTTLE,
            Field(
                "topics",
                topics(
                    Struct(
                        Field("partition", INT32),
                        Field(
                            "low_watermark",
                            INT64,
                            default=-1,
                            doc="the log start offset every in-sync replica has reached",
                        ),
                        Field("error_code", INT16),
                        Field("error_message", Nullable(STRING), default=None),
                        name="DeleteRecordsPartitionResult",
                    ),
                    "DeleteRecordsResult",
                ),
            ),
        ),
    )
)


OFFSET_FOR_LEADER_EPOCH = register(
    ApiSpec(
        key=ApiKey.OFFSET_FOR_LEADER_EPOCH,
        name="OffsetForLeaderEpoch",
        doc="KIP-101/279: the end offset of a leader epoch in the leader's log (the start of the "
        "next epoch, or the log end for the current one), with the largest epoch <= the one "
        "asked that the log knows; (-1, -1) when it knows none that old. Answered by partition "
        "leaders (NOT_LEADER_OR_FOLLOWER elsewhere); `current_leader_epoch` other than the "
        "leader's gets FENCED_LEADER_EPOCH (older) or UNKNOWN_LEADER_EPOCH (newer). Gregor's "
        "followers and consumers get the same answer in Fetch (diverging_epoch); this API is "
        "for tools and Kafka-style clients.",
        request=Struct(
            Field("replica_id", INT32, default=-1, doc="-1 for clients, else a broker id"),
            Field(
                "topics",
                topics(
                    Struct(
                        Field("partition", INT32),
                        Field("current_leader_epoch", INT32, default=-1),
                        Field("leader_epoch", INT32),
                        name="OffsetForLeaderPartition",
                    ),
                    "OffsetForLeader",
                ),
            ),
        ),
        response=Struct(
            THROTTLE,
            Field(
                "topics",
                topics(
                    Struct(
                        Field("error_code", INT16),
                        Field("partition", INT32),
                        Field("leader_epoch", INT32, default=-1),
                        Field("end_offset", INT64, default=-1),
                        name="EpochEndOffset",
                    ),
                    "OffsetForLeaderResult",
                ),
            ),
        ),
    )
)


INIT_PRODUCER_ID = register(
    ApiSpec(
        key=ApiKey.INIT_PRODUCER_ID,
        name="InitProducerId",
        doc="A new producer id (epoch 0) for an idempotent producer, from the block of ids the "
        "broker holds (a new block comes from the controller). With a transactional_id (sent "
        "to its transaction coordinator, FindCoordinator key_type 1): the id's producer id "
        "with its epoch bumped, fencing the previous producer; an open transaction of the "
        "previous epoch is aborted first (CONCURRENT_TRANSACTIONS until it is: retry). "
        "transaction_timeout_ms above transaction.max.timeout.ms: INVALID_TRANSACTION_TIMEOUT.",
        request=Struct(
            Field("transactional_id", Nullable(STRING), default=None),
            Field("transaction_timeout_ms", INT32, default=60_000),
        ),
        response=Struct(
            THROTTLE,
            Field("error_code", INT16),
            Field("producer_id", INT64, default=-1),
            Field("producer_epoch", INT16, default=-1),
        ),
    )
)
