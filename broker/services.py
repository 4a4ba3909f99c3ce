"""Services: what a request handler reaches through `ctx.services` (RequestContext.services).

One per broker, built by BrokerNode once its parts exist (`node.services`): the config and the
node's identity, the replica manager, log manager and purgatories, the ControllerChannel, the
metadata publisher (`metadata` is the latest published image), the group and transaction
coordinators, the producer-id manager, the SASL settings and the authentication log. Handlers take what they need
from it and nothing else, so a handler's dependencies are the attributes it reads here.

Threads: built on the node's control thread; read from any I/O thread (every part is
thread-safe; `advertised`, `listeners` and `metrics` are set once, before the listeners serve).
"""

from __future__ import annotations

import concurrent.futures
import logging
from typing import TYPE_CHECKING

from broker.group import GroupCoordinator
from broker.listeners import Listeners
from broker.log import LogManager
from broker.metadata_publisher import MetadataPublisher
from broker.producer_ids import ProducerIdManager
from broker.purgatory import Purgatory
from broker.quota.manager import QuotaManager
from broker.replica import ReplicaManager
from broker.security.auth_log import AuthLog
from broker.security.authorizer import Authorizer
from broker.security.sasl import SaslSettings
from broker.txn import TxnCoordinator
from controller.channel import ControllerChannel
from controller.metadata.image import MetadataImage
from controller.results import CreateTopicResult

if TYPE_CHECKING:
    from broker.node import BrokerNode
    from broker.request_metrics import ErrorCounter

_log = logging.getLogger(__name__)


class Services:
    """What handlers see as `ctx.services`. `metadata` is the latest published image."""

    def __init__(self, node: BrokerNode) -> None:
        self._node = node
        self.config = node.config  # (DescribeConfigs shows it; read keys from `settings`)
        self.settings = settings = node.settings
        self.node_id = node.node_id
        self.advertised: tuple[str, int] = node.advertised  # on inter.broker.listener.name
        self.listeners: Listeners = node.listeners
        self.replica_manager: ReplicaManager = node.replica_manager
        self.log_manager: LogManager = node.log_manager
        self.produce_purgatory: Purgatory = node.produce_purgatory
        self.fetch_purgatory: Purgatory = node.fetch_purgatory
        self.controller: ControllerChannel = node.controller
        self.publisher: MetadataPublisher = node.publisher
        self.group_coordinator: GroupCoordinator = node.group_coordinator
        self.txn_coordinator: TxnCoordinator = node.txn_coordinator
        self.producer_ids = ProducerIdManager(
            node.controller, node.node_id, lambda: node.lifecycle.broker_epoch
        )
        # broker.request_metrics.ErrorCounter while metrics.listener is set (BrokerServer), else None
        self.metrics: ErrorCounter | None = None
        # client quotas (broker/quota/manager.py), from the image's ClientQuota records
        self.quotas = QuotaManager(
            lambda: self.publisher.image.client_quotas,
            settings.quota_window_num,
            settings.quota_window_size_seconds,
        )
        self.sasl = SaslSettings.from_config(node.config)  # SASL listeners (docs/security.md)
        self.auth_log = AuthLog()
        # ACLs (docs/security.md, Authorization); None: authorizer.class.name is empty
        self.authorizer: Authorizer | None = None
        if settings.authorizer_enabled:
            self.authorizer = Authorizer(
                settings.super_users,
                settings.allow_everyone_if_no_acl_found,
                lambda: self.publisher.image.acls,
            )

    def advertised_for(self, listener: str) -> tuple[str, int]:
        """This broker's advertised address on `listener` (the inter-broker one if unknown)."""
        e = self.listeners.advertised_for(listener)
        return self.advertised if e is None else (e.host, e.port)

    @property
    def metadata(self) -> MetadataImage:
        return self.publisher.image

    @property
    def cluster_id(self) -> str:
        """The controller quorum's cluster id (Metadata, DescribeCluster): the same on every
        node; this node's own until the quorum's is known."""
        return self._node.cluster_id

    @property
    def controller_id(self) -> int:
        """The active controller as far as this broker knows (-1: not known yet)."""
        return self._node.quorum.controller_id

    def auto_create_topics(
        self, names: list[str]
    ) -> concurrent.futures.Future[list[CreateTopicResult]] | None:
        """Ask the controller to create `names` with the defaults (num.partitions,
        default.replication.factor) when auto.create.topics.enable; None when disabled."""
        if not names or not self.settings.auto_create_topics_enable:
            return None
        reqs = [{"name": n, "num_partitions": -1, "replication_factor": -1} for n in names]
        _log.info("auto-creating topics %s", names)
        return self.controller.create_topics(reqs)
