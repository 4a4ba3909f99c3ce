"""What a BrokerNode reads from its config, built once (`BrokerSettings.from_config`) before
anything is built: a missing or bad value fails there, naming the key, not half-way through
start-up or later on the broker-tasks thread. The parts with settings of their own (replica
manager, group coordinator, cleaner, replica fetchers) get theirs from here too.

The config object itself still travels to the parts that read keys of other roles or many keys
at once (the combined node's controller, the handlers' DescribeConfigs, the outgoing security).
Any thread may read a BrokerSettings (frozen).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from broker.group import GroupSettings
from broker.log import LogConfig
from broker.log.cleaner_thread import CleanerSettings
from broker.replica import ReplicaSettings
from broker.replica.fetcher import FetcherSettings
from broker.security.authorizer import parse_super_users
from broker.txn import TxnSettings
from client.config import Config, setting
from client.config.types import parse_list
from client.errors import ConfigError
from controller.quorum.state import ControllerSettings

METADATA_DIR_NAME = "__cluster_metadata"  # no "-N" suffix: LogManager must not take it for a log
DEFAULT_METADATA_LOG_DIR = "gregor-data/controller"


def log_config_from(config: Config) -> LogConfig:
    """The broker-wide LogConfig from the config registry's log.* keys."""
    return LogConfig(
        segment_bytes=int(config.log_segment_bytes),
        segment_ms=int(config.log_roll_ms),
        index_interval_bytes=int(config.log_index_interval_bytes),
        index_size_max_bytes=int(config.log_index_size_max_bytes),
        retention_ms=int(config.log_retention_ms),
        retention_bytes=int(config.log_retention_bytes),
        flush_on_ack=bool(config.log_flush_on_ack),
        flush_messages=int(config.log_flush_interval_messages),
        flush_ms=int(config.log_flush_interval_ms),
        max_message_bytes=int(config.message_max_bytes),
        cleanup_policy=parse_list(config.log_cleanup_policy),
        delete_retention_ms=int(config.log_cleaner_delete_retention_ms),
        min_cleanable_dirty_ratio=float(config.log_cleaner_min_cleanable_ratio),
        min_compaction_lag_ms=int(config.log_cleaner_min_compaction_lag_ms),
        producer_id_expiration_ms=int(config.producer_id_expiration_ms),
    )


def check_process_roles(config: Config) -> bool:
    """True for a combined broker+controller node, False for a broker that joins the remote
    quorum of controller.quorum.voters; ConfigError naming process.roles for anything else."""
    roles = set(parse_list(setting(config, "process_roles", ("broker", "controller"))))
    if roles == {"broker", "controller"}:
        return True
    if roles == {"broker"}:
        voters = str(setting(config, "controller_quorum_voters", "") or "")
        if not voters.strip():
            raise ConfigError(
                "process.roles=broker needs controller.quorum.voters (ID@HOST:PORT,...): the"
                " controllers this broker joins"
            )
        return False
    if roles == {"controller"}:
        raise ConfigError(
            "process.roles=controller: run a controller voter with `gregor controller --config"
            " FILE`, not as a broker"
        )
    raise ConfigError(f"process.roles={','.join(sorted(roles))}: expected broker[,controller]")


def _metadata_dir(config: Config, first_log_dir: str) -> str:
    """A combined node's Raft log dir: metadata.log.dir when set explicitly, else
    `<log.dirs[0]>/__cluster_metadata`."""
    configured: str = setting(config, "metadata_log_dir", DEFAULT_METADATA_LOG_DIR)
    source = getattr(config, "source", None)
    explicit = (
        source("metadata.log.dir") != "default"
        if callable(source)
        else configured != DEFAULT_METADATA_LOG_DIR
    )
    if configured and explicit:
        return os.path.abspath(configured)
    return str(Path(first_log_dir) / METADATA_DIR_NAME)


@dataclass(frozen=True)
class BrokerSettings:
    node_id: int
    log_dirs: tuple[str, ...]  # absolute, at least one
    rack: str | None  # broker.rack
    combined: bool  # process.roles is broker,controller (else broker only)
    metadata_dir: str | None  # combined: the one-voter quorum's Raft log dir; None otherwise
    cluster_id: str | None  # cluster.id as configured (None: the one stored in log.dirs[0])
    controller_quorum_voters: str  # broker only: the remote quorum ("" when combined)
    request_timeout_ms: int  # calls to the remote controller (broker only), txn markers
    socket_request_max_bytes: int  # also the largest answer the txn marker channel reads
    max_records_between_snapshots: int  # combined: metadata.log.max.records.between.snapshots
    controller: ControllerSettings  # combined: what the one-voter quorum's controller reads
    log: LogConfig  # the broker-wide defaults; topics override them
    log_max_open_files: int  # -1: no bound
    broker_heartbeat_interval_ms: int
    log_retention_check_interval_ms: int
    producer_id_expiration_check_interval_ms: int
    hw_checkpoint_interval_ms: int  # replica.high.watermark.checkpoint.interval.ms
    replica_lag_time_max_ms: int
    controlled_shutdown_timeout_ms: int
    replica: ReplicaSettings
    group: GroupSettings
    cleaner: CleanerSettings
    fetcher: FetcherSettings  # without TLS/SASL: the node adds its outgoing security
    txn: TxnSettings  # the transaction coordinator's
    # what Services reads (broker/services.py)
    auto_create_topics_enable: bool
    quota_window_num: int
    quota_window_size_seconds: int
    authorizer_enabled: bool  # authorizer.class.name is set
    super_users: tuple[str, ...]  # super.users, parsed
    allow_everyone_if_no_acl_found: bool

    @classmethod
    def from_config(cls, config: Config) -> BrokerSettings:
        """ValueError/ConfigError for an empty log.dirs, a bad process.roles or a bad value."""
        log_dirs = tuple(os.path.abspath(d) for d in parse_list(config.log_dirs))
        if not log_dirs:
            raise ValueError("log.dirs is empty")
        combined = check_process_roles(config)

        def ms(attr: str, default: int) -> int:
            return int(setting(config, attr, default))

        return cls(
            node_id=int(config.node_id),
            log_dirs=log_dirs,
            rack=setting(config, "broker_rack", None),
            combined=combined,
            metadata_dir=_metadata_dir(config, log_dirs[0]) if combined else None,
            cluster_id=setting(config, "cluster_id", None),
            controller_quorum_voters="" if combined else str(config.controller_quorum_voters),
            request_timeout_ms=ms("request_timeout_ms", 30_000),
            socket_request_max_bytes=int(config.socket_request_max_bytes),
            max_records_between_snapshots=ms("metadata_log_max_records_between_snapshots", 10_000),
            controller=ControllerSettings.from_config(config),
            log=log_config_from(config),
            log_max_open_files=ms("log_max_open_files", -1),
            broker_heartbeat_interval_ms=ms("broker_heartbeat_interval_ms", 2000),
            log_retention_check_interval_ms=ms("log_retention_check_interval_ms", 300_000),
            producer_id_expiration_check_interval_ms=ms(
                "producer_id_expiration_check_interval_ms", 600_000
            ),
            hw_checkpoint_interval_ms=ms("replica_high_watermark_checkpoint_interval_ms", 5000),
            replica_lag_time_max_ms=ms("replica_lag_time_max_ms", 30_000),
            controlled_shutdown_timeout_ms=ms("controlled_shutdown_timeout_ms", 4000),
            replica=ReplicaSettings.from_config(config),
            group=GroupSettings.from_config(config),
            cleaner=CleanerSettings.from_config(config),
            fetcher=FetcherSettings.from_config(config),
            txn=TxnSettings.from_config(config),
            auto_create_topics_enable=bool(setting(config, "auto_create_topics_enable", True)),
            quota_window_num=int(setting(config, "quota_window_num", 11)),
            quota_window_size_seconds=int(setting(config, "quota_window_size_seconds", 1)),
            authorizer_enabled=bool(setting(config, "authorizer_class_name", "")),
            super_users=tuple(parse_super_users(str(setting(config, "super_users", "") or ""))),
            allow_everyone_if_no_acl_found=bool(
                setting(config, "allow_everyone_if_no_acl_found", False)
            ),
        )
