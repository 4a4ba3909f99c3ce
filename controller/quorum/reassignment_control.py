"""ReassignmentControlManager: AlterPartitionReassignments and ListPartitionReassignments
(KIP-455), and completing reassignments whose target replicas are all in sync.

The state of a reassignment is in the partition's registration (reassignment.py), so this
manager owns none: a new active controller finds the reassignments in flight in the image it
loads and completes them (`complete_ready`, on load and periodically). Completion on an ISR
expansion happens inside AlterPartition itself (ReplicationControlManager calls
`reassignment.isr_change`). Controller thread only.
"""

from __future__ import annotations

import logging
from typing import Any

from client.errors import ErrorCode
from client.protocol.body import Body
from controller.metadata.records import PartitionChange
from controller.quorum import reassignment
from controller.quorum.cluster_control import ClusterControlManager
from controller.quorum.state import MAX_RECORDS_PER_USER_OP, ControllerCore, ControlManager
from controller.results import (
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
    ReassignmentPartitionResult,
    ReassignmentTopicResult,
)

_log = logging.getLogger(__name__)

# how often the active controller looks for reassignments that can complete without an ISR
# change (after a failover; a leader move that waited for a live target replica)
COMPLETION_CHECK_INTERVAL_MS = 1000


def _result(p: Any, code: ErrorCode, message: str | None = None) -> ReassignmentPartitionResult:
    return {"partition_index": p, "error_code": int(code), "error_message": message}


class ReassignmentControlManager(ControlManager):
    def __init__(self, core: ControllerCore, cluster: ClusterControlManager) -> None:
        super().__init__(core)
        self.cluster = cluster
        self._next_check_ms = 0.0
        # the image offset of the last check that found no move in flight: a check of the
        # same image again is skipped (it scans every partition)
        self._idle_at_offset = -2

    def alter_partition_reassignments(self, topics: list[Body]) -> list[ReassignmentTopicResult]:
        """AlterPartitionReassignments: topics [{name, partitions: [{partition_index,
        replicas: [broker ids] | None}]}] → [{name, partitions: [{partition_index, error_code,
        error_message}]}] in request order. `replicas` None cancels the partition's
        reassignment (NO_REASSIGNMENT_IN_PROGRESS when there is none). Targets must name
        distinct, registered, unfenced brokers (INVALID_REPLICA_ASSIGNMENT). The changes of
        one request are written as one atomic batch."""
        self._check_active()
        live = self.cluster.live()
        out: list[ReassignmentTopicResult] = []
        records: list[PartitionChange] = []
        seen: set[tuple[str, int]] = set()
        for treq in topics:
            name: Any = treq.get("name")
            t = self.image.topics.get(name)
            parts_out: list[ReassignmentPartitionResult] = []
            out.append({"name": name, "partitions": parts_out})
            for preq in treq.get("partitions", []):
                p = preq.get("partition_index")
                reg = t.partitions.get(p) if t is not None else None
                if t is None or reg is None:
                    parts_out.append(
                        _result(
                            p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {name}-{p}"
                        )
                    )
                    continue
                if (name, p) in seen:
                    parts_out.append(
                        _result(p, ErrorCode.INVALID_REQUEST, "partition named more than once")
                    )
                    continue
                seen.add((name, p))
                target = preq.get("replicas")
                try:
                    if target is None:
                        if not reg.reassigning:
                            parts_out.append(
                                _result(
                                    p,
                                    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                    f"no reassignment of {name}-{p} is in progress",
                                )
                            )
                            continue
                        ch = reassignment.cancel(t.topic_id, p, reg, live)
                    else:
                        problem = self._check_target(target)
                        if problem is not None:
                            parts_out.append(
                                _result(p, ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
                            )
                            continue
                        ch = reassignment.start(t.topic_id, p, reg, tuple(target), live)
                except reassignment.ReassignmentRefused as e:
                    parts_out.append(_result(p, ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(e)))
                    continue
                if ch is not None:
                    records.append(ch)
                parts_out.append(_result(p, ErrorCode.NONE))
        if len(records) > MAX_RECORDS_PER_USER_OP:
            msg = (
                f"{len(records)} partition changes: more than the {MAX_RECORDS_PER_USER_OP} one"
                " request may write; split the reassignment over several requests"
            )
            for t_out in out:
                for r in t_out["partitions"]:
                    if r["error_code"] == 0:
                        r["error_code"], r["error_message"] = int(ErrorCode.POLICY_VIOLATION), msg
            return out
        if records:
            self._write(records)
            _log.info(
                "[controller=%d] reassignment changes for %d partitions: %s",
                self.settings.node_id,
                len(records),
                ", ".join(self._describe(ch) for ch in records[:20])
                + (" ..." if len(records) > 20 else ""),
            )
        return out

    def _check_target(self, target: Any) -> str | None:
        """Why `target` cannot be a partition's replicas (None: it can)."""
        if not isinstance(target, list) or not target:
            return "the target replicas must be a non-empty list of broker ids"
        if len(set(target)) != len(target):
            return f"duplicate broker ids in {target}"
        unknown = [b for b in target if b not in self.image.brokers]
        if unknown:
            return f"brokers {unknown} are not registered"
        fenced = [b for b in target if self.image.brokers[b].fenced]
        if fenced:
            return f"brokers {fenced} are fenced (not alive)"
        return None

    def _describe(self, ch: PartitionChange) -> str:
        name = self.image.topics_by_id[ch.topic_id].name
        reg = self.image.partition(name, ch.partition)
        assert reg is not None  # just written
        if reg.reassigning:
            return (
                f"{name}-{ch.partition} moving to {list(reg.target_replicas)}"
                f" (adding {list(reg.adding_replicas)}, removing {list(reg.removing_replicas)})"
            )
        return f"{name}-{ch.partition} on {list(reg.replicas)}"

    def list_partition_reassignments(
        self, partitions: list[tuple[str, int]] | None = None
    ) -> list[OngoingTopicReassignment]:
        """ListPartitionReassignments: the reassignments in flight among `partitions` (None:
        all) as [{name, partitions: [{partition_index, replicas, adding_replicas,
        removing_replicas}]}], sorted. Partitions without one (or unknown) are left out, as
        Kafka does."""
        self._check_active()
        wanted = self.image.reassigning_partitions() if partitions is None else sorted(partitions)
        by_topic: dict[str, list[OngoingPartitionReassignment]] = {}
        for name, p in wanted:
            reg = self.image.partition(name, p)
            if reg is None or not reg.reassigning:
                continue
            by_topic.setdefault(name, []).append(
                {
                    "partition_index": p,
                    "replicas": list(reg.replicas),
                    "adding_replicas": list(reg.adding_replicas),
                    "removing_replicas": list(reg.removing_replicas),
                }
            )
        return [{"name": n, "partitions": ps} for n, ps in sorted(by_topic.items())]

    def complete_ready(self) -> int:
        """Write the completion of every reassignment in flight that can complete now;
        returns how many. The active controller's tick calls it every
        COMPLETION_CHECK_INTERVAL_MS, and at once after a load."""
        if not self.core.log.is_leader() or self.image.offset == self._idle_at_offset:
            return 0
        live = self.cluster.live()
        changes = []
        moving = self.image.reassigning_partitions()
        if not moving:
            self._idle_at_offset = self.image.offset
        for name, p in moving:
            t = self.image.topics[name]
            ch = reassignment.completion(t.topic_id, p, t.partitions[p], live)
            if ch is not None:
                changes.append(ch)
        if changes:
            self._write_changes(changes)
            _log.info(
                "[controller=%d] completed %d reassignments: %s",
                self.settings.node_id,
                len(changes),
                ", ".join(self._describe(ch) for ch in changes[:20]),
            )
        return len(changes)

    def tick(self) -> None:
        now = self.clock()
        if now >= self._next_check_ms:
            self._next_check_ms = now + COMPLETION_CHECK_INTERVAL_MS
            self.complete_ready()

    def reset(self) -> None:
        """After a load: check at the next tick."""
        self._next_check_ms = 0.0
        self._idle_at_offset = -2
