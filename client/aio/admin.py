"""Asyncio Admin: topics, cluster description, offsets, configs, the metadata quorum.

Each family of calls lives in an admin_*.py module of its own (topics: admin_topics.py,
groups: admin_groups.py, ...), which the Admin method of each call delegates to.

Topic changes are sent to any broker (which forwards them to the active controller).
`create_topic` and `delete_topic` then wait until that broker's metadata shows the change,
so a producer created next finds the topic.

`describe_quorum()` asks the bootstrap address — a `gregor controller` voter or a combined
`gregor server` — with DescribeQuorum (55); a voter that is not the leader names the leader's
endpoint, which is asked next (only the leader knows each replica's log end offset).

Loop-owned: every method runs on the admin's event loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from client.aio import (
    admin_acls,
    admin_configs,
    admin_groups,
    admin_quorum,
    admin_quotas,
    admin_reassign,
    admin_records,
    admin_topics,
    admin_txn,
    admin_users,
)
from client.aio.admin_groups import GroupDescription, GroupListing
from client.aio.admin_quorum import QuorumDescription
from client.aio.admin_quotas import (
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaFilterComponent,
)
from client.aio.admin_settings import AdminSettings
from client.aio.admin_txn import ProducerState, TransactionDescription, TransactionListing
from client.aio.admin_users import (
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from client.aio.cluster import ClusterClient
from client.aio.config import resolve_config
from client.aio.fetcher import Fetcher
from client.aio.types import (
    BrokerDescription,
    ClusterDescription,
    ConfigEntry,
    PartitionDescription,
    TopicDescription,
    TopicPartition,
)
from client.errors import (
    ClientClosedError,
    GregorError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from client.protocol import ApiKey
from client.security import scram
from client.security.acl import AclBinding, AclBindingFilter


class Admin:
    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = cfg = resolve_config("admin", config, kwargs)
        self.settings = settings = AdminSettings.from_config(cfg)
        self._cluster = ClusterClient(cfg)
        # ListOffsets goes through the same code path as the consumer's.
        offsets_cfg = resolve_config(
            "consumer",
            None,
            {
                "bootstrap_servers": [f"{h}:{p}" for h, p in settings.bootstrap_servers],
                "request_timeout_ms": settings.request_timeout_ms,
                "client_id": settings.client_id,
            },
        )
        self._offsets = Fetcher(offsets_cfg, self._cluster)
        self._closed = False

    async def start(self) -> None:
        self._check_open()

    async def __aenter__(self) -> Admin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._cluster.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("admin client is closed")

    def _timeout(self, timeout_ms: int | None) -> int:
        return self.settings.request_timeout_ms if timeout_ms is None else timeout_ms

    # -- topics --------------------------------------------------------------------------------

    async def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, str] | None = None,
        *,
        replica_assignment: Iterable[Iterable[int]] | None = None,
        timeout_ms: int | None = None,
        validate_only: bool = False,
        exist_ok: bool = False,
    ) -> None:
        """Create `name`; raises TopicAlreadyExistsError, InvalidPartitionsError, ...
        -1 partitions / replication_factor take the broker defaults (num.partitions,
        default.replication.factor). `replica_assignment`: the replicas of partition 0, 1, ...
        (broker ids, the first the preferred leader) instead of placement by the controller;
        partitions and replication_factor then follow from it (left at their defaults, -1, or
        equal to what it says). The controller refuses unknown or duplicate broker ids and
        partitions of different sizes with InvalidReplicaAssignmentError.
        `exist_ok=True`: a topic of that name already there is fine (kafka-topics.sh's
        `--if-not-exists`); its partitions and configs are left as they are, not compared with
        the arguments."""
        self._check_open()
        await admin_topics.create_topic(
            self._cluster, name, partitions, replication_factor, config, replica_assignment,
            self._timeout(timeout_ms), validate_only, exist_ok,
        )  # fmt: skip

    async def delete_topic(self, name: str, *, timeout_ms: int | None = None) -> None:
        self._check_open()
        await admin_topics.delete_topic(self._cluster, name, self._timeout(timeout_ms))

    async def create_partitions(
        self,
        topic: str,
        total_count: int,
        assignments: Iterable[Iterable[int]] | None = None,
        *,
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> None:
        """Grow `topic` to `total_count` partitions. `assignments`: the replicas of each new
        partition, leader first (None: placed by the controller). Raises
        InvalidPartitionsError (count not above the current one), UnknownTopicOrPartitionError,
        InvalidReplicaAssignmentError. Returns once this client's metadata shows every partition
        with a leader, so a producer or consumer created next sees them."""
        self._check_open()
        await admin_topics.create_partitions(
            self._cluster, topic, total_count, assignments, self._timeout(timeout_ms),
            validate_only,
        )  # fmt: skip

    async def elect_leaders(
        self,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        election_type: str = "preferred",
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, Exception | None]:
        """Elect leaders (Kafka's `Admin.electLeaders`). "preferred": the first replica of each
        partition leads again where it is live and in the ISR; "unclean": an offline partition
        (no live ISR member) is led by a live replica, which may lose acknowledged records.
        `partitions` None means every partition, and the answer then holds only those
        elected. Returns {partition: None if elected, else the error}:
        ElectionNotNeededError, PreferredLeaderNotAvailableError,
        EligibleLeadersNotAvailableError, UnknownTopicOrPartitionError. A whole-request failure
        (no controller, timeout) raises."""
        self._check_open()
        return await admin_topics.elect_leaders(
            self._cluster, partitions, election_type, self._timeout(timeout_ms)
        )

    async def list_topics(self) -> list[str]:
        self._check_open()
        md = await self._cluster.refresh(all_topics=True)
        return sorted(md.topics)

    async def describe_topic(self, name: str) -> TopicDescription:
        self._check_open()
        md = await self._cluster.fetch_topics([name])  # that topic only (see create_topic)
        parts = md.topics.get(name)
        if parts is None:
            code = md.topic_errors.get(name)
            if code:
                raise error_for_code(code)(f"topic {name!r}")
            raise UnknownTopicOrPartitionError(f"topic {name!r}")
        tps = [TopicPartition(name, p.partition) for p in parts if p.leader >= 0]
        start = await self._offsets.list_offsets(dict.fromkeys(tps, -2)) if tps else {}
        end = await self._offsets.list_offsets(dict.fromkeys(tps, -1)) if tps else {}
        return TopicDescription(
            name,
            [
                PartitionDescription(
                    p.partition,
                    p.leader,
                    list(p.replicas),
                    list(p.isr),
                    start.get(TopicPartition(name, p.partition), (-1, -1))[0],
                    end.get(TopicPartition(name, p.partition), (-1, -1))[0],
                    p.leader_epoch,
                )
                for p in parts
            ],
            md.topic_ids.get(name),
        )

    # -- users (SCRAM credentials; client/aio/admin_users.py) ---------------------------------
    async def describe_user_scram_credentials(
        self, users: list[str] | None = None
    ) -> dict[str, list[ScramCredentialInfo]]:
        """{user: [ScramCredentialInfo(mechanism, iterations)]}; every user when None."""
        self._check_open()
        return await admin_users.describe(self._cluster, users)

    async def alter_user_scram_credentials(
        self,
        upsertions: list[UserScramCredentialUpsertion] = (),  # type: ignore[assignment]
        deletions: list[UserScramCredentialDeletion] = (),  # type: ignore[assignment]
    ) -> dict[str, GregorError | None]:
        """Kafka's alterUserScramCredentials: {user: None or the error refusing it}."""
        self._check_open()
        return await admin_users.alter(self._cluster, list(upsertions), list(deletions))

    async def create_user(
        self,
        name: str,
        password: str,
        mechanism: str = "SCRAM-SHA-512",
        iterations: int = scram.DEFAULT_ITERATIONS,
    ) -> None:
        """Create (or change the password of) SCRAM user `name` for `mechanism`."""
        self._check_open()
        await admin_users.create_user(self._cluster, name, password, mechanism, iterations)

    async def delete_user(self, name: str) -> None:
        """Remove every SCRAM credential of `name` (ResourceNotFoundError: none)."""
        self._check_open()
        await admin_users.delete_user(self._cluster, name)

    async def list_users(self) -> dict[str, list[ScramCredentialInfo]]:
        """Every user with SCRAM credentials, and which."""
        self._check_open()
        return await admin_users.describe(self._cluster, None)

    # -- ACLs (client/aio/admin_acls.py) -------------------------------------------------------
    async def create_acls(self, bindings: list[AclBinding]) -> dict[AclBinding, GregorError | None]:
        """Kafka's createAcls: {binding: None (created, or already there) or its error}."""
        self._check_open()
        return await admin_acls.create(self._cluster, list(bindings))

    async def describe_acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """Kafka's describeAcls: the ACLs `acl_filter` matches (None: every ACL)."""
        self._check_open()
        return await admin_acls.describe(self._cluster, acl_filter or AclBindingFilter())

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Kafka's deleteAcls: the ACLs each filter deleted, in order."""
        self._check_open()
        return await admin_acls.delete(self._cluster, list(filters))

    # -- client quotas (client/aio/admin_quotas.py) ---------------------------------------------
    async def describe_client_quotas(
        self,
        components: Sequence[ClientQuotaFilterComponent] = (),
        strict: bool = False,
    ) -> dict[ClientQuotaEntity, dict[str, float]]:
        """Kafka's describeClientQuotas: {entity: {quota key: value}} of every entity matching
        all `components` (none: every entity); `strict`: no other entity types than those."""
        self._check_open()
        return await admin_quotas.describe(self._cluster, list(components), strict)

    async def alter_client_quotas(
        self, alterations: Sequence[ClientQuotaAlteration], validate_only: bool = False
    ) -> dict[ClientQuotaEntity, GregorError | None]:
        """Kafka's alterClientQuotas: {entity: None or the error refusing its changes}."""
        self._check_open()
        return await admin_quotas.alter(self._cluster, list(alterations), validate_only)

    async def list_transactions(
        self, states: Iterable[str] = (), producer_ids: Iterable[int] = (), duration_ms: int = -1
    ) -> list[TransactionListing]:
        """Every transactional id, with its producer id and state (client/aio/admin_txn.py)."""
        self._check_open()
        return await admin_txn.list_transactions(self._cluster, states, producer_ids, duration_ms)

    async def describe_transactions(
        self, transactional_ids: Iterable[str], *, timeout_ms: int | None = None
    ) -> dict[str, TransactionDescription]:
        """Each id's state, producer id and epoch, timeout and partitions at its coordinator."""
        self._check_open()
        return await admin_txn.describe_transactions(
            self._cluster, list(transactional_ids), self._timeout(timeout_ms),
            self.settings.retry_backoff_ms,
        )  # fmt: skip

    async def describe_producers(
        self, partitions: Iterable[TopicPartition], *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, list[ProducerState]]:
        """Each partition's active producers at its leader (Kafka's describeProducers): id,
        epoch, last sequence and timestamp, coordinator epoch, open transaction's first
        offset (client/aio/admin_txn.py). Needs READ on the TOPIC."""
        self._check_open()
        return await admin_txn.describe_producers(
            self._cluster, list(partitions), self._timeout(timeout_ms),
            self.settings.retry_backoff_ms,
        )  # fmt: skip

    async def abort_transaction(
        self,
        partition: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """Write an ABORT marker for the producer to the partition (Kafka's abortTransaction:
        for a hanging transaction its coordinator no longer knows; the values come from
        describe_producers). Needs CLUSTER_ACTION on the CLUSTER."""
        self._check_open()
        await admin_txn.abort_transaction(
            self._cluster, partition, producer_id, producer_epoch, coordinator_epoch,
            self._timeout(timeout_ms), self.settings.retry_backoff_ms,
        )  # fmt: skip

    async def list_groups(self) -> list[GroupListing]:
        """Every consumer group: GroupListing(group_id, state)."""
        self._check_open()
        return await admin_groups.list_groups(self._cluster)

    async def describe_group(
        self, group_id: str, *, timeout_ms: int | None = None
    ) -> GroupDescription:
        """Members, assignment, and per partition the committed offset, log end offset and lag
        (client/aio/admin_groups.py). GroupIdNotFoundError for a group with neither members
        nor committed offsets."""
        self._check_open()
        return await admin_groups.describe_group(
            self._cluster, self._offsets, group_id, self._timeout(timeout_ms),
            self.settings.retry_backoff_ms,
        )  # fmt: skip

    async def delete_group(self, group_id: str, *, timeout_ms: int | None = None) -> None:
        """Delete a group without members and its committed offsets (NonEmptyGroupError,
        GroupIdNotFoundError)."""
        self._check_open()
        await admin_groups.delete_group(
            self._cluster, group_id, self._timeout(timeout_ms), self.settings.retry_backoff_ms
        )

    async def delete_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], *, timeout_ms: int | None = None
    ) -> None:
        """Delete a group's committed offsets of `partitions` (GroupSubscribedToTopicError for
        a topic one of its members subscribes to)."""
        self._check_open()
        await admin_groups.delete_group_offsets(
            self._cluster, group_id, [TopicPartition(*tp) for tp in partitions],
            self._timeout(timeout_ms), self.settings.retry_backoff_ms,
        )  # fmt: skip

    async def alter_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """Set a group's committed offsets ({tp: next offset to read}); the group must have
        no members (UnknownMemberIdError otherwise)."""
        self._check_open()
        await admin_groups.alter_group_offsets(
            self._cluster, group_id, {TopicPartition(*tp): int(o) for tp, o in offsets.items()},
            self._timeout(timeout_ms), self.settings.retry_backoff_ms,
        )  # fmt: skip

    async def describe_cluster(self, *, include_fenced: bool = False) -> ClusterDescription:
        """Cluster id, active controller, and the unfenced brokers (`include_fenced`: every
        registered broker, `fenced` set on those fenced)."""
        self._check_open()
        resp = await self._cluster.send_any(
            ApiKey.DESCRIBE_CLUSTER, {"include_fenced_brokers": include_fenced}
        )
        if resp["error_code"]:
            raise error_for_code(resp["error_code"])(resp["error_message"] or "DescribeCluster")
        return ClusterDescription(
            resp["cluster_id"],
            resp["controller_id"],
            [
                BrokerDescription(b["broker_id"], b["host"], b["port"], b["rack"], b["is_fenced"])
                for b in resp["brokers"]
            ],
        )

    async def list_offsets(self, query: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """{tp: -2 (earliest) | -1 (latest = high watermark) | timestamp ms} -> {tp: offset}
        (-1 when no record has a timestamp >= the one asked)."""
        self._check_open()
        got = await self._offsets.list_offsets(
            {TopicPartition(*tp): ts for tp, ts in query.items()}
        )
        return {tp: off for tp, (off, _ts) in got.items()}

    async def delete_records(
        self, offsets: Mapping[TopicPartition, int], *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """Delete every record below `offset` in each partition (Kafka's `deleteRecords`):
        {tp: offset, -1 = the last stable offset} -> {tp: low watermark}, the log start offset
        every in-sync replica has reached. Raises the partition's error: OffsetOutOfRangeError
        (offset above the high watermark or the last stable offset), PolicyViolationError (cleanup.policy=compact),
        UnknownTopicOrPartitionError, RequestTimedOutError (the replicas did not all follow
        within `timeout_ms`; the leader's log start has moved). See client/aio/admin_records.py."""
        self._check_open()
        return await admin_records.delete_records(
            self._cluster, offsets, self._timeout(timeout_ms), self.settings.retry_backoff_ms
        )

    async def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, Exception | None]:
        """Start, replace or cancel (None) moves: {tp: None if accepted, else the error}
        (Kafka's `alterPartitionReassignments`; client/aio/admin_reassign.py)."""
        self._check_open()
        t = self._timeout(timeout_ms)
        return await admin_reassign.alter_partition_reassignments(self._cluster, reassignments, t)

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None, *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, admin_reassign.PartitionReassignment]:
        """The moves in flight, of `partitions` or all (client/aio/admin_reassign.py)."""
        self._check_open()
        t = self._timeout(timeout_ms)
        return await admin_reassign.list_partition_reassignments(self._cluster, partitions, t)

    async def describe_log_dirs(
        self, brokers: Iterable[int], *, timeout_ms: int | None = None
    ) -> dict[int, dict[str, admin_reassign.LogDirDescription]]:
        """Each broker's log dirs and replica sizes (Kafka's `describeLogDirs`)."""
        self._check_open()
        t = self._timeout(timeout_ms)
        return await admin_reassign.describe_log_dirs(self._cluster, brokers, t)

    async def describe_quorum(self, *, timeout_ms: int | None = None) -> QuorumDescription:
        """The metadata quorum (bootstrap = a controller, or a combined server): leader, term,
        high watermark, each voter's and observer's log end offset and lag. Asked of the
        leader (following the `leader_endpoint` a follower names); while no leader is known
        (an election) it asks again with back-off until `timeout_ms` (default
        request.timeout.ms), then raises GregorTimeoutError (client/aio/admin_quorum.py)."""
        self._check_open()
        return await admin_quorum.describe_quorum(
            self._cluster, self.settings, self._timeout(timeout_ms)
        )

    async def incremental_alter_configs(
        self,
        changes: Mapping[tuple[str, str], Mapping[str, Any]],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> None:
        """Set or delete configs: `{("topic", name) | ("broker", id): {key: value | None}}`, a
        value of None deleting the key (back to its default). All resources go in one request;
        raises the first resource's error (UnknownTopicOrPartitionError, InvalidConfigError
        naming the key, ...). Answered once the controller committed the change; topic changes
        reach the live logs without a restart (client/aio/admin_configs.py)."""
        self._check_open()
        await admin_configs.incremental_alter_configs(
            self._cluster, changes, validate_only, self._timeout(timeout_ms)
        )

    async def describe_configs(
        self,
        topics: Iterable[str] = (),
        brokers: Iterable[int] = (),
        keys: Iterable[str] | None = None,
    ) -> dict[tuple[str, str], dict[str, ConfigEntry]]:
        """{("topic", name) | ("broker", id): {key: ConfigEntry}}."""
        self._check_open()
        return await admin_configs.describe_configs(self._cluster, topics, brokers, keys)
