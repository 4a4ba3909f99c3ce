"""Consumer group APIs (KIP-848 model: the coordinator assigns, members heartbeat):
FindCoordinator (10), OffsetCommit (8), OffsetFetch (9), ListGroups (16), DeleteGroups (42),
OffsetDelete (47), ConsumerGroupHeartbeat (68), ConsumerGroupDescribe (69).

A group's coordinator is the leader of partition `abs(murmur2(group_id)) %
offsets.topic.num.partitions` of `__consumer_offsets`; every other group API goes to it and
answers NOT_COORDINATOR elsewhere, COORDINATOR_LOAD_IN_PROGRESS while it reads the partition.
"""

from __future__ import annotations

from client.protocol.api_keys import ApiKey
from client.protocol.schema import (
    BOOL,
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

ERROR_MESSAGE = Field("error_message", Nullable(STRING), default=None)
THROTTLE = Field("throttle_time_ms", INT32, default=0)


def _topic_partitions(name: str) -> Array:
    return Array(Struct(Field("topic", STRING), Field("partitions", Array(INT32)), name=name))


FIND_COORDINATOR = register(
    ApiSpec(
        key=ApiKey.FIND_COORDINATOR,
        name="FindCoordinator",
        doc="Where the coordinator of each group is: the leader of the group's partition of "
        "`__consumer_offsets` (the topic is created on first use). COORDINATOR_NOT_AVAILABLE "
        "while the topic is being created or the partition has no leader (retriable).",
        request=Struct(
            Field(
                "key_type",
                INT8,
                default=0,
                doc="0 group, 1 transaction (the transactional id's coordinator: leader of its `__transaction_state` partition)",
            ),
            Field("coordinator_keys", Array(STRING)),
        ),
        response=Struct(
            THROTTLE,
            Field(
                "coordinators",
                Array(
                    Struct(
                        Field("key", STRING),
                        Field("node_id", INT32),
                        Field("host", STRING),
                        Field("port", INT32),
                        Field("error_code", INT16),
                        ERROR_MESSAGE,
                        name="Coordinator",
                    )
                ),
            ),
        ),
    )
)

OFFSET_COMMIT = register(
    ApiSpec(
        key=ApiKey.OFFSET_COMMIT,
        name="OffsetCommit",
        doc="Store committed offsets in `__consumer_offsets`, answered once the record is "
        "replicated (acks=all). A member of a group commits with its member id and current "
        "member epoch (STALE_MEMBER_EPOCH otherwise; UNKNOWN_MEMBER_ID for a member the group "
        "does not know); `member_id` empty with epoch -1 commits for a group without members "
        "(tools), and is refused with UNKNOWN_MEMBER_ID while the group has members.",
        request=Struct(
            Field("group_id", STRING),
            Field("member_id", STRING, default=""),
            Field("member_epoch", INT32, default=-1),
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
                                    name="OffsetCommitPartition",
                                )
                            ),
                        ),
                        name="OffsetCommitTopic",
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
                                    ERROR_MESSAGE,
                                    name="OffsetCommitPartitionResult",
                                )
                            ),
                        ),
                        name="OffsetCommitTopicResult",
                    )
                ),
            ),
        ),
    )
)

OFFSET_FETCH = register(
    ApiSpec(
        key=ApiKey.OFFSET_FETCH,
        name="OffsetFetch",
        doc="Committed offsets of a group: `topics` nil = every partition with a committed "
        "offset. A partition without one answers committed_offset -1. Offsets committed in a "
        "transaction not yet ended are not shown; `require_stable` makes such a partition "
        "answer UNSTABLE_OFFSET_COMMIT (retriable), as Kafka's OffsetFetch v7.",
        request=Struct(
            Field("group_id", STRING),
            Field("require_stable", BOOL, default=False),
            Field(
                "topics",
                Nullable(
                    Array(
                        Struct(
                            Field("name", STRING),
                            Field("partitions", Array(INT32)),
                            name="OffsetFetchTopic",
                        )
                    )
                ),
                default=None,
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
                                    Field("partition", INT32),
                                    Field("committed_offset", INT64),
                                    Field("committed_leader_epoch", INT32, default=-1),
                                    Field("metadata", Nullable(STRING), default=None),
                                    Field("error_code", INT16, default=0),
                                    name="OffsetFetchPartitionResult",
                                )
                            ),
                        ),
                        name="OffsetFetchTopicResult",
                    )
                ),
                default=list,
            ),
        ),
    )
)

LIST_GROUPS = register(
    ApiSpec(
        key=ApiKey.LIST_GROUPS,
        name="ListGroups",
        doc="The groups this broker coordinates (a client asks every broker and merges).",
        request=Struct(Field("states_filter", Array(STRING), default=list)),
        response=Struct(
            THROTTLE,
            Field("error_code", INT16),
            Field(
                "groups",
                Array(
                    Struct(
                        Field("group_id", STRING),
                        Field("group_state", STRING),
                        Field("group_type", STRING, default="consumer"),
                        name="ListedGroup",
                    )
                ),
            ),
        ),
    )
)

CONSUMER_GROUP_HEARTBEAT = register(
    ApiSpec(
        key=ApiKey.CONSUMER_GROUP_HEARTBEAT,
        name="ConsumerGroupHeartbeat",
        doc="Join (member_epoch 0, a member id the client generated), heartbeat, or leave "
        "(member_epoch -1; -2: a static member, `instance_id`, leaving for a restart keeps its "
        "partitions until its session timeout, and a member joining with its instance id "
        "takes them over; UNRELEASED_INSTANCE_ID while the old one has not left). The answer carries the member's epoch and, when it changed, the "
        "partitions the member should own now: it revokes the ones it owns that are not "
        "listed, then says so in a later heartbeat (`owned_topic_partitions`), and the "
        "coordinator gives those partitions to their new owners only then. FENCED_MEMBER_EPOCH "
        "/ UNKNOWN_MEMBER_ID: the member lost its partitions and must rejoin with epoch 0.",
        request=Struct(
            Field("group_id", STRING),
            Field("member_id", STRING),
            Field("member_epoch", INT32),
            Field("instance_id", Nullable(STRING), default=None),
            Field("rack_id", Nullable(STRING), default=None),
            Field("rebalance_timeout_ms", INT32, default=-1),
            Field(
                "session_timeout_ms",
                INT32,
                default=-1,
                doc="-1: the broker's group.consumer.session.timeout.ms; else within"
                " group.min/max.session.timeout.ms (INVALID_SESSION_TIMEOUT otherwise)",
            ),
            Field(
                "subscribed_topic_names",
                Nullable(Array(STRING)),
                default=None,
                doc="nil = unchanged since the last heartbeat",
            ),
            Field(
                "subscribed_topic_regex",
                Nullable(STRING),
                default=None,
                doc='nil = unchanged; "" = none. A Python `re` pattern matched in full '
                "against every topic name but the internal `__consumer_offsets`; re-evaluated "
                "on each heartbeat, so topics created later join the subscription",
            ),
            Field("server_assignor", Nullable(STRING), default=None, doc="uniform or range"),
            Field(
                "owned_topic_partitions",
                Nullable(_topic_partitions("OwnedPartitions")),
                default=None,
                doc="nil = unchanged since the last heartbeat",
            ),
        ),
        response=Struct(
            THROTTLE,
            Field("error_code", INT16),
            ERROR_MESSAGE,
            Field("member_id", Nullable(STRING), default=None),
            Field("member_epoch", INT32, default=-1),
            Field("heartbeat_interval_ms", INT32, default=0),
            Field(
                "assignment",
                Nullable(_topic_partitions("AssignedPartitions")),
                default=None,
                doc="nil = unchanged",
            ),
        ),
    )
)

CONSUMER_GROUP_DESCRIBE = register(
    ApiSpec(
        key=ApiKey.CONSUMER_GROUP_DESCRIBE,
        name="ConsumerGroupDescribe",
        doc="State, epochs, assignor and members (with their owned and target partitions) of "
        "groups this broker coordinates.",
        request=Struct(Field("group_ids", Array(STRING))),
        response=Struct(
            THROTTLE,
            Field(
                "groups",
                Array(
                    Struct(
                        Field("error_code", INT16),
                        ERROR_MESSAGE,
                        Field("group_id", STRING),
                        Field("group_state", STRING, default=""),
                        Field("group_epoch", INT32, default=-1),
                        Field("assignment_epoch", INT32, default=-1),
                        Field("assignor_name", STRING, default=""),
                        Field(
                            "members",
                            Array(
                                Struct(
                                    Field("member_id", STRING),
                                    Field("member_epoch", INT32),
                                    Field("client_id", STRING, default=""),
                                    Field("client_host", STRING, default=""),
                                    Field("subscribed_topic_names", Array(STRING)),
                                    Field("subscribed_topic_regex", Nullable(STRING), default=None),
                                    Field("assignment", _topic_partitions("MemberAssignment")),
                                    Field(
                                        "target_assignment",
                                        _topic_partitions("MemberTargetAssignment"),
                                    ),
                                    name="DescribedMember",
                                )
                            ),
                            default=list,
                        ),
                        name="DescribedGroup",
                    )
                ),
            ),
        ),
    )
)

DELETE_GROUPS = register(
    ApiSpec(
        key=ApiKey.DELETE_GROUPS,
        name="DeleteGroups",
        doc="Delete groups without members: their committed offsets get tombstones in "
        "`__consumer_offsets` (acks=all). NON_EMPTY_GROUP while a group has members, "
        "GROUP_ID_NOT_FOUND for an unknown one; NOT_COORDINATOR at another broker.",
        request=Struct(Field("groups_names", Array(STRING))),
        response=Struct(
            THROTTLE,
            Field(
                "results",
                Array(
                    Struct(
                        Field("group_id", STRING),
                        Field("error_code", INT16),
                        ERROR_MESSAGE,
                        name="DeletableGroupResult",
                    )
                ),
            ),
        ),
    )
)

OFFSET_DELETE = register(
    ApiSpec(
        key=ApiKey.OFFSET_DELETE,
        name="OffsetDelete",
        doc="Delete a group's committed offsets of some partitions (tombstones, acks=all). A "
        "partition of a topic a member subscribes to gets GROUP_SUBSCRIBED_TO_TOPIC.",
        request=Struct(
            Field("group_id", STRING),
            Field(
                "topics",
                Array(
                    Struct(
                        Field("name", STRING),
                        Field("partitions", Array(INT32)),
                        name="OffsetDeleteTopic",
                    )
                ),
            ),
        ),
        response=Struct(
            Field("error_code", INT16),
            ERROR_MESSAGE,
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
                                    name="OffsetDeletePartitionResult",
                                )
                            ),
                        ),
                        name="OffsetDeleteTopicResult",
                    )
                ),
                default=list,
            ),
        ),
    )
)
