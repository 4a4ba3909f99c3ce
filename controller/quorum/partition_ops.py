"""PartitionOps: AlterPartition (ISR changes guarded by leader and partition epochs) and
preferred-leader election (a QuorumController mixin over ControllerState). Controller thread only.
"""

from __future__ import annotations

import logging
from typing import Any

from client.errors import ErrorCode, InvalidRequestError
from client.protocol.apis.admin import ELECTION_PREFERRED, ELECTION_UNCLEAN
from controller.metadata.records import PartitionChange
from controller.quorum.replication import (
    check_isr_change,
    preferred_leader_changes,
    unclean_leader_changes,
)
from controller.quorum.state import ControllerState

_log = logging.getLogger(__name__)


class PartitionOps(ControllerState):
    def elect_preferred_leaders(
        self, partitions: list[tuple[str, int]] | None = None
    ) -> list[dict]:
        """ElectLeaders (preferred): [{topic, partition, error_code, error_message}] for the
        requested partitions (all when None: only the ones that moved are reported)."""
        return self.elect_leaders(ELECTION_PREFERRED, partitions)

    def elect_leaders(
        self, election_type: int, partitions: list[tuple[str, int]] | None = None
    ) -> list[dict]:
        """ElectLeaders: [{topic, partition, error_code, error_message}] for the requested
        partitions (all when None: only the ones elected are reported). Preferred: the first
        replica leads where it is live and in the ISR. Unclean: an offline partition gets a
        live replica as leader with ISR = [it]."""
        self._check_active()
        if election_type not in (ELECTION_PREFERRED, ELECTION_UNCLEAN):
            raise InvalidRequestError(f"unknown election type {election_type} (0 or 1)")
        live = self._live()
        only = None if partitions is None else set(partitions)
        if election_type == ELECTION_PREFERRED:
            changes = preferred_leader_changes(self.image, live, only)
        else:
            changes = unclean_leader_changes(self.image, live, only)
        elected = {(self.image.topics_by_id[c.topic_id].name, c.partition) for c in changes}
        self._write(changes)
        results = []
        for topic, p in partitions if partitions is not None else sorted(elected):
            reg = self.image.partition(topic, p)
            if reg is None:
                code, msg = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "unknown partition"
            elif (topic, p) in elected:
                code, msg = ErrorCode.NONE, None
            elif election_type == ELECTION_PREFERRED and reg.leader == reg.replicas[0]:
                code, msg = ErrorCode.ELECTION_NOT_NEEDED, "the preferred replica already leads"
            elif election_type == ELECTION_PREFERRED:
                code, msg = (
                    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                    f"preferred replica {reg.replicas[0]} is not live or not in the ISR",
                )
            elif reg.leader >= 0:
                code, msg = ErrorCode.ELECTION_NOT_NEEDED, f"broker {reg.leader} leads"
            else:
                code, msg = (
                    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                    f"no replica of {list(reg.replicas)} is live",
                )
            results.append(
                {"topic": topic, "partition": p, "error_code": int(code), "error_message": msg}
            )
        if changes:
            _log.log(
                logging.WARNING if election_type == ELECTION_UNCLEAN else logging.INFO,
                "[controller=%d] %s leaders elected for %d partitions",
                self.settings.node_id,
                "unclean" if election_type == ELECTION_UNCLEAN else "preferred",
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
