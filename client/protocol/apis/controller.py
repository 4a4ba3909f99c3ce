"""Controller APIs: Raft transport, metadata fetch, quorum description, broker lifecycle, ISR.

RaftMessage (1000) carries one Raft message (controller/raft/messages.py `to_dict()`, msgpack
encoded into `payload`); the receiver answers `{error_code}` at once and any Raft reply travels
as its own RaftMessage on the receiver's outbound connection. MetadataFetch (1001) lets a broker
or tool read committed metadata records (controller/metadata/records.py encoding) from an offset.
Declared by H-meta (docs/metadata.md).
"""

from __future__ import annotations

from client.protocol.api_keys import ApiKey
from client.protocol.schema import (
    BOOL,
    BYTES,
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

RAFT_MESSAGE = register(
    ApiSpec(
        key=ApiKey.RAFT_MESSAGE,
        name="RaftMessage",
        internal=True,
        doc="One Raft message between controllers (vote, append, heartbeat, snapshot, ...).",
        request=Struct(
            Field(
                "cluster_id",
                Nullable(STRING),
                default=None,
                doc="the sender's cluster id (null: not known yet); a voter that knows another"
                " one answers INCONSISTENT_CLUSTER_ID and drops the message",
            ),
            Field("payload", BYTES, doc="msgpack of Message.to_dict()"),
        ),
        response=Struct(Field("error_code", INT16)),
    )
)

METADATA_FETCH = register(
    ApiSpec(
        key=ApiKey.METADATA_FETCH,
        name="MetadataFetch",
        internal=True,
        doc="Committed metadata records from `from_offset`; OFFSET_OUT_OF_RANGE below the log "
        "start (then the snapshot is returned in `snapshot`).",
        request=Struct(
            Field("from_offset", INT64),
            Field("max_records", INT32, default=10_000),
            Field("include_snapshot", BOOL, default=True),
            Field(
                "max_wait_ms", INT32, default=0, doc="long poll: wait up to this for new records"
            ),
            Field(
                "replica_id",
                INT32,
                default=-1,
                doc="the fetching observer's node id (a broker), listed by DescribeQuorum; "
                "-1: anonymous (tools)",
            ),
        ),
        response=Struct(
            Field("error_code", INT16),
            Field("leader_id", INT32, default=-1),
            Field(
                "leader_endpoint",
                Nullable(STRING),
                default=None,
                doc="the leader's HOST:PORT (null: unknown), for controllers added since start",
            ),
            Field("high_watermark", INT64, default=0, doc="exclusive end of committed offsets"),
            Field(
                "records",
                Array(
                    Struct(Field("offset", INT64), Field("record", BYTES), name="MetadataRecord")
                ),
                default=list,
            ),
            Field("snapshot_offset", INT64, default=-1),
            Field("snapshot", Nullable(BYTES), default=None),
        ),
    )
)

_REPLICA = Struct(
    Field("replica_id", INT32),
    Field("log_end_offset", INT64),
    Field(
        "last_contact_ms",
        INT64,
        default=-1,
        doc="ms since the leader last heard from it; -1 unknown",
    ),
    name="QuorumReplica",
)

DESCRIBE_QUORUM = register(
    ApiSpec(
        key=ApiKey.DESCRIBE_QUORUM,
        name="DescribeQuorum",
        doc="The metadata quorum as this controller sees it; replica lists are filled on the leader.",
        request=Struct(),
        response=Struct(
            Field("error_code", INT16),
            Field("node_id", INT32),
            Field("role", STRING),
            Field("leader_id", INT32),
            Field("leader_epoch", INT64, doc="the Raft term"),
            Field("high_watermark", INT64),
            Field("leader_endpoint", Nullable(STRING), default=None),
            Field("voters", Array(_REPLICA), default=list),
            Field("observers", Array(_REPLICA), default=list),
        ),
    )
)

BROKER_REGISTRATION = register(
    ApiSpec(
        key=ApiKey.BROKER_REGISTRATION,
        name="BrokerRegistration",
        internal=True,
        doc="A broker registers with the active controller; it starts fenced.",
        request=Struct(
            Field("broker_id", INT32),
            Field(
                "cluster_id",
                Nullable(STRING),
                default=None,
                doc="the broker's own (stored or configured) cluster id, null when it has none:"
                " one that differs from the quorum's is refused with INCONSISTENT_CLUSTER_ID",
            ),
            Field("incarnation_id", STRING, default=""),
            Field("host", STRING, doc="the inter-broker listener's advertised host"),
            Field("port", INT32),
            Field("rack", Nullable(STRING), default=None),
            Field(
                "endpoints",
                Array(Struct(Field("name", STRING), Field("host", STRING), Field("port", INT32))),
                default=list,
                doc="every listener's advertised address, by listener name (empty: host/port only)",
            ),
        ),
        response=Struct(
            Field("error_code", INT16),
            Field("broker_epoch", INT64, default=-1),
            Field(
                "cluster_id",
                Nullable(STRING),
                default=None,
                doc="the controller quorum's cluster id (null: not fixed yet)",
            ),
            Field("error_message", Nullable(STRING), default=None),
        ),
    )
)

BROKER_HEARTBEAT = register(
    ApiSpec(
        key=ApiKey.BROKER_HEARTBEAT,
        name="BrokerHeartbeat",
        internal=True,
        doc="Liveness, catch-up and controlled shutdown of a registered broker.",
        request=Struct(
            Field("broker_id", INT32),
            Field("broker_epoch", INT64),
            Field("current_metadata_offset", INT64),
            Field("want_fence", BOOL, default=False),
            Field("want_shutdown", BOOL, default=False),
            # replicas this broker could not create or open (e.g. out of file descriptors):
            # the controller moves their leadership and ISR membership elsewhere
            Field(
                "failed_replicas",
                Array(
                    Struct(
                        Field("topic", STRING),
                        Field("partition", INT32),
                        name="BrokerHeartbeatFailedReplica",
                    )
                ),
                default=(),
            ),
            Field(
                "cannot_create_replicas",
                Nullable(STRING),
                default=None,
                doc="why this broker cannot take new replicas now (e.g. out of file"
                " descriptors), null when it can: the controller places new replicas elsewhere",
            ),
        ),
        response=Struct(
            Field("error_code", INT16),
            Field("is_caught_up", BOOL, default=False),
            Field("is_fenced", BOOL, default=True),
            Field("should_shut_down", BOOL, default=False),
        ),
    )
)

ALTER_PARTITION = register(
    ApiSpec(
        key=ApiKey.ALTER_PARTITION,
        name="AlterPartition",
        internal=True,
        doc="A partition leader asks the controller to change the ISR (guarded by partition epoch).",
        request=Struct(
            Field("broker_id", INT32),
            Field("broker_epoch", INT64),
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
                                    Field("leader_epoch", INT32),
                                    Field("new_isr", Array(INT32)),
                                    Field("partition_epoch", INT32),
                                    name="AlterPartitionRequestPartition",
                                )
                            ),
                        ),
                        name="AlterPartitionRequestTopic",
                    )
                ),
            ),
        ),
        response=Struct(
            Field("error_code", INT16),
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
                                    Field("leader_id", INT32),
                                    Field("leader_epoch", INT32),
                                    Field("isr", Array(INT32)),
                                    Field("partition_epoch", INT32),
                                    name="AlterPartitionResponsePartition",
                                )
                            ),
                        ),
                        name="AlterPartitionResponseTopic",
                    )
                ),
                default=list,
            ),
        ),
    )
)


ALLOCATE_PRODUCER_IDS = register(
    ApiSpec(
        key=ApiKey.ALLOCATE_PRODUCER_IDS,
        name="AllocateProducerIds",
        internal=True,
        doc="A broker asks the controller for a block of producer ids (committed through the "
        "metadata log, so no id is handed out twice); it serves InitProducerId from the block.",
        request=Struct(Field("broker_id", INT32), Field("broker_epoch", INT64)),
        response=Struct(
            Field("error_code", INT16),
            Field("producer_id_start", INT64, default=-1),
            Field("producer_id_len", INT32, default=0),
        ),
    )
)
