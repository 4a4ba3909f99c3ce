"""CombinedController: the controller of a combined (`process.roles=broker,controller`) process,
run as a one-voter Raft quorum — the same RaftMetadataLog, QuorumController and MetadataLoader a
`gregor controller` voter runs, with this node as the only voter.

    cc = CombinedController(node_id, metadata_dir, ControllerSettings.from_config(config),
                            snapshot_every_records=10_000)
    cc.loader.subscribe(publisher)     # (image, delta | None) after every commit, in order
    cc.start()                         # loads the log, elects itself, migrates an old log,
                                       # writes the cluster id when the log has none
    cc.channel.create_topics([...]).result()  # the ControllerChannel: Future, resolved on commit
    cc.image                           # latest committed MetadataImage
    cc.stop()

`channel` is an InProcessChannel (controller/quorum/in_process.py), the in-process
ControllerChannel; nothing above the broker's MetadataPublisher seam knows it is local.

Files: the Raft log, hard state and snapshots in `<metadata_dir>/raft/` (RaftStorage, as a
`gregor controller` keeps them in `<metadata.log.dir>/raft/`).

Election: with one voter there is nobody to wait for, so `start()` advances the Raft node's
logical clock until it has elected itself (PreVote and vote are its own), instead of waiting
out a real election timeout; the server is ready as fast as with the old single-file log.

Migration from LocalMetadataLog (Gregor before the one-voter quorum): when `metadata_dir` holds
`metadata.log` or `snapshot-*.bin` of the old single-file log, `start()` loads its image and
writes the image's records (`image_to_records`: brokers, topics, partitions with their leader
and partition epochs, configs, the next producer id) as the fresh quorum's first records. Once
they are committed, the marker file `migrated-to-raft` is written atomically (the commit point
of the migration), then the old files move into `<metadata_dir>/pre-raft-local-log/` (kept,
never read again). Until the marker exists the old files are the source of truth: a start that
finds old files, a Raft dir and no marker (a crash mid-migration, possibly with a torn prefix
of the records on disk) deletes that Raft dir and migrates again. With the marker, leftover
old files are only moved. Offsets restart with the Raft log; nothing on the broker side keeps
metadata offsets across restarts.

Threading: `start()`, `stop()` and the calls from any thread. Everything touching the Raft log
runs on the ControllerThread's event loop (its own thread); subscribers of `loader` run there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import random
import shutil
import threading
from collections.abc import Callable, Iterable
from typing import Any

from client.errors import NotControllerError
from client.fsutil import fsync_dir, make_dirs, write_atomic
from client.protocol.body import Body
from controller.metadata.image import MetadataImage
from controller.metadata.records import encode_record
from controller.metadata.snapshot import image_to_records
from controller.quorum.controller import QuorumController
from controller.quorum.in_process import InProcessChannel
from controller.quorum.loader import MetadataLoader
from controller.quorum.log import LOG_FILE, LocalMetadataLog
from controller.quorum.raft_log import RaftMetadataLog
from controller.quorum.runner import ControllerThread
from controller.quorum.snapshotter import BackgroundSnapshotter
from controller.quorum.state import ControllerSettings
from controller.raft.state import Role
from controller.results import DescribeQuorumResult, QuorumReplica

_log = logging.getLogger(__name__)

RAFT_DIR = "raft"
MIGRATED_DIR = "pre-raft-local-log"
MIGRATION_MARKER = "migrated-to-raft"
TICK_MS = 50
# Election timeout in ticks. Only matters if leadership were ever lost: a lone voter re-elects
# itself after 2-3 ticks (100-150 ms).
ELECTION_TICKS = 2


class OneVoterMetadataLog(RaftMetadataLog):
    """A RaftMetadataLog whose only voter is this node, with `elect_now()`. Loop thread only."""

    def elect_now(self) -> None:
        """Advance logical time until this node leads and has applied its term's NOOP (it is
        the whole quorum, so no message is awaited). Raises NotControllerError otherwise."""
        node = self.node
        for _ in range(4 * node.election_timeout + 4):
            if self.is_leader():
                return
            if node.role is not Role.LEADER:
                node.tick()
            self._drain()
        if not self.is_leader():
            raise NotControllerError(
                f"one-voter quorum did not elect node {self.node_id} ({node.role.value})"
            )


def old_local_log_files(metadata_dir: str) -> list[str]:
    """Names of LocalMetadataLog files in `metadata_dir` (empty: nothing to migrate)."""
    try:
        names = os.listdir(metadata_dir)
    except FileNotFoundError:
        return []
    return sorted(
        n
        for n in names
        if n == LOG_FILE
        or (n.startswith("snapshot-") and n.endswith(".bin"))
        or n.startswith(LOG_FILE + ".")
    )


def describe_quorum_body(
    log: RaftMetadataLog, leader_endpoint: str | None, observers: Iterable[QuorumReplica] = ()
) -> DescribeQuorumResult:
    """DescribeQuorum (55) response from a RaftMetadataLog's node. `leader_endpoint`: the
    current leader's "host:port" (None: unknown); `observers`: replicas the owner tracks
    itself (a voter process lists the brokers fetching from it), appended to the Raft node's
    own observers on the leader. Shared by `gregor controller` (process.py) and the combined
    server. Loop thread only."""
    q = log.node.describe_quorum()

    def replica(r: Any) -> QuorumReplica:
        contact = (
            -1 if r.last_contact_tick is None else (q.now_tick - r.last_contact_tick) * log.tick_ms
        )
        return {
            "replica_id": r.node_id,
            "log_end_offset": r.match_index,
            "last_contact_ms": contact,
        }

    listed = [replica(r) for r in q.observers]
    if q.role is Role.LEADER:
        listed += list(observers)
    return {
        "error_code": 0,
        "node_id": q.node_id,
        "role": q.role.value,
        "leader_id": -1 if q.leader_id is None else q.leader_id,
        "leader_epoch": q.term,
        "high_watermark": q.high_watermark,
        "leader_endpoint": leader_endpoint if q.leader_id is not None else None,
        "voters": [replica(r) for r in q.voters],
        "observers": listed,
    }


class CombinedController:
    def __init__(
        self,
        node_id: int,
        metadata_dir: str,
        settings: ControllerSettings | None = None,
        clock: Callable[[], float] | None = None,
        rng: random.Random | None = None,
        snapshot_every_records: int = 10_000,
        tick_interval_ms: int = 100,
        on_fatal: Callable[[BaseException], None] | None = None,
        cluster_id: str | None = None,
    ) -> None:
        """`cluster_id`: this node's own id (configured, or stored in its data dir), written as
        the quorum's when the log has none yet — a fresh log, or one from before the ClusterId
        record, so an upgraded node keeps its id; None: a new random id then."""
        self.node_id = node_id
        self.metadata_dir = os.path.abspath(metadata_dir)
        make_dirs(self.metadata_dir)
        self._old_files = old_local_log_files(self.metadata_dir)
        marker = os.path.join(self.metadata_dir, MIGRATION_MARKER)
        self._must_migrate = bool(self._old_files) and not os.path.exists(marker)
        raft_dir = os.path.join(self.metadata_dir, RAFT_DIR)
        if self._must_migrate and os.path.exists(raft_dir):
            _log.warning(
                "[controller=%d] %s: an earlier migration of the old metadata log did not "
                "finish; deleting %s and migrating again from %s",
                node_id,
                self.metadata_dir,
                raft_dir,
                ", ".join(self._old_files),
            )
            shutil.rmtree(raft_dir)
        self.log = OneVoterMetadataLog(
            node_id,
            [node_id],
            raft_dir,
            send=self._send,
            tick_ms=TICK_MS,
            election_timeout_ticks=ELECTION_TICKS,
            rng=rng or random.Random(),
            on_fatal=on_fatal,
        )
        self.controller = QuorumController(
            self.log, settings, clock, rng or random.Random(), cluster_id=cluster_id
        )
        self.runner = ControllerThread(
            self.controller, tick_interval_ms=tick_interval_ms, name="controller"
        )
        # the ControllerChannel (controller/channel.py): calls run on the controller thread and
        # complete once the records they wrote are committed
        self.channel = InProcessChannel(self.runner, self.describe_quorum)
        self.snapshotter = BackgroundSnapshotter(self.log, self.runner.loop)
        self.loader = MetadataLoader(
            self.log,
            snapshot_every_records=snapshot_every_records,
            snapshot_writer=self.snapshotter,
        )
        self.log.on_activate.append(lambda: self.controller.load(self.loader.image))
        # This process's broker registered before is this process's earlier (dead) incarnation.
        self.log.on_activate.append(lambda: self.controller.cluster.forget_session(node_id))
        self.log.on_deactivate.append(self.runner.fail_waiting)
        self._lock = threading.Lock()
        self._started = False
        self._stopped = False

    def _send(self, to: int, message: Body) -> None:
        # One voter, no observers: the Raft node never addresses anyone else.
        raise AssertionError(f"one-voter quorum of node {self.node_id} sent to {to}: {message}")

    @property
    def image(self) -> MetadataImage:
        return self.loader.image

    def start(self, timeout: float = 30.0) -> MetadataImage:
        """Start the controller thread, load the committed log (publishing it to the loader's
        subscribers), elect this node, migrate an old LocalMetadataLog. Returns the image."""
        with self._lock:
            if self._started:
                return self.loader.image
            self._started = True
        self.runner.start()
        old_image = self._load_old_log() if self._must_migrate else None

        async def setup() -> None:
            self.loader.start()
            self.log.start(self.runner.loop)
            self.log.elect_now()
            if old_image is not None:
                self._migrate(old_image)
            self.controller.ensure_cluster_id()  # (one voter: committed at once)
            self.controller.scram.write_bootstrap()

        asyncio.run_coroutine_threadsafe(setup(), self.runner.loop).result(timeout)
        if old_image is not None:
            write_atomic(
                os.path.join(self.metadata_dir, MIGRATION_MARKER),
                "metadata migrated from LocalMetadataLog into the one-voter Raft quorum\n",
            )
        if self._old_files:
            self._move_old_files(self._old_files)
        _log.info(
            "[controller=%d] one-voter quorum active in term %d, metadata offset %d (%s)",
            self.node_id,
            self.log.node.term,
            self.loader.image.offset,
            os.path.join(self.metadata_dir, RAFT_DIR),
        )
        return self.loader.image

    def _load_old_log(self) -> MetadataImage:
        old = LocalMetadataLog(self.metadata_dir)
        try:
            loader = MetadataLoader(old)
            image = loader.start()
            loader.stop()
        finally:
            old.close()
        return image

    def _migrate(self, old_image: MetadataImage) -> None:
        """On the loop, once active: write the old image as the fresh log's first records."""
        if self.loader.image.offset >= 0:  # the Raft dir was deleted in __init__
            raise AssertionError(
                f"migrating into a non-empty metadata log (offset {self.loader.image.offset})"
            )
        records = [encode_record(r) for r in image_to_records(old_image)]
        if not records:
            return
        last = self.log.append(records)
        if self.log.committed_offset() < last:
            raise NotControllerError(f"migrated records not committed (offset {last})")
        self.controller.load(self.loader.image)
        self.controller.cluster.forget_session(self.node_id)  # as on activation (see __init__)
        _log.warning(
            "[controller=%d] migrated the local metadata log of %s (offset %d: %d brokers, "
            "%d topics) into the one-voter Raft quorum (%d records)",
            self.node_id,
            self.metadata_dir,
            old_image.offset,
            len(old_image.brokers),
            len(old_image.topics),
            len(records),
        )

    def _move_old_files(self, names: list[str]) -> None:
        dest = os.path.join(self.metadata_dir, MIGRATED_DIR)
        os.makedirs(dest, exist_ok=True)
        for n in names:
            os.replace(os.path.join(self.metadata_dir, n), os.path.join(dest, n))
        for d in (dest, self.metadata_dir):
            fsync_dir(d)
        _log.info("[controller=%d] old metadata log files moved to %s", self.node_id, dest)

    def stop(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            started = self._started
        if started:
            loop = self.runner.loop

            async def teardown() -> None:
                self.loader.stop()
                self.log.close()

            try:
                asyncio.run_coroutine_threadsafe(teardown(), loop).result(10)
            except (concurrent.futures.TimeoutError, RuntimeError):
                _log.exception("[controller=%d] teardown failed", self.node_id)
            self.runner.stop()
        else:
            self.log.close()
        self.snapshotter.close()

    def describe_quorum(
        self, endpoint: str | None = None
    ) -> concurrent.futures.Future[DescribeQuorumResult]:
        """DescribeQuorum's response body (the shape `gregor quorum describe` reads), computed
        on the controller loop; `endpoint` is this node's "host:port" (the leader endpoint)."""
        fut: concurrent.futures.Future[DescribeQuorumResult] = concurrent.futures.Future()

        def compute() -> None:
            try:
                lead = self.log.node.leader_id == self.node_id
                fut.set_result(describe_quorum_body(self.log, endpoint if lead else None))
            except Exception as e:  # handed to the caller
                fut.set_exception(e)

        self.runner.loop.call_soon_threadsafe(compute)
        return fut
