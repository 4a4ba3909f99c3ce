"""Admin's partition reassignments (Kafka's `Admin.alterPartitionReassignments` and
`listPartitionReassignments`, KIP-455): AlterPartitionReassignments (45) and
ListPartitionReassignments (46), sent to any broker, which forwards them to the controller.

    await admin.alter_partition_reassignments({TopicPartition("t", 0): [4, 2, 3]})
    await admin.alter_partition_reassignments({TopicPartition("t", 0): None})   # cancel
    await admin.list_partition_reassignments()  # {tp: PartitionReassignment}

alter_partition_reassignments returns {tp: None when accepted (written to the metadata log;
the move completes once every target replica is in the ISR), else the error:
InvalidReplicaAssignmentError (empty, duplicate, unregistered or fenced brokers; a cancel that
would leave no in-sync replica), NoReassignmentInProgressError, UnknownTopicOrPartitionError}.
A whole-request failure raises. Both take `timeout_ms` (default: request.timeout.ms).

Loop-owned: runs on the admin's event loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from client.aio.types import TopicPartition
from client.errors import ConfigError, error_for_code
from client.protocol import ApiKey
from client.protocol.apis.reassignments import group_topic_partitions
from client.protocol.body import Body

if TYPE_CHECKING:
    from client.aio.cluster import ClusterClient


class PartitionReassignment(NamedTuple):
    """A reassignment in flight (Kafka's PartitionReassignment): `replicas` is the union of
    the original and the target replicas; the target is `replicas` less `removing_replicas`."""

    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]

    @property
    def target_replicas(self) -> list[int]:
        return [r for r in self.replicas if r not in self.removing_replicas]


def _check(reassignments: Mapping[TopicPartition, Sequence[int] | None]) -> list[Body]:
    by_topic: dict[str, list[Body]] = {}
    for tp, target in reassignments.items():
        tp = TopicPartition(*tp)
        if target is not None:
            if isinstance(target, (str, bytes)) or not all(
                isinstance(b, int) and not isinstance(b, bool) for b in target
            ):
                raise ConfigError(f"{tp}: the target must be a list of broker ids, not {target!r}")
            target = list(target)
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "replicas": target}
        )
    return [{"name": t, "partitions": ps} for t, ps in by_topic.items()]


async def alter_partition_reassignments(
    cluster: ClusterClient,
    reassignments: Mapping[TopicPartition, Sequence[int] | None],
    timeout_ms: int,
) -> dict[TopicPartition, Exception | None]:
    topics = _check(reassignments)
    if not topics:
        return {}
    resp = await cluster.send_any(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        {"timeout_ms": timeout_ms, "topics": topics},
        timeout_ms=timeout_ms + 5000,
    )
    out: dict[TopicPartition, Exception | None] = {}
    for t in resp["responses"]:
        for p in t["partitions"]:
            tp = TopicPartition(t["name"], p["partition_index"])
            code = p["error_code"]
            out[tp] = error_for_code(code)(p["error_message"] or str(tp)) if code else None
    if resp["error_code"] and not out:
        raise error_for_code(resp["error_code"])(
            resp["error_message"] or "AlterPartitionReassignments"
        )
    return out


async def list_partition_reassignments(
    cluster: ClusterClient, partitions: Iterable[TopicPartition] | None, timeout_ms: int
) -> dict[TopicPartition, PartitionReassignment]:
    wanted = None if partitions is None else [tuple(TopicPartition(*tp)) for tp in partitions]
    resp = await cluster.send_any(
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        {"timeout_ms": timeout_ms, "topics": group_topic_partitions(wanted)},  # type: ignore[arg-type]
        timeout_ms=timeout_ms + 5000,
    )
    if resp["error_code"]:
        raise error_for_code(resp["error_code"])(
            resp["error_message"] or "ListPartitionReassignments"
        )
    return {
        TopicPartition(t["name"], p["partition_index"]): PartitionReassignment(
            list(p["replicas"]), list(p["adding_replicas"]), list(p["removing_replicas"])
        )
        for t in resp["topics"]
        for p in t["partitions"]
    }


class LogDirDescription(NamedTuple):
    """One log directory of a broker (Kafka's LogDirDescription): `error` None when online;
    `replicas` {tp: size in bytes}."""

    error: Exception | None
    replicas: dict[TopicPartition, int]
    total_bytes: int
    usable_bytes: int


async def describe_log_dirs(
    cluster: ClusterClient, brokers: Iterable[int], timeout_ms: int
) -> dict[int, dict[str, LogDirDescription]]:
    out: dict[int, dict[str, LogDirDescription]] = {}
    brokers = list(brokers)
    if any(b not in cluster.metadata.brokers for b in brokers):
        await cluster.refresh()  # the brokers' addresses (an admin may not have asked yet)
    for b in brokers:
        resp = await cluster.send(b, ApiKey.DESCRIBE_LOG_DIRS, {"topics": None}, timeout_ms)
        assert resp is not None
        if resp["error_code"]:
            raise error_for_code(resp["error_code"])(f"DescribeLogDirs to broker {b}")
        out[b] = {
            r["log_dir"]: LogDirDescription(
                error_for_code(r["error_code"])(r["log_dir"]) if r["error_code"] else None,
                {
                    TopicPartition(t["name"], p["partition_index"]): p["partition_size"]
                    for t in r["topics"]
                    for p in t["partitions"]
                },
                r["total_bytes"],
                r["usable_bytes"],
            )
            for r in resp["results"]
        }
    return out
