"""PartitionOps: AlterPartition (ISR changes guarded by leader and partition epochs) and
preferred-leader election (a QuorumController mixin over ControllerState). Controller thread only.
"""

from __future__ import annotations

import logging
from typing import Any

from client.errors import ErrorCode
from controller.metadata.records import PartitionChange
from controller.quorum.replication import check_isr_change, preferred_leader_changes
from controller.quorum.state import ControllerState

_log = logging.getLogger(__name__)


class PartitionOps(ControllerState):
    def elect_preferred_leaders(
        self, partitions: list[tuple[str, int]] | None = None
    ) -> list[dict]:
        """ElectLeaders (preferred): [{topic, partition, error_code, error_message}] for the
        requested partitions (all when None: only the ones that moved are reported)."""
        self._check_active()
        live = self._live()
        only = None if partitions is None else set(partitions)
        changes = preferred_leader_changes(self.image, live, only)
        self._write(changes)
        moved = {(self.image.topics_by_id[c.topic_id].name, c.partition) for c in changes}
        results = []
        for topic, p in partitions if partitions is not None else sorted(moved):
            reg = self.image.partition(topic, p)
            if reg is None:
                code, msg = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "unknown partition"
            elif (topic, p) in moved:
                code, msg = ErrorCode.NONE, None
            elif reg.leader == reg.replicas[0]:
                code, msg = ErrorCode.ELECTION_NOT_NEEDED, "the preferred replica already leads"
            else:
                code, msg = (
                    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                    "preferred replica not live or not in ISR",
                )
            results.append(
                {"topic": topic, "partition": p, "error_code": int(code), "error_message": msg}
            )
        if changes:
            _log.info(
                "[controller=%d] preferred leaders elected for %d partitions",
                self.settings.node_id,
                len(changes),
            )
        return results

    def alter_partition(self, broker_id: int, broker_epoch: int, topics: list[dict]) -> dict:
        """AlterPartition: topics [{name, partitions: [{partition, leader_epoch, new_isr,
        partition_epoch}]}] → {error_code, topics: [{name, partitions: [{partition, error_code,
        leader_id, leader_epoch, isr, partition_epoch}]}]}."""
        self._check_active()
        b = self.image.brokers.get(broker_id)
        if b is None or b.broker_epoch != broker_epoch:
            return {"error_code": int(ErrorCode.STALE_BROKER_EPOCH), "topics": []}
        live = set(self.image.live_brokers())
        out_topics, records, pending, seen = [], [], [], set()
        for treq in topics:
            name: Any = treq.get("name")
            t = self.image.topics.get(name)
            parts_out = []
            for preq in treq.get("partitions", []):
                p = preq["partition"]
                reg = t.partitions.get(p) if t is not None else None
                res = {
                    "partition": p,
                    "error_code": 0,
                    "leader_id": -1,
                    "leader_epoch": -1,
                    "isr": [],
                    "partition_epoch": -1,
                }
                parts_out.append(res)
                if reg is None or t is None:
                    res["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    continue
                if (name, p) in seen:
                    res["error_code"] = int(ErrorCode.INVALID_REQUEST)
                    continue
                seen.add((name, p))
                code, new_isr = check_isr_change(reg, broker_id, preq, live)
                res["error_code"] = int(code)
                if new_isr is not None:
                    records.append(PartitionChange(t.topic_id, p, isr=new_isr))
                pending.append((name, p, res))
            out_topics.append({"name": name, "partitions": parts_out})
        if records:
            self._write(records)
        for name, p, res in pending:
            if res["error_code"] in (
                0,
                int(ErrorCode.FENCED_LEADER_EPOCH),
                int(ErrorCode.INVALID_UPDATE_VERSION),
            ):
                reg = self.image.partition(name, p)
                assert reg is not None  # only partitions that exist are pending
                res.update(
                    leader_id=reg.leader,
                    leader_epoch=reg.leader_epoch,
                    isr=list(reg.isr),
                    partition_epoch=reg.partition_epoch,
                )
        return {"error_code": 0, "topics": out_topics}
