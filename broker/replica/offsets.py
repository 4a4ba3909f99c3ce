"""Offset queries a partition leader answers: ListOffsets (by time: earliest, latest, a
timestamp), OffsetForLeaderEpoch (KIP-101/279: the end offset of a leader epoch in this
log) and DescribeProducers (the log's producer state). An object the ReplicaManager holds,
over the shared PartitionTable's leader lookup; it owns no state. Any thread but an event
loop (the producer state may be built from the log on first use).

    rm.offsets.list_offsets(replica_id, [(t, p, timestamp, epoch)])     -> list[dict]
    rm.offsets.offsets_for_leader_epoch([(t, p, current_epoch, epoch)]) -> list[dict]
    rm.offsets.describe_producers([(t, p)])                              -> list[dict]
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.replica.partition import Partition
from broker.replica.partition_table import PartitionTable
from broker.replica.specs import FetchPartitionSpec, ReplicaError
from client.errors import ErrorCode, StorageError
from client.protocol.body import Body

_log = logging.getLogger(__name__)


class OffsetQueries:
    def __init__(self, table: PartitionTable) -> None:
        self.table = table

    def _answer(
        self,
        what: str,
        topic: str,
        p: int,
        current_leader_epoch: int,
        defaults: Body,
        fill: Callable[[Partition, Body], None],
    ) -> Body:
        """One partition's answer: `defaults` (and error_code 0) filled in by `fill` on this
        leader's partition, or the error that kept it from being asked."""
        entry: Body = {"topic": topic, "partition": p, "error_code": 0, **defaults}
        try:
            fill(
                self.table.fetchable(FetchPartitionSpec(topic, p, 0, 0, current_leader_epoch)),
                entry,
            )
        except ReplicaError as e:
            entry["error_code"] = int(e.code)
        except StorageError as exc:
            entry["error_code"] = int(ErrorCode.KAFKA_STORAGE_ERROR)
            _log.error("%s %s-%d: %s", what, topic, p, exc)
        return entry

    def list_offsets(
        self, replica_id: int, requests: list[tuple[str, int, int, int]], isolation_level: int = 0
    ) -> list[Body]:
        """[(topic, partition, timestamp, current_leader_epoch)] → [{topic, partition,
        error_code, timestamp, offset, leader_epoch}]. -2 earliest, -1 latest (the HW for
        consumers, the log end for followers; the last stable offset for read_committed ones),
        else the first offset with timestamp >= ts (below that end)."""

        def by_time(ts: int) -> Callable[[Partition, Body], None]:
            def fill(part: Partition, entry: Body) -> None:
                log = part.log
                hw = part.high_watermark if replica_id < 0 else log.end_offset
                if isolation_level == 1 and replica_id < 0:  # read_committed: up to the LSO
                    hw = log.producers.last_stable_offset(hw)
                entry["leader_epoch"] = part.leader_epoch
                if ts == -2:
                    entry["offset"] = log.log_start_offset
                elif ts == -1:
                    entry["offset"] = hw
                else:
                    found = log.offset_for_timestamp(ts)
                    if found is not None and found.offset < hw:
                        entry["timestamp"] = found.timestamp
                        entry["offset"] = found.offset
                        entry["leader_epoch"] = found.leader_epoch

            return fill

        defaults = {"timestamp": -1, "offset": -1, "leader_epoch": -1}
        return [
            self._answer("list_offsets", topic, p, cur_epoch, defaults, by_time(ts))
            for topic, p, ts, cur_epoch in requests
        ]

    def offsets_for_leader_epoch(self, requests: list[tuple[str, int, int, int]]) -> list[Body]:
        """[(topic, partition, current_leader_epoch, leader_epoch)] → [{topic, partition,
        error_code, leader_epoch, end_offset}]: the largest epoch <= leader_epoch in this log and
        its end offset (the start of the next epoch, or the log end for the latest); (-1, -1)
        when the log knows no epoch that old. Leaders only; a current_leader_epoch that is not
        this leader's gets FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH."""

        def epoch_end(epoch: int) -> Callable[[Partition, Body], None]:
            def fill(part: Partition, entry: Body) -> None:
                entry["leader_epoch"], entry["end_offset"] = part.log.end_offset_for_epoch(epoch)

            return fill

        defaults = {"leader_epoch": -1, "end_offset": -1}
        return [
            self._answer("offsets_for_leader_epoch", topic, p, cur, defaults, epoch_end(epoch))
            for topic, p, cur, epoch in requests
        ]

    def describe_producers(self, requests: list[tuple[str, int]]) -> list[Body]:
        """[(topic, partition)] → [{topic, partition, error_code, active_producers: [{
        producer_id, producer_epoch, last_sequence, last_timestamp, coordinator_epoch,
        current_txn_start_offset}]}], from this leader's producer state."""

        def fill(part: Partition, entry: Body) -> None:
            entry["active_producers"] = [p._asdict() for p in part.log.producers.describe()]

        return [
            self._answer("describe_producers", topic, p, -1, {"active_producers": []}, fill)
            for topic, p in requests
        ]
