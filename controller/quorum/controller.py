"""QuorumController: the active controller's logic (topics, brokers, ISR, leader election).

It turns requests into metadata records, writes them to a `MetadataLog`, and replays them onto
its own `MetadataImage` (`self.image`: everything it has written, committed or not). A caller that
must answer only once the records are committed waits until
`metadata_log.committed_offset() >= controller.last_written_offset` (ControllerThread does).

Threading: NOT thread-safe. Exactly one thread calls it — in a combined process the controller
thread (`ControllerThread`, runner.py), which owns its own event loop; other threads submit calls
there and get concurrent.futures.Future results. Time comes from the injected `clock` (ms), ids
from the injected `rng`, so tests drive it with a fake clock.

Request/response shapes follow the wire bodies in CONTRACTS.md (CreateTopics, DeleteTopics,
CreatePartitions, BrokerRegistration, BrokerHeartbeat, AlterPartition); see docs/metadata.md.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from client.errors import (
    BrokerResponseError,
    ErrorCode,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidRequestError,
    NotControllerError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from controller.metadata.delta import MetadataDelta
from controller.metadata.image import MetadataImage
from controller.metadata.placement import assign_replicas
from controller.metadata.records import (
    NO_LEADER,
    RESOURCE_TOPIC,
    Config,
    FenceBroker,
    NoOp,
    Partition,
    PartitionChange,
    ProducerIds,
    RegisterBroker,
    RemoveTopic,
    Topic,
    UnfenceBroker,
    decode_record,
    encode_record,
)
from controller.metadata.snapshot import load_snapshot
from controller.quorum.log import MetadataLog
from controller.quorum.replication import (
    check_isr_change,
    elect_offline_changes,
    preferred_leader_changes,
    remove_broker_changes,
)
from controller.quorum.topic_configs import validate_topic_config
from controller.quorum.validation import (
    InvalidReplicaAssignmentError,
    check_assignment,
    check_topic_name,
    config_change_records,
)

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ControllerSettings:
    """The config values the controller reads (from a Config object's snake_case attributes)."""

    node_id: int = 1
    broker_session_timeout_ms: int = 9000
    num_partitions: int = 1
    default_replication_factor: int = 1
    unclean_leader_election_enable: bool = False
    producer_id_block_size: int = 1000
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_ms: int = 300_000
    max_partitions_per_request: int = 100_000

    @classmethod
    def from_config(cls, config: Any) -> ControllerSettings:
        if config is None:
            return cls()
        if isinstance(config, ControllerSettings):
            return config
        kw = {}
        for name in cls.__dataclass_fields__:
            v = getattr(config, name, None)
            if v is not None:
                kw[name] = v
        return cls(**kw)


def _topic_error(name: str, code: ErrorCode, msg: str | None = None) -> dict:
    return {
        "name": name,
        "error_code": int(code),
        "error_message": msg,
        "num_partitions": -1,
        "replication_factor": -1,
    }


class QuorumController:
    def __init__(
        self,
        metadata_log: MetadataLog,
        config: Any = None,
        clock: Callable[[], float] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.log = metadata_log
        self.settings = ControllerSettings.from_config(config)
        self.clock = clock or (lambda: time.monotonic() * 1000.0)
        self.rng = rng or random.Random(1)
        self.image = MetadataImage.EMPTY
        self.last_written_offset = -1
        self._last_heartbeat_ms: dict[int, float] = {}
        self._registered_at: dict[int, int] = {}  # broker id -> offset of its registration
        self._shutting_down: set[int] = set()
        self._next_rebalance_ms = self.clock() + self.settings.leader_imbalance_check_interval_ms
        self.load()

    # -- state ---------------------------------------------------------------------------------
    def load(self, image: MetadataImage | None = None) -> None:
        """(Re)build self.image from the committed log — on start and on becoming active — or
        take `image` when the caller already holds the committed image (MetadataLoader)."""
        if image is None:
            snap = self.log.latest_snapshot()
            image = load_snapshot(snap[1]) if snap else MetadataImage.EMPTY
            delta = MetadataDelta(image)
            offset = image.offset + 1
            while True:
                batch = self.log.read(offset)
                if not batch:
                    break
                for off, data in batch:
                    delta.replay(decode_record(data), off)
                offset = batch[-1][0] + 1
            image = delta.apply()
        self.image = image
        self.last_written_offset = self.image.offset
        now = self.clock()
        self._last_heartbeat_ms = {b: now for b in self.image.brokers}
        self._registered_at = {b: self.image.offset for b in self.image.brokers}
        self._shutting_down.clear()
        _log.info(
            "[controller=%d] loaded metadata through offset %d: %d brokers, %d topics",
            self.settings.node_id,
            self.image.offset,
            len(self.image.brokers),
            len(self.image.topics),
        )

    def _write(self, records: list[Any]) -> int:
        """Append records and replay them onto self.image; returns the last offset."""
        if not records:
            return self.last_written_offset
        if not self.log.is_leader():
            raise NotControllerError("this controller is not the active controller")
        last = self.log.append([encode_record(r) for r in records])
        delta = MetadataDelta(self.image)
        first = last - len(records) + 1
        for i, rec in enumerate(records):
            delta.replay(rec, first + i)
        self.image = delta.apply()
        self.last_written_offset = last
        return last

    def _check_active(self) -> None:
        if not self.log.is_leader():
            raise NotControllerError(
                f"controller {self.settings.node_id} is not the active controller"
            )

    def _live(self) -> set[int]:
        return {b for b in self.image.live_brokers() if b not in self._shutting_down}

    def _unclean_for(self, topic: str) -> bool:
        v = self.image.topic_config(topic).get("unclean.leader.election.enable")
        return self.settings.unclean_leader_election_enable if v is None else v == "true"

    def write_noop(self) -> int:
        """Commit a NoOp (a new active controller's first write)."""
        return self._write([NoOp()])

    # -- topics --------------------------------------------------------------------------------
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
            name = req.get("name")
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
        name = req.get("name")
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
            name = req.get("name")
            try:
                t = self.image.topics.get(name)
                if t is None:
                    raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
                cur = len(t.partitions)
                count = req.get("count", -1)
                if count <= cur:
                    raise InvalidPartitionsError(f"topic has {cur} partitions; asked for {count}")
                rf = len(t.partitions[0].replicas)
                assignments = req.get("assignments")
                if assignments:
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

    # -- brokers -------------------------------------------------------------------------------
    def register_broker(
        self,
        broker_id: int,
        host: str,
        port: int,
        rack: str | None = None,
        incarnation_id: str = "",
    ) -> dict:
        """BrokerRegistration → {error_code, broker_epoch}. The broker starts fenced."""
        self._check_active()
        now = self.clock()
        old = self.image.brokers.get(broker_id)
        if (
            old is not None
            and not old.fenced
            and old.incarnation_id != incarnation_id
            and now - self._last_heartbeat_ms.get(broker_id, 0)
            < self.settings.broker_session_timeout_ms
        ):
            return {"error_code": int(ErrorCode.DUPLICATE_BROKER_REGISTRATION), "broker_epoch": -1}
        epoch = self.last_written_offset + 1
        records: list[Any] = []
        self._shutting_down.discard(broker_id)
        if old is not None:
            # A restarted broker leaves every ISR and leadership until it has caught up again.
            records += remove_broker_changes(
                self.image, broker_id, self._live() - {broker_id}, self._unclean_for
            )
        records.append(RegisterBroker(broker_id, epoch, host, port, rack, incarnation_id, True))
        last = self._write(records)
        self._last_heartbeat_ms[broker_id] = now
        self._registered_at[broker_id] = last
        _log.info(
            "[controller=%d] registered broker %d epoch %d at %s:%d rack=%s",
            self.settings.node_id,
            broker_id,
            epoch,
            host,
            port,
            rack,
        )
        return {"error_code": 0, "broker_epoch": epoch}

    def _fence(self, broker_id: int, reason: str) -> None:
        b = self.image.brokers[broker_id]
        records: list[Any] = remove_broker_changes(
            self.image, broker_id, self._live() - {broker_id}, self._unclean_for
        )
        if not b.fenced:
            records.append(FenceBroker(broker_id, b.broker_epoch))
        self._write(records)
        _log.info(
            "[controller=%d] fenced broker %d (%s); %d partition changes",
            self.settings.node_id,
            broker_id,
            reason,
            len(records) - 1,
        )

    def broker_heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        want_fence: bool = False,
        want_shutdown: bool = False,
    ) -> dict:
        """BrokerHeartbeat → {error_code, is_caught_up, is_fenced, should_shut_down}."""
        self._check_active()
        b = self.image.brokers.get(broker_id)
        resp = {
            "error_code": 0,
            "is_caught_up": False,
            "is_fenced": True,
            "should_shut_down": False,
        }
        if b is None:
            resp["error_code"] = int(ErrorCode.BROKER_ID_NOT_REGISTERED)
            return resp
        if b.broker_epoch != broker_epoch:
            resp["error_code"] = int(ErrorCode.STALE_BROKER_EPOCH)
            return resp
        self._last_heartbeat_ms[broker_id] = self.clock()
        caught_up = current_metadata_offset >= self._registered_at.get(broker_id, self.image.offset)
        resp["is_caught_up"] = caught_up
        if want_shutdown:
            if broker_id not in self._shutting_down:
                self._shutting_down.add(broker_id)
                changes = remove_broker_changes(
                    self.image, broker_id, self._live(), self._unclean_for
                )
                self._write(changes)
                _log.info(
                    "[controller=%d] controlled shutdown of broker %d: %d partition changes",
                    self.settings.node_id,
                    broker_id,
                    len(changes),
                )
            done = not self.image.partitions_led_by(broker_id)
            if done and not self.image.brokers[broker_id].fenced:
                self._fence(broker_id, "controlled shutdown")
            resp["should_shut_down"] = done
        elif want_fence:
            if not b.fenced:
                self._fence(broker_id, "requested by the broker")
        elif b.fenced and caught_up:
            self._shutting_down.discard(broker_id)
            records: list[Any] = [UnfenceBroker(broker_id, broker_epoch)]
            delta = MetadataDelta(self.image)
            delta.replay(records[0], self.image.offset + 1)
            records += elect_offline_changes(
                delta.apply(), self._live() | {broker_id}, self._unclean_for
            )
            self._write(records)
            _log.info(
                "[controller=%d] unfenced broker %d; %d partitions elected",
                self.settings.node_id,
                broker_id,
                len(records) - 1,
            )
        resp["is_fenced"] = self.image.brokers[broker_id].fenced
        return resp

    def check_sessions(self) -> list[int]:
        """Fence brokers whose session expired; returns their ids. Call periodically."""
        now = self.clock()
        timeout = self.settings.broker_session_timeout_ms
        expired = [
            b.broker_id
            for b in self.image.brokers.values()
            if not b.fenced and now - self._last_heartbeat_ms.get(b.broker_id, now) >= timeout
        ]
        for bid in expired:
            self._fence(bid, f"no heartbeat for {timeout} ms")
        return expired

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> dict:
        """AllocateProducerIds → {error_code, producer_id_start, producer_id_len}."""
        self._check_active()
        b = self.image.brokers.get(broker_id)
        if b is None or b.broker_epoch != broker_epoch:
            return {
                "error_code": int(ErrorCode.STALE_BROKER_EPOCH),
                "producer_id_start": -1,
                "producer_id_len": 0,
            }
        start = self.image.next_producer_id
        size = self.settings.producer_id_block_size
        self._write([ProducerIds(broker_id, broker_epoch, start + size)])
        return {"error_code": 0, "producer_id_start": start, "producer_id_len": size}

    def tick(self) -> None:
        """Periodic work (ControllerThread calls it): session expiry, and preferred-leader
        rebalancing every leader.imbalance.check.interval.ms when enabled."""
        self.check_sessions()
        now = self.clock()
        if self.settings.auto_leader_rebalance_enable and now >= self._next_rebalance_ms:
            self._next_rebalance_ms = now + self.settings.leader_imbalance_check_interval_ms
            self.elect_preferred_leaders()

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

    # -- ISR -----------------------------------------------------------------------------------
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
            name = treq.get("name")
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
                res.update(
                    leader_id=reg.leader,
                    leader_epoch=reg.leader_epoch,
                    isr=list(reg.isr),
                    partition_epoch=reg.partition_epoch,
                )
        return {"error_code": 0, "topics": out_topics}
