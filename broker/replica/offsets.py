"""Offset queries a partition leader answers: ListOffsets (by time: earliest, latest, a
timestamp) and OffsetForLeaderEpoch (KIP-101/279: the end offset of a leader epoch in this
log). A ReplicaManager mixin over its leader lookup. Thread-safe as the ReplicaManager."""

from __future__ import annotations

import logging
from typing import Any

from broker.replica.partition import Partition
from broker.replica.specs import FetchPartitionSpec, ReplicaError
from client.errors import ErrorCode, StorageError

_log = logging.getLogger(__name__)


class OffsetQueries:
    def _fetchable_part(self, spec: FetchPartitionSpec) -> Partition:
        raise NotImplementedError  # ReplicaManager's: the leader of spec, or ReplicaError

    def list_offsets(
        self, replica_id: int, requests: list[tuple[str, int, int, int]]
    ) -> list[dict[str, Any]]:
        """[(topic, partition, timestamp, current_leader_epoch)] → [{topic, partition,
        error_code, timestamp, offset, leader_epoch}]. -2 earliest, -1 latest (the HW for
        consumers, the log end for followers), else the first offset with timestamp >= ts."""
        out = []
        for topic, p, ts, cur_epoch in requests:
            entry: dict[str, Any] = {
                "topic": topic,
                "partition": p,
                "error_code": 0,
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": -1,
            }
            out.append(entry)
            try:
                part = self._fetchable_part(FetchPartitionSpec(topic, p, 0, 0, cur_epoch))
                log = part.log
                hw = part.high_watermark if replica_id < 0 else log.end_offset
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
            except ReplicaError as e:
                entry["error_code"] = int(e.code)
            except StorageError as exc:
                entry["error_code"] = int(ErrorCode.KAFKA_STORAGE_ERROR)
                _log.error("list_offsets %s-%d: %s", topic, p, exc)
        return out

    def offsets_for_leader_epoch(
        self, requests: list[tuple[str, int, int, int]]
    ) -> list[dict[str, Any]]:
        """[(topic, partition, current_leader_epoch, leader_epoch)] → [{topic, partition,
        error_code, leader_epoch, end_offset}]: the largest epoch <= leader_epoch in this log and
        its end offset (the start of the next epoch, or the log end for the latest); (-1, -1)
        when the log knows no epoch that old. Leaders only; a current_leader_epoch that is not
        this leader's gets FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH."""
        out = []
        for topic, p, cur_epoch, epoch in requests:
            entry: dict[str, Any] = {
                "topic": topic,
                "partition": p,
                "error_code": 0,
                "leader_epoch": -1,
                "end_offset": -1,
            }
            out.append(entry)
            try:
                part = self._fetchable_part(FetchPartitionSpec(topic, p, 0, 0, cur_epoch))
                entry["leader_epoch"], entry["end_offset"] = part.log.end_offset_for_epoch(epoch)
            except ReplicaError as e:
                entry["error_code"] = int(e.code)
            except StorageError as exc:
                entry["error_code"] = int(ErrorCode.KAFKA_STORAGE_ERROR)
                _log.error("offsets_for_leader_epoch %s-%d: %s", topic, p, exc)
        return out
