"""ReplicationControlManager: topics and partitions as metadata records — CreateTopics,
DeleteTopics, CreatePartitions (placement over the live brokers that can take new replicas:
`_place`), AlterPartition (ISR changes guarded by leader and partition epochs) and leader
elections (ElectLeaders: preferred and unclean). It asks the ClusterControlManager which
brokers are live (and which cannot take new replicas) and the ConfigurationControlManager for
topic configs. Controller thread only.
"""

from __future__ import annotations

import logging
from typing import Any

from client.errors import (
    BrokerResponseError,
    ErrorCode,
    InvalidPartitionsError,
    InvalidRequestError,
    PolicyViolationError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from client.protocol.apis.admin import ELECTION_PREFERRED, ELECTION_UNCLEAN
from client.protocol.body import Body
from controller.metadata.placement import assign_replicas
from controller.metadata.records import (
    NO_LEADER,
    RESOURCE_TOPIC,
    Config,
    MetadataRecord,
    Partition,
    RemoveTopic,
    Topic,
)
from controller.quorum import reassignment
from controller.quorum.cluster_control import ClusterControlManager
from controller.quorum.config_control import ConfigurationControlManager
from controller.quorum.replication import (
    check_isr_change,
    preferred_leader_changes,
    unclean_leader_changes,
)
from controller.quorum.state import MAX_RECORDS_PER_USER_OP, ControllerCore, ControlManager
from controller.quorum.validation import (
    InvalidReplicaAssignmentError,
    check_assigned_capacity,
    check_assignment,
    check_capacity,
    check_topic_name,
)
from controller.results import (
    AlterPartitionPartitionResult,
    AlterPartitionResult,
    AlterPartitionTopicResult,
    CreateTopicResult,
    ElectionResult,
    TopicResult,
)

_log = logging.getLogger(__name__)


def _check_request_size(records: int, what: str) -> None:
    """PolicyViolationError when one request's records (those before `what` and its own) would
    pass MAX_RECORDS_PER_USER_OP: they are written as one atomic batch (state.py)."""
    if records > MAX_RECORDS_PER_USER_OP:
        raise PolicyViolationError(
            f"{what} would bring this request to {records} metadata records, more than the"
            f" {MAX_RECORDS_PER_USER_OP} one request may write: split it over several requests"
        )


def _topic_error(name: str, code: ErrorCode, msg: str | None = None) -> CreateTopicResult:
    return {
        "name": name,
        "error_code": int(code),
        "error_message": msg,
        "num_partitions": -1,
        "replication_factor": -1,
    }


class ReplicationControlManager(ControlManager):
    def __init__(
        self,
        core: ControllerCore,
        cluster: ClusterControlManager,
        configs: ConfigurationControlManager,
    ) -> None:
        super().__init__(core)
        self.cluster = cluster
        self.configs = configs

    def _new_topic_id(self) -> bytes:
        while True:
            tid = self.core.rng.getrandbits(128).to_bytes(16, "big")
            if any(tid) and tid not in self.image.topics_by_id:
                return tid

    def create_topics(
        self, requests: list[Body], validate_only: bool = False
    ) -> list[CreateTopicResult]:
        """CreateTopics: one result per request, in order. See the module docstring."""
        self._check_active()
        names = [r.get("name") for r in requests]
        results: list[CreateTopicResult] = []
        records: list[MetadataRecord] = []
        brokers = {b: self.image.brokers[b].rack for b in self.cluster.live()}
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
                _check_request_size(len(records) + len(recs), f"topic {name!r}")
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

    def _topic_records(
        self, req: Body, brokers: dict[int, str | None]
    ) -> tuple[list[MetadataRecord], int, int]:
        name: Any = req.get("name")
        check_topic_name(name)
        if name in self.image.topics:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        nparts = req.get("num_partitions", -1)
        rf = req.get("replication_factor", -1)
        assignments = req.get("assignments") or []
        configs = {c["name"]: c.get("value") for c in (req.get("configs") or [])}
        self.configs.check_new_topic_configs(configs)
        if assignments:
            if nparts != -1 or rf != -1:
                raise InvalidRequestError(
                    "num_partitions and replication_factor must be -1 with manual assignments"
                )
            by_p = {a["partition"]: list(a["broker_ids"]) for a in assignments}
            if len(by_p) != len(assignments) or sorted(by_p) != list(range(len(by_p))):
                raise InvalidReplicaAssignmentError("partitions must be numbered 0..n-1, each once")
            if len(by_p) > self.settings.max_partitions_per_request:
                raise InvalidPartitionsError(
                    f"{len(by_p)} partitions: more than"
                    f" {self.settings.max_partitions_per_request} in one request"
                )
            placement = check_assignment(self.image, by_p)
            check_assigned_capacity(placement, self.cluster.cannot_create())
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
                    f"{nparts} partitions: more than {self.settings.max_partitions_per_request}"
                    " in one request (create fewer, then add the rest with CreatePartitions)"
                )
            placement = self._place(nparts, rf, brokers)
        tid = self._new_topic_id()
        recs: list[MetadataRecord] = [Topic(name, tid)]
        for p in range(nparts):
            replicas = tuple(placement[p])
            isr = tuple(b for b in replicas if b in brokers) or replicas
            leader = isr[0] if isr[0] in brokers else NO_LEADER
            recs.append(Partition(tid, p, replicas, isr, leader, 0, 0))
        recs.extend(
            Config(RESOURCE_TOPIC, name, k, v) for k, v in sorted(configs.items()) if v is not None
        )
        return recs, nparts, rf

    def _place(
        self, nparts: int, rf: int, live: dict[int, str | None], start_partition: int = 0
    ) -> dict[int, list[int]]:
        """Automatic placement over the `live` brokers (id -> rack) that can take new replicas
        (a broker out of file descriptors says it cannot in its heartbeats)."""
        cannot = self.cluster.cannot_create()
        usable = {b: r for b, r in live.items() if b not in cannot}
        check_capacity(rf, len(usable), cannot)
        return assign_replicas(nparts, rf, usable, self.core.rng, start_partition=start_partition)

    def delete_topics(self, names: list[str]) -> list[TopicResult]:
        """DeleteTopics: [{name, error_code, error_message}] in request order."""
        self._check_active()
        results: list[TopicResult] = []
        records: list[RemoveTopic] = []
        seen: set[str] = set()
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

    def create_partitions(
        self, topics: list[Body], validate_only: bool = False
    ) -> list[TopicResult]:
        """CreatePartitions: topics [{name, count, assignments: [[broker ids]] | None}] →
        [{name, error_code, error_message}]."""
        self._check_active()
        results: list[TopicResult] = []
        records: list[MetadataRecord] = []
        brokers = {b: self.image.brokers[b].rack for b in self.cluster.live()}
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
                rf = len(t.partitions[0].target_replicas)  # (not a move's union)
                assignments = req.get("assignments")
                if assignments is not None:  # [] is a list of the wrong length, not "none"
                    if len(assignments) != count - cur:
                        raise InvalidReplicaAssignmentError(f"expected {count - cur} assignments")
                    by_p = {cur + i: list(a) for i, a in enumerate(assignments)}
                    check_assignment(self.image, by_p)
                    check_assigned_capacity(by_p, self.cluster.cannot_create())
                    if any(len(v) != rf for v in by_p.values()):
                        raise InvalidReplicaAssignmentError(f"replication factor must stay {rf}")
                    placement = by_p
                else:
                    placement = self._place(count - cur, rf, brokers, start_partition=cur)
                _check_request_size(len(records) + count - cur, f"topic {name!r}")
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

    def elect_preferred_leaders(
        self, partitions: list[tuple[str, int]] | None = None
    ) -> list[ElectionResult]:
        """ElectLeaders (preferred): [{topic, partition, error_code, error_message}] for the
        requested partitions (all when None: only the ones that moved are reported)."""
        return self.elect_leaders(ELECTION_PREFERRED, partitions)

    def elect_leaders(
        self, election_type: int, partitions: list[tuple[str, int]] | None = None
    ) -> list[ElectionResult]:
        """ElectLeaders: [{topic, partition, error_code, error_message}] for the requested
        partitions (all when None: only the ones elected are reported). Preferred: the first
        replica leads where it is live and in the ISR. Unclean: an offline partition gets a
        live replica as leader with ISR = [it]."""
        self._check_active()
        if election_type not in (ELECTION_PREFERRED, ELECTION_UNCLEAN):
            raise InvalidRequestError(f"unknown election type {election_type} (0 or 1)")
        live = self.cluster.live()
        only = None if partitions is None else set(partitions)
        if election_type == ELECTION_PREFERRED:
            changes = preferred_leader_changes(self.image, live, only)
        else:
            changes = unclean_leader_changes(self.image, live, only)
        elected = {(self.image.topics_by_id[c.topic_id].name, c.partition) for c in changes}
        if election_type == ELECTION_PREFERRED:
            again = lambda: preferred_leader_changes(self.image, self.cluster.live(), only)  # noqa: E731
        else:
            again = lambda: unclean_leader_changes(self.image, self.cluster.live(), only)  # noqa: E731
        self._write_bulk(("elect", election_type), again, first=changes)
        results: list[ElectionResult] = []
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

    def alter_partition(
        self, broker_id: int, broker_epoch: int, topics: list[Body]
    ) -> AlterPartitionResult:
        """AlterPartition: topics [{name, partitions: [{partition, leader_epoch, new_isr,
        partition_epoch}]}] → {error_code, topics: [{name, partitions: [{partition, error_code,
        leader_id, leader_epoch, isr, partition_epoch}]}]}."""
        self._check_active()
        b = self.image.brokers.get(broker_id)
        if b is None or b.broker_epoch != broker_epoch:
            return {"error_code": int(ErrorCode.STALE_BROKER_EPOCH), "topics": []}
        eligible = self.cluster.live()  # (not fenced, nor being fenced or shutting down)
        out_topics: list[AlterPartitionTopicResult] = []
        records: list[Any] = []
        pending: list[tuple[str, int, AlterPartitionPartitionResult]] = []
        seen: set[tuple[str, int]] = set()
        for treq in topics:
            name: Any = treq.get("name")
            t = self.image.topics.get(name)
            parts_out: list[AlterPartitionPartitionResult] = []
            for preq in treq.get("partitions", []):
                p = preq["partition"]
                reg = t.partitions.get(p) if t is not None else None
                res: AlterPartitionPartitionResult = {
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
                code, new_isr = check_isr_change(reg, broker_id, preq, eligible)
                res["error_code"] = int(code)
                if new_isr is not None:
                    # completes a reassignment when it brings the last target replica in
                    ch = reassignment.isr_change(t.topic_id, p, reg, new_isr, eligible)
                    if ch is not None:
                        records.append(ch)
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
                res["leader_id"] = reg.leader
                res["leader_epoch"] = reg.leader_epoch
                res["isr"] = list(reg.isr)
                res["partition_epoch"] = reg.partition_epoch
        return {"error_code": 0, "topics": out_topics}
