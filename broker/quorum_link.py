"""The broker's link to the controller quorum, chosen by `process.roles`: a ControllerChannel
to send requests through and a metadata source (a MetadataLoader whose subscribers get every
committed image). BrokerNode builds one and never looks inside.

- LocalQuorum (`process.roles: broker,controller`, `gregor server`): the one-voter Raft
  quorum of this process (CombinedController): the channel is the in-process controller and
  the images come from its own Raft log. Its metadata dir is locked by the node.
- RemoteQuorum (`process.roles: broker`, `gregor broker`): RemoteController sends calls to the
  active controller of `controller.quorum.voters`, and an observer (RemoteMetadataLog with
  replica_id = this node, long-polling MetadataFetch) feeds the loader.

Threads: start/stop from the node's control thread; the loader calls its subscribers on its
own thread (the controller loop, or the metadata fetcher).
"""

from __future__ import annotations

from collections.abc import Callable

from client.security.tls import ReloadableContext
from controller.channel import ControllerChannel
from controller.quorum.combined import CombinedController
from controller.quorum.loader import MetadataLoader
from controller.quorum.remote import RemoteController
from controller.quorum.remote_log import RemoteMetadataLog
from controller.quorum.state import ControllerSettings


class LocalQuorum:
    def __init__(
        self,
        node_id: int,
        metadata_dir: str,
        settings: ControllerSettings,
        snapshot_every_records: int,
        on_fatal: Callable[[BaseException], None],
        cluster_id: str | None = None,
    ) -> None:
        """`cluster_id`: the node's own id, the quorum's when its log has none yet."""
        self.node_id = node_id
        self.controller = CombinedController(
            node_id,
            metadata_dir,
            settings,
            snapshot_every_records=snapshot_every_records,
            on_fatal=on_fatal,
            cluster_id=cluster_id,
        )
        self.channel: ControllerChannel = self.controller.channel
        self.loader = self.controller.loader

    @property
    def controller_id(self) -> int:
        return self.node_id  # this process is the (only) controller

    def start(self, timeout: float) -> None:
        """Replay the committed log into the loader's subscribers and become the active
        controller of the one-voter quorum."""
        self.controller.start(timeout)

    def stop(self) -> None:
        self.controller.stop()


class RemoteQuorum:
    def __init__(
        self,
        node_id: int,
        voters: str,
        request_timeout_ms: int,
        cluster_id: str | None = None,
        tls: ReloadableContext | None = None,
    ) -> None:
        """`cluster_id`: the broker's own id, claimed in BrokerRegistration (None: none yet);
        `tls`: the controllers' listener is SSL (the client context to reach them)."""
        self.node_id = node_id
        self.remote = RemoteController(
            voters,
            request_timeout_ms=request_timeout_ms,
            client_id=f"gregor-broker-{node_id}",
            cluster_id=cluster_id,
            tls=tls,
        )
        self.channel: ControllerChannel = self.remote
        self.log = RemoteMetadataLog(
            voters, replica_id=node_id, client_id=f"gregor-broker-{node_id}", tls=tls
        )
        self.loader = MetadataLoader(self.log)

    @property
    def controller_id(self) -> int:
        leader = self.remote.tracker.leader
        return -1 if leader is None else leader

    def start(self, timeout: float) -> None:
        """Start following the committed metadata log; catching up is the lifecycle's part
        (the controller unfences the broker once its published offset is recent enough)."""
        self.loader.start()
        self.log.start()

    def stop(self) -> None:
        self.loader.stop()
        self.log.close()
        self.remote.close()
