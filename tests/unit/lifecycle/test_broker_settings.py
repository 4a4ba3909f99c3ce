"""BrokerSettings (broker/node_settings.py): a BrokerNode's keys read once from its Config,
typed, with the registry's defaults; bad roles or an empty log.dirs fail there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.node_settings import METADATA_DIR_NAME, BrokerSettings
from client.config import load_config
from client.errors import ConfigError


def _settings(tmp_path, **overrides):
    cfg = load_config("broker", env={}, overrides={"log.dirs": str(tmp_path / "d"), **overrides})
    return cfg, BrokerSettings.from_config(cfg)


def test_every_field_is_the_configs_value(tmp_path):
    cfg, s = _settings(
        tmp_path,
        **{
            "node.id": 7,
            "broker.rack": "r1",
            "min.insync.replicas": 2,
            "broker.heartbeat.interval.ms": 1234,
            "replica.lag.time.max.ms": 4321,
            "controlled.shutdown.timeout.ms": 999,
            "log.retention.check.interval.ms": 11_000,
            "replica.high.watermark.checkpoint.interval.ms": 2222,
            "log.segment.bytes": 2_000_000,
            "num.replica.fetchers": 3,
            "log.cleaner.enable": False,
            "group.max.size": 17,
        },
    )
    assert (s.node_id, s.rack) == (7, "r1")
    assert s.log_dirs == (os.path.abspath(tmp_path / "d"),)
    assert s.replica.min_insync_replicas == 2
    assert s.broker_heartbeat_interval_ms == 1234
    assert s.replica_lag_time_max_ms == 4321
    assert s.controlled_shutdown_timeout_ms == 999
    assert s.log_retention_check_interval_ms == 11_000
    assert s.hw_checkpoint_interval_ms == 2222
    assert s.log.segment_bytes == 2_000_000
    assert s.fetcher.num_fetchers == 3 and s.fetcher.tls is None
    assert s.cleaner.enable is False
    assert s.group.max_size == 17
    # the registry's defaults where nothing is set
    assert s.request_timeout_ms == 30_000  # (a client key: the remote controller link's own)
    assert s.log_max_open_files == cfg.log_max_open_files
    assert s.max_records_between_snapshots == cfg.metadata_log_max_records_between_snapshots
    with pytest.raises(AttributeError):
        s.node_id = 8  # type: ignore[misc]  # frozen


def test_combined_node_keeps_its_raft_log_under_the_first_log_dir(tmp_path):
    _, s = _settings(tmp_path)
    assert s.combined and s.controller_quorum_voters == ""
    assert s.metadata_dir == str(Path(os.path.abspath(tmp_path / "d")) / METADATA_DIR_NAME)
    _, s = _settings(tmp_path, **{"metadata.log.dir": str(tmp_path / "meta")})
    assert s.metadata_dir == os.path.abspath(tmp_path / "meta")


def test_broker_only_node_reads_the_voters(tmp_path):
    _, s = _settings(
        tmp_path,
        **{"process.roles": "broker", "controller.quorum.voters": "1@127.0.0.1:9093"},
    )
    assert not s.combined and s.metadata_dir is None
    assert s.controller_quorum_voters == "1@127.0.0.1:9093"


def test_a_controller_only_config_fails_when_built(tmp_path):
    with pytest.raises(ConfigError, match="gregor controller"):
        _settings(tmp_path, **{"process.roles": "controller"})


def test_the_combined_controllers_settings_are_built_with_the_brokers(tmp_path):
    scram = tmp_path / "scram.yaml"
    _, s = _settings(
        tmp_path,
        **{
            "process.roles": "broker,controller",
            "node.id": 3,
            "num.partitions": 6,
            "default.replication.factor": 1,
            "unclean.leader.election.enable": True,
            "sasl.scram.bootstrap.file": str(scram),
        },
    )
    c = s.controller
    assert (c.node_id, c.num_partitions, c.unclean_leader_election_enable) == (3, 6, True)
    assert c.sasl_scram_bootstrap_file == str(scram)
    assert c.broker_session_timeout_ms == 9000  # the registry's default
