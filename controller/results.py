"""The typed results of the ControllerChannel calls (controller/channel.py).

Each is a TypedDict: at run time a plain dict with the wire body's snake_case keys (so an answer
from the in-process controller and one decoded from the network are the same value), checked by
mypy everywhere it is built or read. The control managers (controller/quorum/*_control.py)
return them; `ControllerChannel` methods return futures of them.

A per-item list keeps request order. `error_code` is an `ErrorCode` number (0: none).
"""

from __future__ import annotations

from typing import TypedDict


class _Error(TypedDict):
    error_code: int
    error_message: str | None


class BrokerRegistrationResult(TypedDict, total=False):
    """BrokerRegistration: the new broker epoch (-1 when refused) and the quorum's cluster id.
    `error_message` is set when a refusal needs one (INCONSISTENT_CLUSTER_ID)."""

    error_code: int
    broker_epoch: int
    cluster_id: str | None
    error_message: str | None


class BrokerHeartbeatResult(TypedDict):
    error_code: int
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


class AlterPartitionPartitionResult(TypedDict):
    partition: int
    error_code: int
    leader_id: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int


class AlterPartitionTopicResult(TypedDict):
    name: str
    partitions: list[AlterPartitionPartitionResult]


class AlterPartitionResult(TypedDict):
    error_code: int
    topics: list[AlterPartitionTopicResult]


class ProducerIdsResult(TypedDict):
    """AllocateProducerIds: a block [producer_id_start, producer_id_start + producer_id_len)."""

    error_code: int
    producer_id_start: int
    producer_id_len: int


class CreateTopicResult(_Error):
    """CreateTopics, one per topic requested (-1s when it failed)."""

    name: str
    num_partitions: int
    replication_factor: int


class TopicResult(_Error):
    """DeleteTopics and CreatePartitions, one per topic requested."""

    name: str


class ElectionResult(_Error):
    """ElectLeaders, one per partition (flattened from the wire's per-topic grouping)."""

    topic: str
    partition: int


class AlterConfigsResult(_Error):
    """IncrementalAlterConfigs, one per resource (2 topic, 4 broker)."""

    resource_type: int
    resource_name: str


class ScramCredentialResult(_Error):
    """AlterUserScramCredentials, one per user named."""

    user: str


class QuotaEntityPart(TypedDict):
    entity_type: str
    entity_name: str | None


class ClientQuotaAlterResult(_Error):
    """AlterClientQuotas, one per entry (written or refused whole)."""

    entity: list[QuotaEntityPart]


class AclCreationResult(_Error):
    """CreateAcls, one per creation, in order."""


class AclDescription(TypedDict):
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


class AclMatch(AclDescription):
    """One ACL a DeleteAcls filter deleted, with the error of its deletion."""

    error_code: int
    error_message: str | None


class AclDeletionResult(_Error):
    """DeleteAcls, one per filter, in order: the ACLs it deleted."""

    matching_acls: list[AclMatch]


class ReassignmentPartitionResult(_Error):
    partition_index: int


class ReassignmentTopicResult(TypedDict):
    """AlterPartitionReassignments, one per topic requested."""

    name: str
    partitions: list[ReassignmentPartitionResult]


class OngoingPartitionReassignment(TypedDict):
    partition_index: int
    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


class OngoingTopicReassignment(TypedDict):
    """ListPartitionReassignments, one per topic with a reassignment in flight."""

    name: str
    partitions: list[OngoingPartitionReassignment]


class QuorumReplica(TypedDict):
    replica_id: int
    log_end_offset: int
    last_contact_ms: int


class DescribeQuorumResult(TypedDict, total=False):
    """DescribeQuorum's body as a controller answers it (`leader_endpoint` is the leader's
    "host:port"; None when unknown)."""

    error_code: int
    node_id: int
    role: str
    leader_id: int
    leader_epoch: int
    high_watermark: int
    leader_endpoint: str | None
    voters: list[QuorumReplica]
    observers: list[QuorumReplica]
