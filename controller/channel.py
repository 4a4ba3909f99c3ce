"""ControllerChannel: the one interface between a broker and the controller quorum.

A broker registers, heartbeats (which also asks for fencing or a controlled shutdown), reports
ISR changes, takes blocks of producer ids, and forwards the admin requests that change metadata (topics, partitions,
configs, leader elections). Two implementations, and nothing above this seam knows which one it has:

- in-process: `InProcessChannel` (controller/quorum/in_process.py), `CombinedController.channel`:
  the one-voter quorum of a combined `gregor server`, running on its own thread and event loop;
- network: `RemoteController` (controller/quorum/remote.py), which sends each call to the
  active controller of a remote quorum and follows NOT_CONTROLLER to the new leader.

Every method is typed and returns a `concurrent.futures.Future` of a typed result
(controller/results.py: TypedDicts, or lists of them in request order), completed once the
records are committed; a future may fail with NOT_CONTROLLER or a timeout. Any thread may call.
mypy checks both implementations against this Protocol (`_conforms` at the end of
controller/quorum/in_process.py and remote.py), and tests/unit/quorum/test_channel_conformance.py
fails when either lacks a method or differs in its parameters or result type.

Adding a call: declare it here with its result type (controller/results.py), then implement it
in both channels — in-process `InProcessChannel` (controller/quorum/in_process.py):
`self.runner.submit(lambda c: c.<manager>.<method>(...))`; network `RemoteController`: a method
that builds the request body and passes `_send(api_key, body, unwrap)` the function turning the
wire answer into the result — and answer it on a controller process (controller/quorum/
process.py: a handler that awaits `self._call(lambda c: c.<manager>.<method>(...))`).
docs/metadata.md ("The broker ↔ controller seam") has the recipe.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import Protocol, runtime_checkable

from client.protocol.body import Body
from controller.results import (
    AclCreationResult,
    AclDeletionResult,
    AlterConfigsResult,
    AlterPartitionResult,
    BrokerHeartbeatResult,
    BrokerRegistrationResult,
    ClientQuotaAlterResult,
    CreateTopicResult,
    DescribeQuorumResult,
    ElectionResult,
    OngoingTopicReassignment,
    ProducerIdsResult,
    ReassignmentTopicResult,
    ScramCredentialResult,
    TopicResult,
)


@runtime_checkable
class ControllerChannel(Protocol):
    def register_broker(
        self,
        broker_id: int,
        host: str,
        port: int,
        rack: str | None = None,
        incarnation_id: str = "",
        endpoints: Sequence[tuple[str, str, int]] = (),
        cluster_id: str | None = None,
    ) -> Future[BrokerRegistrationResult]:
        """BrokerRegistration → {error_code, broker_epoch, cluster_id}; the broker starts
        fenced. `host:port` is where other brokers fetch from; `endpoints` each listener's
        (name, host, port); `cluster_id` the broker's own id (None: none yet, or the id the
        channel was built with). A broker whose id differs from the quorum's is refused: the
        future fails with InconsistentClusterIdError naming both."""
        ...

    def broker_heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        want_fence: bool = False,
        want_shutdown: bool = False,
        failed_replicas: Sequence[tuple[str, int]] = (),
        cannot_create_replicas: str | None = None,
        timeout_ms: int | None = None,
    ) -> Future[BrokerHeartbeatResult]:
        """BrokerHeartbeat → {error_code, is_caught_up, is_fenced, should_shut_down}.
        `current_metadata_offset` is the broker's own published image offset (the controller
        unfences it once that reaches its registration); `want_shutdown` asks for a controlled
        shutdown (leadership moved off, then fenced); `failed_replicas` are the (topic,
        partition) replicas the broker could not create or open (all of them, every time);
        `cannot_create_replicas` says why the broker cannot take new replicas now (e.g. out of
        file descriptors; None when it can): the controller places new replicas elsewhere.
        `timeout_ms`: the future fails (GregorTimeoutError naming the controllers tried and the
        last error) when no controller answered within this long; None: the channel's own
        request timeout (a controlled shutdown passes what is left of its time)."""
        ...

    def alter_partition(
        self, broker_id: int, broker_epoch: int, topics: list[Body]
    ) -> Future[AlterPartitionResult]:
        """AlterPartition (ISR changes from a leader) → the per-partition results."""
        ...

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> Future[ProducerIdsResult]:
        """AllocateProducerIds → {error_code, producer_id_start, producer_id_len}: a block of
        producer ids for this broker's InitProducerId answers."""
        ...

    def create_topics(
        self, requests: list[Body], validate_only: bool = False
    ) -> Future[list[CreateTopicResult]]:
        """CreateTopics → [{name, error_code, error_message, num_partitions, ...}]."""
        ...

    def delete_topics(self, names: list[str]) -> Future[list[TopicResult]]:
        """DeleteTopics → [{name, error_code, error_message}]."""
        ...

    def create_partitions(
        self, topics: list[Body], validate_only: bool = False
    ) -> Future[list[TopicResult]]:
        """CreatePartitions → [{name, error_code, error_message}]."""
        ...

    def elect_leaders(
        self, election_type: int, partitions: list[tuple[str, int]] | None = None
    ) -> Future[list[ElectionResult]]:
        """ElectLeaders (0 preferred, 1 unclean) → [{topic, partition, error_code,
        error_message}] for the requested partitions (None: all, and only the elected are
        listed)."""
        ...

    def incremental_alter_configs(
        self, resources: list[Body], validate_only: bool = False
    ) -> Future[list[AlterConfigsResult]]:
        """IncrementalAlterConfigs → [{resource_type, resource_name, error_code, ...}]."""
        ...

    def alter_configs(
        self, resources: list[Body], validate_only: bool = False
    ) -> Future[list[AlterConfigsResult]]:
        """AlterConfigs: each resource's dynamic configs replaced by those given → [{resource_type,
        resource_name, error_code, ...}]."""
        ...

    def alter_user_scram_credentials(
        self, deletions: list[Body], upsertions: list[Body]
    ) -> Future[list[ScramCredentialResult]]:
        """AlterUserScramCredentials → [{user, error_code, error_message}], one per user
        named (salted passwords in, StoredKey/ServerKey records written)."""
        ...

    def alter_client_quotas(
        self, entries: list[Body], validate_only: bool = False
    ) -> Future[list[ClientQuotaAlterResult]]:
        """AlterClientQuotas → [{error_code, error_message, entity}], one per entry (each
        written or refused whole; ClientQuota records)."""
        ...

    def create_acls(self, creations: list[Body]) -> Future[list[AclCreationResult]]:
        """CreateAcls → [{error_code, error_message}], one per creation, in order
        (AccessControlEntry records)."""
        ...

    def delete_acls(self, filters: list[Body]) -> Future[list[AclDeletionResult]]:
        """DeleteAcls → [{error_code, error_message, matching_acls}], one per filter."""
        ...

    def alter_partition_reassignments(
        self, topics: list[Body]
    ) -> Future[list[ReassignmentTopicResult]]:
        """AlterPartitionReassignments: topics [{name, partitions: [{partition_index,
        replicas | None}]}] → [{name, partitions: [{partition_index, error_code,
        error_message}]}] (replicas None cancels)."""
        ...

    def list_partition_reassignments(
        self, partitions: list[tuple[str, int]] | None = None
    ) -> Future[list[OngoingTopicReassignment]]:
        """ListPartitionReassignments → [{name, partitions: [{partition_index, replicas,
        adding_replicas, removing_replicas}]}], the reassignments in flight (None: all)."""
        ...

    def describe_quorum(self, endpoint: str | None = None) -> Future[DescribeQuorumResult]:
        """DescribeQuorum's body as a controller answers it (a follower names the leader's
        endpoint); `endpoint` is how an in-process leader names itself."""
        ...
