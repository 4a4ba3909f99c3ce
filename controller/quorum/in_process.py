"""InProcessChannel: the ControllerChannel of a combined process, over its ControllerThread.

    channel = InProcessChannel(runner, describe_quorum)
    channel.create_topics([...]).result()   # Future[list[CreateTopicResult]], resolved on commit

Each method submits a callable to the controller thread that calls the control manager owning
the request (`lambda c: c.replication.create_topics(requests, validate_only)`), so mypy checks
the arguments and the result type end to end; nothing is looked up by name. A registration
refused for its cluster id fails with InconsistentClusterIdError, as RemoteController's does.

Threading: any thread may call; the work runs on the controller thread.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from client.errors import ErrorCode, InconsistentClusterIdError
from client.protocol.body import Body
from controller.quorum.runner import ControllerThread
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

if TYPE_CHECKING:
    from controller.channel import ControllerChannel

Future = concurrent.futures.Future


def _raise_inconsistent(
    fut: Future[BrokerRegistrationResult],
) -> Future[BrokerRegistrationResult]:
    """`fut`'s registration answer, failed with InconsistentClusterIdError when it refused
    the broker's cluster id (as RemoteController does), so both channels behave alike."""
    out: Future[BrokerRegistrationResult] = concurrent.futures.Future()

    def done(f: Future[BrokerRegistrationResult]) -> None:
        exc = f.exception()
        if exc is not None:
            out.set_exception(exc)
            return
        r = f.result()
        if r.get("error_code") == ErrorCode.INCONSISTENT_CLUSTER_ID:
            out.set_exception(InconsistentClusterIdError(r.get("error_message") or ""))
        else:
            out.set_result(r)

    fut.add_done_callback(done)
    return out


class InProcessChannel:
    def __init__(
        self,
        runner: ControllerThread,
        describe_quorum: Callable[[str | None], Future[DescribeQuorumResult]],
    ) -> None:
        """`describe_quorum(endpoint)`: the owner's DescribeQuorum answer (it owns the Raft
        log the description is read from)."""
        self.runner = runner
        self._describe_quorum = describe_quorum

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
        eps = list(endpoints)
        return _raise_inconsistent(
            self.runner.submit(
                lambda c: c.cluster.register_broker(
                    broker_id, host, port, rack, incarnation_id, eps, cluster_id
                )
            )
        )

    def broker_heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        want_fence: bool = False,
        want_shutdown: bool = False,
        failed_replicas: Sequence[tuple[str, int]] = (),
        cannot_create_replicas: str | None = None,
        timeout_ms: int | None = None,  # (in process: no network to give up on)
    ) -> Future[BrokerHeartbeatResult]:
        return self.runner.submit(
            lambda c: c.cluster.broker_heartbeat(
                broker_id,
                broker_epoch,
                current_metadata_offset,
                want_fence,
                want_shutdown,
                failed_replicas,
                cannot_create_replicas,
            )
        )

    def alter_partition(
        self, broker_id: int, broker_epoch: int, topics: list[Body]
    ) -> Future[AlterPartitionResult]:
        return self.runner.submit(
            lambda c: c.replication.alter_partition(broker_id, broker_epoch, topics)
        )

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> Future[ProducerIdsResult]:
        return self.runner.submit(
            lambda c: c.cluster.allocate_producer_ids(broker_id, broker_epoch)
        )

    def create_topics(
        self, requests: list[Body], validate_only: bool = False
    ) -> Future[list[CreateTopicResult]]:
        return self.runner.submit(lambda c: c.replication.create_topics(requests, validate_only))

    def delete_topics(self, names: list[str]) -> Future[list[TopicResult]]:
        return self.runner.submit(lambda c: c.replication.delete_topics(names))

    def create_partitions(
        self, topics: list[Body], validate_only: bool = False
    ) -> Future[list[TopicResult]]:
        return self.runner.submit(lambda c: c.replication.create_partitions(topics, validate_only))

    def elect_leaders(
        self, election_type: int, partitions: list[tuple[str, int]] | None = None
    ) -> Future[list[ElectionResult]]:
        return self.runner.submit(lambda c: c.replication.elect_leaders(election_type, partitions))

    def incremental_alter_configs(
        self, resources: list[Body], validate_only: bool = False
    ) -> Future[list[AlterConfigsResult]]:
        return self.runner.submit(
            lambda c: c.configs.incremental_alter_configs(resources, validate_only)
        )

    def alter_configs(
        self, resources: list[Body], validate_only: bool = False
    ) -> Future[list[AlterConfigsResult]]:
        return self.runner.submit(lambda c: c.configs.alter_configs(resources, validate_only))

    def alter_user_scram_credentials(
        self, deletions: list[Body], upsertions: list[Body]
    ) -> Future[list[ScramCredentialResult]]:
        return self.runner.submit(
            lambda c: c.scram.alter_user_scram_credentials(deletions, upsertions)
        )

    def alter_client_quotas(
        self, entries: list[Body], validate_only: bool = False
    ) -> Future[list[ClientQuotaAlterResult]]:
        return self.runner.submit(lambda c: c.quotas.alter_client_quotas(entries, validate_only))

    def create_acls(self, creations: list[Body]) -> Future[list[AclCreationResult]]:
        return self.runner.submit(lambda c: c.acls.create_acls(creations))

    def delete_acls(self, filters: list[Body]) -> Future[list[AclDeletionResult]]:
        return self.runner.submit(lambda c: c.acls.delete_acls(filters))

    def alter_partition_reassignments(
        self, topics: list[Body]
    ) -> Future[list[ReassignmentTopicResult]]:
        return self.runner.submit(lambda c: c.reassignments.alter_partition_reassignments(topics))

    def list_partition_reassignments(
        self, partitions: list[tuple[str, int]] | None = None
    ) -> Future[list[OngoingTopicReassignment]]:
        return self.runner.submit(
            lambda c: c.reassignments.list_partition_reassignments(partitions)
        )

    def describe_quorum(self, endpoint: str | None = None) -> Future[DescribeQuorumResult]:
        return self._describe_quorum(endpoint)


if TYPE_CHECKING:

    def _conforms(channel: InProcessChannel) -> ControllerChannel:
        return channel  # mypy: InProcessChannel implements the ControllerChannel Protocol
