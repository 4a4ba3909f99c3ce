"""What a controller voter process reads from its config, built once (`VoterSettings.from_config`)
before anything starts: a bad value fails there, naming the key, not half-way through start()."""

from __future__ import annotations

import os
from dataclasses import dataclass

from client.config.loader import Config, setting
from client.security.protocols import controller_protocol
from client.security.tls import TlsSettings
from controller.metrics import metrics_address
from controller.quorum.membership_service import own_address
from controller.quorum.network import parse_voters
from controller.quorum.state import ControllerSettings


@dataclass(frozen=True)
class VoterSettings:
    node_id: int
    voters: dict[int, tuple[str, int]]  # controller.quorum.voters: id -> (host, port)
    address: tuple[str, int]  # where this voter listens (its voters entry, else the listener)
    metadata_log_dir: str  # absolute
    cluster_id: str | None  # cluster.id as configured (None: the one stored in the log dir)
    election_timeout_ms: int
    max_records_between_snapshots: int  # 0: no snapshots
    metrics_address: tuple[str, int] | None  # metrics.listener, None when off
    tls: TlsSettings | None  # set when controller.listener.names maps to SSL
    controller: ControllerSettings  # what its QuorumController reads

    @classmethod
    def from_config(cls, config: Config) -> VoterSettings:
        """ValueError/ConfigError for a bad voters list, listener or metrics.listener."""
        node_id = int(config.node_id)
        voters = parse_voters(config.controller_quorum_voters)
        listener = setting(config, "controller_quorum_listener", None)
        return cls(
            node_id=node_id,
            voters=voters,
            address=own_address(node_id, voters, listener),
            metadata_log_dir=os.path.abspath(config.metadata_log_dir),
            cluster_id=setting(config, "cluster_id", None),
            election_timeout_ms=int(
                setting(config, "controller_quorum_election_timeout_ms", 1000) or 1000
            ),
            max_records_between_snapshots=int(
                setting(config, "metadata_log_max_records_between_snapshots", 10_000) or 0
            ),
            metrics_address=metrics_address(config),
            tls=TlsSettings.from_config(config) if controller_protocol(config) == "SSL" else None,
            controller=ControllerSettings.from_config(config),
        )
