"""TopicOps: CreateTopics, DeleteTopics, CreatePartitions and IncrementalAlterConfigs as
metadata records (a QuorumController mixin over ControllerState). Controller thread only.
"""

from __future__ import annotations

import logging
from typing import Any

from client.errors import (
    BrokerResponseError,
    ErrorCode,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidRequestError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from controller.metadata.placement import assign_replicas
from controller.metadata.records import (
    NO_LEADER,
    RESOURCE_TOPIC,
    Config,
    Partition,
    RemoveTopic,
    Topic,
)
from controller.quorum.state import ControllerState
from controller.quorum.topic_configs import validate_topic_config
from controller.quorum.validation import (
    InvalidReplicaAssignmentError,
    check_assignment,
    check_topic_name,
    config_change_records,
)

_log = logging.getLogger(__name__)


def _topic_error(name: str, code: ErrorCode, msg: str | None = None) -> dict:
    return {
        "name": name,
        "error_code": int(code),
        "error_message": msg,
        "num_partitions": -1,
        "replication_factor": -1,
    }


class TopicOps(ControllerState):
    def _new_topic_id(self) -> bytes:
        while True:
            tid = self.rng.getrandbits(128).to_bytes(16, "big")
            if any(tid) and tid not in self.image.topics_by_id:
                return tid

    def create_topics(self, requests: list[dict], validate_only: bool = False) -> list[dict]:
        """CreateTopics: one result per request, in order. See the module docstring."""
        self._check_active()
        names = [r.get("name") for r in requests]
        results: list[dict] = []
        records: list[Any] = []
        brokers = {b: self.image.brokers[b].rack for b in self._live()}
        for req in requests:
            name: Any = req.get("name")
            if names.count(name) > 1:
                results.append(
                    _topic_error(
                        name, ErrorCode.INVALID_REQUEST, "topic named more than once in the request"
                    )
                )
                continue
            try:
                recs, nparts, rf = self._topic_records(req, brokers)
            except BrokerResponseError as e:
                results.append(_topic_error(name, e.code, e.message))
                continue
            results.append(
                {
                    "name": name,
                    "error_code": 0,
                    "error_message": None,
                    "num_partitions": nparts,
                    "replication_factor": rf,
                }
            )
            records.extend(recs)
        if not validate_only and records:
            self._write(records)
            _log.info(
                "[controller=%d] created topics %s",
                self.settings.node_id,
                [r["name"] for r in results if r["error_code"] == 0],
            )
        return results

    def _topic_records(self, req: dict, brokers: dict[int, str | None]) -> tuple[list, int, int]:
        name: Any = req.get("name")
        check_topic_name(name)
        if name in self.image.topics:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        nparts = req.get("num_partitions", -1)
        rf = req.get("replication_factor", -1)
        assignments = req.get("assignments") or []
        configs = {c["name"]: c.get("value") for c in (req.get("configs") or [])}
        for k, v in configs.items():
            err = validate_topic_config(k, v)
            if err:
                raise InvalidConfigError(f"{k}: {err}")
        if assignments:
            if nparts != -1 or rf != -1:
                raise InvalidRequestError(
                    "num_partitions and replication_factor must be -1 with manual assignments"
                )
            by_p = {a["partition"]: list(a["broker_ids"]) for a in assignments}
            if sorted(by_p) != list(range(len(by_p))):
                raise InvalidReplicaAssignmentError("partitions must be numbered 0..n-1")
            placement = check_assignment(self.image, by_p)
            nparts, rf = len(by_p), len(placement[0])
        else:
            if nparts == -1:
                nparts = self.settings.num_partitions
            if rf == -1:
                rf = self.settings.default_replication_factor
            if nparts <= 0:
                raise InvalidPartitionsError("number of partitions must be larger than 0")
            if nparts > self.settings.max_partitions_per_request:
                raise InvalidPartitionsError(
                    f"more than {self.settings.max_partitions_per_request} partitions"
                )
            placement = assign_replicas(nparts, rf, brokers, self.rng)
        tid = self._new_topic_id()
        recs: list[Any] = [Topic(name, tid)]
        for p in range(nparts):
            replicas = tuple(placement[p])
            isr = tuple(b for b in replicas if b in brokers) or replicas
            leader = isr[0] if isr[0] in brokers else NO_LEADER
            recs.append(Partition(tid, p, replicas, isr, leader, 0, 0))
        recs.extend(
            Config(RESOURCE_TOPIC, name, k, v) for k, v in sorted(configs.items()) if v is not None
        )
        return recs, nparts, rf

    def delete_topics(self, names: list[str]) -> list[dict]:
        """DeleteTopics: [{name, error_code, error_message}] in request order."""
        self._check_active()
        results, records, seen = [], [], set()
        for name in names:
            t = self.image.topics.get(name)
            if t is None or name in seen:
                results.append(
                    {
                        "name": name,
                        "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                        "error_message": f"unknown topic {name!r}",
                    }
                )
                continue
            seen.add(name)
            records.append(RemoveTopic(t.topic_id))
            results.append({"name": name, "error_code": 0, "error_message": None})
        if records:
            self._write(records)
            _log.info("[controller=%d] deleted topics %s", self.settings.node_id, sorted(seen))
        return results

    def create_partitions(self, topics: list[dict], validate_only: bool = False) -> list[dict]:
        """CreatePartitions: topics [{name, count, assignments: [[broker ids]] | None}] →
        [{name, error_code, error_message}]."""
        self._check_active()
        results, records = [], []
        brokers = {b: self.image.brokers[b].rack for b in self._live()}
        for req in topics:
            name: Any = req.get("name")
            try:
                t = self.image.topics.get(name)
                if t is None:
                    raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
                cur = len(t.partitions)
                count = req.get("count", -1)
                if count <= cur:
                    raise InvalidPartitionsError(f"topic has {cur} partitions; asked for {count}")
                if count - cur > self.settings.max_partitions_per_request:
                    # as CreateTopics: placing 2^31 partitions would take the controller down
                    raise InvalidPartitionsError(
                        f"{count - cur} new partitions: more than"
                        f" {self.settings.max_partitions_per_request} in one request"
                    )
                rf = len(t.partitions[0].replicas)
                assignments = req.get("assignments")
                if assignments is not None:  # [] is a list of the wrong length, not "none"
                    if len(assignments) != count - cur:
                        raise InvalidReplicaAssignmentError(f"expected {count - cur} assignments")
                    by_p = {cur + i: list(a) for i, a in enumerate(assignments)}
                    check_assignment(self.image, by_p)
                    if any(len(v) != rf for v in by_p.values()):
                        raise InvalidReplicaAssignmentError(f"replication factor must stay {rf}")
                    placement = by_p
                else:
                    placement = assign_replicas(
                        count - cur, rf, brokers, self.rng, start_partition=cur
                    )
            except BrokerResponseError as e:
                results.append(
                    {"name": name, "error_code": int(e.code), "error_message": e.message}
                )
                continue
            for p in range(cur, count):
                replicas = tuple(placement[p])
                isr = tuple(b for b in replicas if b in brokers) or replicas
                leader = isr[0] if isr[0] in brokers else NO_LEADER
                records.append(Partition(t.topic_id, p, replicas, isr, leader, 0, 0))
            results.append({"name": name, "error_code": 0, "error_message": None})
        if records and not validate_only:
            self._write(records)
        return results

    def incremental_alter_configs(
        self, resources: list[dict], validate_only: bool = False
    ) -> list[dict]:
        """IncrementalAlterConfigs: resources [{resource_type (2 topic, 4 broker), resource_name,
        configs: [{name, config_operation (0 set, 1 delete), value}]}] →
        [{resource_type, resource_name, error_code, error_message}]."""
        self._check_active()
        results, records = [], []
        for res in resources:
            out = {
                "resource_type": res.get("resource_type"),
                "resource_name": res.get("resource_name"),
                "error_code": 0,
                "error_message": None,
            }
            try:
                records += config_change_records(self.image, res)
            except BrokerResponseError as e:
                out.update(error_code=int(e.code), error_message=e.message)
            results.append(out)
        if records and not validate_only:
            self._write(records)
        return results
