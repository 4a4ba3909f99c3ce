"""DeleteRecords on the leader (an object the ReplicaManager holds): move each partition's log start
offset, then wait until every in-sync replica's has moved too (Kafka's DelayedDeleteRecords).

    rm.records_deletion.delete_records(timeout_ms, {(topic, partition): offset}, callback)
        -> dict | None

Per partition: -1 means the last stable offset (the high watermark unless a transaction is
undecided); an offset above the HW, or above the last stable offset (records of a transaction
not yet decided: docs/storage.md, "Retention and transactions"), or below -1, is
OFFSET_OUT_OF_RANGE; a topic whose cleanup.policy lacks `delete` is POLICY_VIOLATION (Kafka
refuses delete-records on compacted-only topics); not the leader NOT_LEADER_OR_FOLLOWER;
unknown UNKNOWN_TOPIC_OR_PARTITION. The leader's move uses the log's own mechanism
(LogRetention.delete_records_before: log start offset checkpoint, segments wholly below deleted as
retention deletes them). Followers apply the leader's log start offset from each Fetch answer
(follower.follow_log_start) and report theirs in their next fetch; the answer waits for the
low watermark (Partition.low_watermark: the smallest log start over the ISR) to reach the
requested offset, or `timeout_ms` (then REQUEST_TIMED_OUT; the move itself stays).

Threads: any (I/O workers; completion on whichever thread reports a follower's log start, or
the purgatory's reaper).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.purgatory import Purgatory
from broker.replica.delayed import DelayedDeleteRecords, DeleteRecordsStatus, produce_key
from broker.replica.partition import Partition
from broker.replica.specs import ReplicaError
from client.errors import BrokerResponseError, ErrorCode, StorageError

if TYPE_CHECKING:
    from broker.replica.manager import ReplicaSettings

TopicPartition = tuple[str, int]
HIGH_WATERMARK = -1  # the offset meaning "up to the high watermark"


class RecordsDeletion:
    """Owns nothing but the rule: the partitions, their purgatory and the fetch wake-up are
    the ReplicaManager's, passed in."""

    def __init__(
        self,
        partition: Callable[[TopicPartition], Partition | None],
        leader_partition: Callable[[TopicPartition], Partition],
        produce_purgatory: Purgatory,
        settings: ReplicaSettings,
        wake_fetches: Callable[[list[TopicPartition]], None],
    ) -> None:
        """`partition(tp)`: this broker's replica or None; `leader_partition(tp)`: the replica
        it leads, else a ReplicaError (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION)."""
        self._partition = partition
        self._leader_partition = leader_partition
        self.produce_purgatory = produce_purgatory
        self.settings = settings
        self._wake_fetches = wake_fetches

    def delete_records(
        self,
        timeout_ms: int,
        offsets: dict[TopicPartition, int],
        callback: Callable[[dict[TopicPartition, DeleteRecordsStatus]], None],
    ) -> dict[TopicPartition, DeleteRecordsStatus] | None:
        """Move each partition's log start (a bad partition fails alone). Returns the statuses
        when final; else parks a DelayedDeleteRecords that calls `callback` later."""
        statuses = {tp: self._delete_one(tp, offset) for tp, offset in offsets.items()}
        moved = [tp for tp, s in statuses.items() if s.required_offset >= 0]
        if moved:  # followers idle in fetch sessions learn the new start with their next answer
            self._wake_fetches(moved)
        waiting = [tp for tp in moved if not self.check_delete_records(tp, statuses[tp])]
        if not waiting:
            return statuses
        op = DelayedDeleteRecords(
            min(max(timeout_ms, 0), self.settings.max_produce_timeout_ms),
            statuses,
            self.check_delete_records,
            callback,
        )
        self.produce_purgatory.try_complete_else_watch(op, [produce_key(*tp) for tp in waiting])
        return None

    def _delete_one(self, tp: TopicPartition, offset: int) -> DeleteRecordsStatus:
        try:
            part = self._leader_partition(tp)
            if not part.log.config.delete:
                raise ReplicaError(
                    ErrorCode.POLICY_VIOLATION,
                    f"{tp[0]} has cleanup.policy=compact: records cannot be deleted by offset "
                    "(add delete to cleanup.policy)",
                )
            hw = part.high_watermark
            # -1: as far as records may go, the last stable offset (the HW, unless a
            # transaction is undecided)
            target = (
                part.log.producers.last_stable_offset(hw) if offset == HIGH_WATERMARK else offset
            )
            if target < 0 or target > hw:
                raise ReplicaError(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    f"offset {offset} of {tp[0]}-{tp[1]} is outside [0, high watermark {hw}] "
                    "(-1 means the last stable offset: the high watermark, or the first "
                    "offset of a transaction not yet decided)",
                )
            epoch = part.leader_epoch
            part.log.retention.delete_records_before(target, hw)
        except ReplicaError as e:
            return DeleteRecordsStatus(int(e.code), error_message=e.message)
        except StorageError as exc:
            return DeleteRecordsStatus(int(ErrorCode.KAFKA_STORAGE_ERROR), error_message=str(exc))
        except BrokerResponseError as exc:
            return DeleteRecordsStatus(int(exc.code), error_message=str(exc))
        return DeleteRecordsStatus(
            0, low_watermark=part.low_watermark(), required_offset=target, leader_epoch=epoch
        )

    def check_delete_records(self, tp: TopicPartition, status: DeleteRecordsStatus) -> bool:
        """DelayedDeleteRecords' condition for one partition: True once it has its final
        answer (the low watermark reached the offset, or the leadership moved)."""
        part = self._partition(tp)
        if part is None or not part.is_leader or part.leader_epoch != status.leader_epoch:
            status.error_code = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            status.error_message = f"leadership of {tp[0]}-{tp[1]} moved while waiting"
            status.required_offset = -1
            return True
        low = part.low_watermark()
        status.low_watermark = max(status.low_watermark, low)
        if low < status.required_offset:
            return False
        status.required_offset = -1
        return True

    def follower_log_start_moved(self, tp: TopicPartition) -> None:
        """A follower reported a higher log start offset: retry the DeleteRecords waiting."""
        self.produce_purgatory.check_and_complete(produce_key(*tp))
