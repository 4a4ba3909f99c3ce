"""ControllerProcess: one voter of the Raft metadata quorum, as run by `gregor controller`.

Wiring (all on the ControllerThread's event loop): RaftStorage + RaftNode inside a
RaftMetadataLog, a QuorumController over it, a PeerTransport to the other voters, and a
ControllerServer on this voter's address from `controller.quorum.voters`. When this node becomes
the active controller the QuorumController reloads its image from the committed log; when it
loses leadership, calls waiting for a commit fail with NOT_CONTROLLER.

Config (snake_case attributes): node_id, controller_quorum_voters, metadata_log_dir,
controller_quorum_election_timeout_ms (ticks of 50 ms),
metadata_log_max_records_between_snapshots (a MetadataLoader follows the committed log and
compacts the Raft log into a metadata snapshot after that many records, serialized off the loop
by a BackgroundSnapshotter; 0 = never),
broker_session_timeout_ms, plus the QuorumController's keys. `start()` / `stop()` from any thread;
`stop()` on the leader first transfers leadership to the most caught-up voter (controlled
shutdown), waiting at most two election timeouts.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import msgpack

from client.config.loader import Config
from client.errors import (
    ConfigError,
    ErrorCode,
    InconsistentClusterIdError,
    OffsetOutOfRangeError,
)
from client.fsutil import DirectoryLock, make_dirs
from client.protocol.api_keys import ApiKey
from client.protocol.apis.admin import group_election_results
from client.protocol.apis.reassignments import flatten_topic_partitions
from client.protocol.body import Body
from client.protocol.schema import API_SPECS
from client.security.tls import ReloadableContext
from controller.metadata.delta import MetadataDelta
from controller.metadata.image import MetadataImage
from controller.metrics import (
    MetricsServer,
    QuorumCollector,
    QuorumMetrics,
    new_registry,
    quorum_ready,
)
from controller.quorum.cluster_id import LocalClusterId
from controller.quorum.combined import describe_quorum_body
from controller.quorum.controller import QuorumController
from controller.quorum.loader import MetadataLoader
from controller.quorum.membership_service import MembershipService
from controller.quorum.network import ControllerServer, PeerTransport
from controller.quorum.raft_log import RaftMetadataLog
from controller.quorum.runner import ControllerCall, ControllerThread
from controller.quorum.snapshotter import BackgroundSnapshotter
from controller.quorum.voter_settings import VoterSettings
from controller.raft.state import Role
from controller.results import (
    AlterPartitionResult,
    BrokerHeartbeatResult,
    BrokerRegistrationResult,
    DescribeQuorumResult,
    ProducerIdsResult,
    QuorumReplica,
)

_log = logging.getLogger(__name__)

T = TypeVar("T")

TICK_MS = 50
MAX_FETCH_WAIT_MS = 10_000
MAX_OBSERVERS = 1024  # fetching observers remembered for DescribeQuorum (oldest dropped)


class ControllerProcess:
    def __init__(
        self, config: Config, on_fatal: Callable[[BaseException], None] | None = None
    ) -> None:
        """`on_fatal(exc)` is called (on the controller thread) when the Raft storage fails; the
        voter has stopped taking part and the owner should exit."""
        self.settings = VoterSettings.from_config(config)
        self.on_fatal = on_fatal
        self.node_id = self.settings.node_id
        self.voters = self.settings.voters
        self.host, self.port = self.settings.address
        self.data_dir = self.settings.metadata_log_dir
        # this voter's own cluster id (cluster.id, or <metadata.log.dir>/cluster.id);
        # InconsistentClusterIdError when the two differ
        self.own_cluster_id = LocalClusterId(self.data_dir, self.settings.cluster_id)
        self._foreign_ids: set[str] = set()  # ids of refused Raft messages (logged once each)
        self._election_ticks = max(2, self.settings.election_timeout_ms // TICK_MS)
        self._snapshot_every = self.settings.max_records_between_snapshots
        self.log: RaftMetadataLog | None = None
        self.controller: QuorumController | None = None
        self.runner: ControllerThread | None = None
        self.transport: PeerTransport | None = None
        self.server: ControllerServer | None = None
        self.loader: MetadataLoader | None = None
        self.membership: MembershipService | None = None
        self.snapshotter: BackgroundSnapshotter | None = None
        self._dir_lock: DirectoryLock | None = None
        self._metrics_address = self.settings.metrics_address
        self.metrics: MetricsServer | None = None  # while metrics.listener is set
        # TLS on the controllers' listener (controller.listener.names mapped to SSL): the
        # context served and the one used to reach the other voters (ConfigError: bad files)
        self.tls_server: ReloadableContext | None = None
        self.tls_client: ReloadableContext | None = None
        if self.settings.tls is not None:
            self.tls_server = ReloadableContext(self.settings.tls, server=True)
            self.tls_client = ReloadableContext(self.settings.tls, server=False)
        # replica id -> (next offset it asked for, time.monotonic() of the fetch); loop thread
        self._observers: dict[int, tuple[int, float]] = {}

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> tuple[str, int]:
        make_dirs(self.data_dir)
        self._dir_lock = DirectoryLock(self.data_dir)  # DirectoryInUseError: held elsewhere
        holder: dict[str, PeerTransport] = {}
        self.log = RaftMetadataLog(
            self.node_id,
            sorted(self.voters),
            str(Path(self.data_dir) / "raft"),
            send=lambda to, m: holder["t"].send(to, m),
            tick_ms=TICK_MS,
            election_timeout_ticks=self._election_ticks,
            rng=random.Random(),
            on_fatal=self.on_fatal,
            endpoints={i: f"{h}:{p}" for i, (h, p) in self.voters.items()},
        )
        try:
            self.own_cluster_id.check(
                self.log.cluster_id_on_disk(), role=f"controller {self.node_id}"
            )
        except InconsistentClusterIdError:
            self.log.close()
            self._dir_lock.release()
            self._dir_lock = None
            raise
        self.controller = QuorumController(
            self.log,
            self.settings.controller,
            rng=random.Random(),
            cluster_id=self.own_cluster_id.value,
        )
        self.runner = ControllerThread(self.controller, name=f"controller-{self.node_id}")
        self.runner.start()
        loop = self.runner.loop
        log = self.log
        self.membership = MembershipService(
            log, self.voters, lambda peers: holder["t"].set_peers(peers)
        )
        self.transport = holder["t"] = PeerTransport(
            self.node_id,
            self.membership.peers(),
            loop,
            cluster_id=self.cluster_id,
            tls=self.tls_client,
        )
        log.on_membership.append(self.membership.on_membership)
        self.snapshotter = BackgroundSnapshotter(self.log, loop)
        self.loader = MetadataLoader(
            self.log, snapshot_every_records=self._snapshot_every, snapshot_writer=self.snapshotter
        )
        controller, loader = self.controller, self.loader
        loader.subscribe(self._on_image)
        self.log.on_activate.append(lambda: controller.load(loader.image))
        self.log.on_deactivate.append(self.runner.fail_waiting)
        self.server = ControllerServer(
            self.host,
            self.port,
            self._handlers(),
            self.node_id,
            self._leader_hint,
            tls=self.tls_server,
        )

        async def setup() -> tuple[str, int]:
            assert self.log is not None and self.transport is not None and self.server is not None
            self._committed = asyncio.Event()
            self.log.add_listener(self._on_commit)
            loader.start()
            addr = await self.server.start()
            self.transport.start()
            self.log.start(loop)
            return addr

        address = asyncio.run_coroutine_threadsafe(setup(), loop).result(10)
        if self._metrics_address is not None:  # (OSError, e.g. the port in use: the caller stops)
            self._start_metrics(self.log, loader)
        return address

    def _start_metrics(self, log: RaftMetadataLog, loader: MetadataLoader) -> None:
        """/metrics and the health checks on metrics.listener (controller/metrics.py)."""
        assert self._metrics_address is not None
        registry = new_registry()
        registry.register(QuorumCollector(log, lambda: loader.image))
        QuorumMetrics(registry, log)
        self.metrics = MetricsServer(
            registry,
            self._metrics_address,
            lambda: quorum_ready(log, lambda: loader.image),
            name=f"controller-{self.node_id}-metrics",
        )
        self.metrics.start()

    def reload_tls(self) -> bool:
        """Re-read the TLS files (SIGHUP; any thread); a failure keeps the previous context,
        is logged and returns False."""
        ok = True
        for ctx in (self.tls_server, self.tls_client):
            if ctx is None:
                continue
            try:
                ctx.reload()
            except ConfigError as exc:
                _log.error("TLS reload failed, keeping the previous certificates: %s", exc)
                ok = False
        return ok

    def stop(self) -> None:
        if self.metrics is not None:
            self.metrics.stop()
            self.metrics = None
        if self.runner is None:
            return
        loop = self.runner.loop

        async def teardown() -> None:
            assert self.server is not None and self.transport is not None and self.log is not None
            await self._hand_over_leadership()
            await self.server.stop()
            await self.transport.stop()
            self.log.close()

        try:
            asyncio.run_coroutine_threadsafe(teardown(), loop).result(10)
        except (concurrent.futures.TimeoutError, RuntimeError):
            _log.exception("[controller=%d] teardown failed", self.node_id)
        self.runner.stop()
        self.runner = None
        if self.snapshotter is not None:
            self.snapshotter.close()
        if self._dir_lock is not None:
            self._dir_lock.release()

    async def _hand_over_leadership(self) -> None:
        """A leader stopping cleanly transfers leadership first, so the quorum has a new leader
        within a round trip instead of after an election timeout. Bounded by two election
        timeouts; a failed transfer just leaves the others to elect."""
        assert self.log is not None
        target = self.log.transfer_leadership()
        if target is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 2 * self._election_ticks * TICK_MS / 1000.0
        while self.log.node.role is Role.LEADER and loop.time() < deadline:
            await asyncio.sleep(TICK_MS / 1000.0 / 5)  # polls the node's role; not a test
        if self.log.node.role is Role.LEADER:
            _log.warning(
                "[controller=%d] leadership transfer to %d timed out", self.node_id, target
            )
        else:
            _log.info(
                "[controller=%d] leadership transferred to %d before stopping",
                self.node_id,
                target,
            )

    # -- handlers (on the controller loop) -----------------------------------------------------
    def _handlers(self) -> dict[int, Any]:
        handlers: dict[int, Any] = {
            ApiKey.RAFT_MESSAGE: self._raft_message,
            ApiKey.DESCRIBE_QUORUM: self._describe_quorum,
            ApiKey.METADATA_FETCH: self._metadata_fetch,
            ApiKey.BROKER_REGISTRATION: self._broker_registration,
            ApiKey.BROKER_HEARTBEAT: self._broker_heartbeat,
            ApiKey.ALTER_PARTITION: self._alter_partition,
            ApiKey.ALLOCATE_PRODUCER_IDS: self._allocate_producer_ids,
        }
        assert self.membership is not None
        handlers[ApiKey.ADD_RAFT_VOTER] = self.membership.add_raft_voter
        handlers[ApiKey.REMOVE_RAFT_VOTER] = self.membership.remove_raft_voter
        # Admin APIs forwarded by brokers; served once their schemas (H-client) are registered.
        optional = {
            ApiKey.CREATE_TOPICS: self._create_topics,
            ApiKey.DELETE_TOPICS: self._delete_topics,
            ApiKey.CREATE_PARTITIONS: self._create_partitions,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self._incremental_alter_configs,
            ApiKey.ALTER_CONFIGS: self._alter_configs,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: self._alter_user_scram_credentials,
            ApiKey.ALTER_CLIENT_QUOTAS: self._alter_client_quotas,
            ApiKey.CREATE_ACLS: self._create_acls,
            ApiKey.DELETE_ACLS: self._delete_acls,
            ApiKey.ELECT_LEADERS: self._elect_leaders,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: self._alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: self._list_partition_reassignments,
        }
        handlers.update({k: v for k, v in optional.items() if k in API_SPECS})
        return handlers

    def cluster_id(self) -> str | None:
        """The cluster id this voter knows: the committed log's, else its own (None: neither)."""
        image = self.loader.image if self.loader is not None else None
        cid = image.cluster_id if image is not None else None
        return cid or self.own_cluster_id.value

    def _on_image(self, image: MetadataImage, _delta: MetadataDelta | None) -> None:
        """Loader subscriber (controller loop): once the log's ClusterId record is committed,
        keep it in the data dir, or stop when this voter's own id differs (fatal)."""
        cid = image.cluster_id
        if cid is None or self.own_cluster_id.stored == cid:
            return
        try:
            if self.own_cluster_id.store(cid):
                _log.info(
                    "[controller=%d] cluster id %s stored in %s",
                    self.node_id,
                    cid,
                    self.own_cluster_id.path,
                )
        except InconsistentClusterIdError as exc:
            self._fatal(exc)
        except OSError as exc:
            _log.error(
                "[controller=%d] cannot store the cluster id in %s: %s",
                self.node_id,
                self.own_cluster_id.path,
                exc,
            )

    def _fatal(self, exc: BaseException) -> None:
        """Stop taking part (close the Raft log) and tell the owner, which exits non-zero."""
        _log.critical("[controller=%d] %s", self.node_id, exc)
        if self.log is not None and self.runner is not None:
            self.runner.loop.call_soon(self.log.close)  # (not inside the Raft driver's drain)
        if self.on_fatal is not None:
            self.on_fatal(exc)

    def _raft_message(self, body: Body) -> Body:
        assert self.log is not None
        theirs, ours = body.get("cluster_id"), self.cluster_id()
        if theirs is not None and ours is not None and theirs != ours:
            # a voter of another cluster (Kafka's Raft requests carry cluster_id likewise)
            if theirs not in self._foreign_ids and len(self._foreign_ids) < 16:
                self._foreign_ids.add(theirs)
                _log.error(
                    "[controller=%d] refusing raft messages of cluster %r: this quorum's cluster"
                    " id is %r (INCONSISTENT_CLUSTER_ID)",
                    self.node_id,
                    theirs,
                    ours,
                )
            return {"error_code": int(ErrorCode.INCONSISTENT_CLUSTER_ID)}
        try:
            msg = msgpack.unpackb(body["payload"], raw=False, strict_map_key=False)
            if not isinstance(msg, dict):
                raise ValueError("raft payload is not a map")
            self.log.receive(msg)
        except ValueError as e:
            _log.warning("[controller=%d] bad raft message: %s", self.node_id, e)
            return {"error_code": int(ErrorCode.INVALID_REQUEST)}
        return {"error_code": 0}

    def _leader_endpoint(self) -> str | None:
        assert self.log is not None and self.membership is not None
        lid = self.log.node.leader_id
        return None if lid is None else self.membership.endpoint_of(lid)

    def _leader_hint(self) -> tuple[int, str | None]:
        """(leader id or -1, its "host:port") for NOT_CONTROLLER answers."""
        assert self.log is not None
        lid = self.log.node.leader_id
        return (-1 if lid is None else lid), self._leader_endpoint()

    def _describe_quorum(self, body: Body) -> DescribeQuorumResult:
        assert self.log is not None
        now = time.monotonic()
        brokers: list[QuorumReplica] = [
            {"replica_id": rid, "log_end_offset": offset, "last_contact_ms": int((now - at) * 1000)}
            for rid, (offset, at) in sorted(self._observers.items())
        ]
        return describe_quorum_body(self.log, self._leader_endpoint(), brokers)

    def _on_commit(self, _records: list[tuple[int, bytes]]) -> None:
        # On the controller loop (RaftMetadataLog notifies there): wake parked MetadataFetches.
        self._committed.set()
        self._committed = asyncio.Event()

    async def _metadata_fetch(self, body: Body) -> Body:
        assert self.log is not None
        self._note_observer(body)
        resp = self._metadata_fetch_now(body)
        wait_s = min(body.get("max_wait_ms", 0), MAX_FETCH_WAIT_MS) / 1000.0
        if resp["error_code"] == 0 and not resp["records"] and wait_s > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._committed.wait(), wait_s)
            resp = self._metadata_fetch_now(body)
        return resp

    def _note_observer(self, body: Body) -> None:
        """Remember a broker's fetch position (its log end offset) for DescribeQuorum."""
        rid = body.get("replica_id", -1)
        if rid is None or rid < 0:
            return
        self._observers.pop(rid, None)  # re-insert: dict order = least recently fetched first
        self._observers[rid] = (body["from_offset"], time.monotonic())
        while len(self._observers) > MAX_OBSERVERS:
            del self._observers[next(iter(self._observers))]

    def _metadata_fetch_now(self, body: Body) -> Body:
        assert self.log is not None
        leader = self.log.node.leader_id
        resp: dict[str, Any] = {
            "error_code": 0,
            "leader_id": -1 if leader is None else leader,
            "leader_endpoint": self._leader_endpoint(),
            "high_watermark": self.log.committed_offset() + 1,
            "records": [],
            "snapshot_offset": -1,
            "snapshot": None,
        }
        try:
            recs = self.log.read(body["from_offset"], body["max_records"])
        except OffsetOutOfRangeError:
            resp["error_code"] = int(ErrorCode.OFFSET_OUT_OF_RANGE)
            snap = self.log.latest_snapshot()
            if snap is not None and body["include_snapshot"]:
                resp["snapshot_offset"], resp["snapshot"] = snap
            return resp
        resp["records"] = [{"offset": o, "record": d} for o, d in recs]
        return resp

    async def _call(self, call: ControllerCall[T]) -> T:
        """`call(controller)` on the controller thread, once its records are committed."""
        assert self.runner is not None
        return await asyncio.wrap_future(self.runner.submit(call))

    async def _broker_registration(self, b: Body) -> BrokerRegistrationResult:
        endpoints = [(e["name"], e["host"], e["port"]) for e in b.get("endpoints") or ()]
        return await self._call(
            lambda c: c.cluster.register_broker(
                b["broker_id"],
                b["host"],
                b["port"],
                b["rack"],
                b["incarnation_id"],
                endpoints,
                b.get("cluster_id"),
            )
        )

    async def _broker_heartbeat(self, b: Body) -> BrokerHeartbeatResult:
        failed = [(r["topic"], r["partition"]) for r in b.get("failed_replicas", ())]
        return await self._call(
            lambda c: c.cluster.broker_heartbeat(
                b["broker_id"],
                b["broker_epoch"],
                b["current_metadata_offset"],
                b["want_fence"],
                b["want_shutdown"],
                failed,
                b.get("cannot_create_replicas"),
            )
        )

    async def _create_topics(self, b: Body) -> Body:
        validate = b.get("validate_only", False)
        topics = await self._call(lambda c: c.replication.create_topics(b["topics"], validate))
        return {"topics": topics, "throttle_time_ms": 0}

    async def _delete_topics(self, b: Body) -> Body:
        return {
            "responses": await self._call(lambda c: c.replication.delete_topics(b["topic_names"])),
            "throttle_time_ms": 0,
        }

    async def _create_partitions(self, b: Body) -> Body:
        topics = [
            {
                "name": t["name"],
                "count": t["count"],
                "assignments": None
                if t.get("assignments") is None
                else [a["broker_ids"] for a in t["assignments"]],
            }
            for t in b["topics"]
        ]
        validate = b.get("validate_only", False)
        results = await self._call(lambda c: c.replication.create_partitions(topics, validate))
        return {"results": results, "throttle_time_ms": 0}

    async def _incremental_alter_configs(self, b: Body) -> Body:
        validate = b.get("validate_only", False)
        results = await self._call(
            lambda c: c.configs.incremental_alter_configs(b["resources"], validate)
        )
        return {"responses": results, "throttle_time_ms": 0}

    async def _alter_configs(self, b: Body) -> Body:
        validate = b.get("validate_only", False)
        results = await self._call(lambda c: c.configs.alter_configs(b["resources"], validate))
        return {"responses": results, "throttle_time_ms": 0}

    async def _alter_user_scram_credentials(self, b: Body) -> Body:
        results = await self._call(
            lambda c: c.scram.alter_user_scram_credentials(b["deletions"], b["upsertions"])
        )
        return {"results": results, "throttle_time_ms": 0}

    async def _alter_client_quotas(self, b: Body) -> Body:
        results = await self._call(
            lambda c: c.quotas.alter_client_quotas(b["entries"], b["validate_only"])
        )
        return {"entries": results, "throttle_time_ms": 0}

    async def _create_acls(self, b: Body) -> Body:
        results = await self._call(lambda c: c.acls.create_acls(b["creations"]))
        return {"results": results, "throttle_time_ms": 0}

    async def _delete_acls(self, b: Body) -> Body:
        results = await self._call(lambda c: c.acls.delete_acls(b["filters"]))
        return {"filter_results": results, "throttle_time_ms": 0}

    async def _elect_leaders(self, b: Body) -> Body:
        tps = b.get("topic_partitions")
        partitions = (
            None if tps is None else [(t["topic"], p) for t in tps for p in t["partitions"]]
        )
        results = await self._call(
            lambda c: c.replication.elect_leaders(b["election_type"], partitions)
        )
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "replica_election_results": group_election_results(results),
        }

    async def _alter_partition_reassignments(self, b: Body) -> Body:
        results = await self._call(
            lambda c: c.reassignments.alter_partition_reassignments(b["topics"])
        )
        return {"throttle_time_ms": 0, "error_code": 0, "responses": results}

    async def _list_partition_reassignments(self, b: Body) -> Body:
        partitions = flatten_topic_partitions(b.get("topics"))
        topics = await self._call(
            lambda c: c.reassignments.list_partition_reassignments(partitions)
        )
        return {"throttle_time_ms": 0, "error_code": 0, "topics": topics}

    async def _allocate_producer_ids(self, b: Body) -> ProducerIdsResult:
        return await self._call(
            lambda c: c.cluster.allocate_producer_ids(b["broker_id"], b["broker_epoch"])
        )

    async def _alter_partition(self, b: Body) -> AlterPartitionResult:
        return await self._call(
            lambda c: c.replication.alter_partition(b["broker_id"], b["broker_epoch"], b["topics"])
        )
