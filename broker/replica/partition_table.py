"""The partitions this broker serves, shared by the ReplicaManager and its collaborators
(MetadataApplier writes it; the produce/fetch paths, OffsetQueries, SessionFetches and
RecordsDeletion read it).

    table.get(tp) -> Partition | None            table.partitions() -> a copy of the dict
    table.leader(tp) -> Partition                (else ReplicaError: not served / not leader)
    table.fetchable(spec) -> Partition           (a leader at the spec's current leader epoch)

`failed` holds the partitions whose metadata failed to apply (MetadataApplier): they are not
served until a later image applies, and requests for them get a retriable
NOT_LEADER_OR_FOLLOWER saying why rather than UNKNOWN_TOPIC_OR_PARTITION.

Threads: reads are lock-free (a dict lookup); `put`/`pop` and `partitions()` take the table's
lock. Writes come only from the MetadataApplier (one application at a time).
"""

from __future__ import annotations

import threading

from broker.replica.partition import Partition
from broker.replica.specs import FetchPartitionSpec, ReplicaError
from client.errors import ErrorCode

TopicPartition = tuple[str, int]


class PartitionTable:
    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self._lock = threading.Lock()
        self._partitions: dict[TopicPartition, Partition] = {}
        # partitions whose metadata failed to apply: not served until a later image applies
        self.failed: dict[TopicPartition, str] = {}

    def get(self, tp: TopicPartition) -> Partition | None:
        return self._partitions.get(tp)

    def __contains__(self, tp: TopicPartition) -> bool:
        return tp in self._partitions

    def partitions(self) -> dict[TopicPartition, Partition]:
        with self._lock:
            return dict(self._partitions)

    def put(self, tp: TopicPartition, part: Partition) -> None:
        with self._lock:
            self._partitions[tp] = part

    def pop(self, tp: TopicPartition) -> None:
        with self._lock:
            self._partitions.pop(tp, None)

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return {tp: p.high_watermark for tp, p in self.partitions().items()}

    def missing(self, tp: TopicPartition) -> ReplicaError:
        """The error for a partition not in the table."""
        failed = self.failed.get(tp)
        if failed is not None:  # retriable: the next metadata image applies it again
            return ReplicaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"{tp[0]}-{tp[1]} is not served by broker {self.node_id}: its metadata failed"
                f" to apply ({failed})",
            )
        return ReplicaError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {tp[0]}-{tp[1]}"
        )

    def leader(self, tp: TopicPartition) -> Partition:
        """The replica of `tp` this broker leads with its log online, else a ReplicaError."""
        part = self._partitions.get(tp)
        if part is None:
            raise self.missing(tp)
        if part.log.offline:  # (first: the controller moves leadership off an offline log, and
            # the storage error says why; the client refreshes metadata on it and moves on)
            raise ReplicaError(ErrorCode.KAFKA_STORAGE_ERROR, f"log of {tp[0]}-{tp[1]} is offline")
        if not part.is_leader:
            raise ReplicaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.node_id} is not the leader of {tp[0]}-{tp[1]}",
            )
        return part

    def fetchable(self, spec: FetchPartitionSpec) -> Partition:
        """The replica `spec` may read or query: this broker leads it, at the spec's current
        leader epoch when it names one (else FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH)."""
        tp = (spec.topic, spec.partition)
        part = self._partitions.get(tp)
        if part is None:
            raise self.missing(tp)
        st = part.state  # (read straight: every fetch asks this of every partition)
        if st.leader_id != st.node_id:
            raise ReplicaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"not the leader of {tp[0]}-{tp[1]}"
            )
        epoch = spec.current_leader_epoch
        if epoch >= 0:
            leader_epoch = st.leader_epoch
            if epoch < leader_epoch:
                raise ReplicaError(
                    ErrorCode.FENCED_LEADER_EPOCH, "fetch from an older leader epoch"
                )
            if epoch > leader_epoch:
                raise ReplicaError(
                    ErrorCode.UNKNOWN_LEADER_EPOCH, "fetch from a newer leader epoch"
                )
        return part
