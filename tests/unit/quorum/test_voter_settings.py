"""VoterSettings: what a controller voter reads from its config, built once before start()."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from controller.quorum.voter_settings import VoterSettings


def _config(tmp_path: Path, **extra: Any) -> SimpleNamespace:
    base: dict[str, Any] = {
        "node_id": 2,
        "controller_quorum_voters": "1@127.0.0.1:9101,2@127.0.0.1:9102",
        "metadata_log_dir": str(tmp_path / "meta"),
    }
    return SimpleNamespace(**{**base, **extra})


def test_reads_every_key_once_with_kafka_defaults(tmp_path: Path) -> None:
    s = VoterSettings.from_config(_config(tmp_path))
    assert s.node_id == 2
    assert s.voters == {1: ("127.0.0.1", 9101), 2: ("127.0.0.1", 9102)}
    assert s.address == ("127.0.0.1", 9102)
    assert s.metadata_log_dir == os.path.abspath(tmp_path / "meta")
    assert s.cluster_id is None
    assert s.election_timeout_ms == 1000
    assert s.max_records_between_snapshots == 10_000
    assert s.metrics_address is None
    assert s.tls is None


def test_configured_values_and_tls_when_the_controller_listener_is_ssl(tmp_path: Path) -> None:
    s = VoterSettings.from_config(
        _config(
            tmp_path,
            cluster_id="abc",
            controller_quorum_election_timeout_ms=300,
            metadata_log_max_records_between_snapshots=0,
            metrics_listener="http://127.0.0.1:9999",
            controller_listener_names="CONTROLLER",
            listener_security_protocol_map="CONTROLLER:SSL",
            ssl_cafile="/ca.pem",
        )
    )
    assert (s.cluster_id, s.election_timeout_ms, s.max_records_between_snapshots) == ("abc", 300, 0)
    assert s.metrics_address == ("127.0.0.1", 9999)
    assert s.tls is not None and s.tls.cafile == "/ca.pem"


def test_a_node_in_no_voters_entry_and_without_a_listener_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        VoterSettings.from_config(_config(tmp_path, node_id=7))


def test_the_controllers_own_settings_are_built_with_the_voters(tmp_path: Path) -> None:
    s = VoterSettings.from_config(
        _config(tmp_path, broker_session_timeout_ms=4500, producer_id_block_size=50)
    )
    assert s.controller.node_id == 2
    assert (s.controller.broker_session_timeout_ms, s.controller.producer_id_block_size) == (
        4500,
        50,
    )
    assert s.controller.sasl_scram_bootstrap_file is None  # absent: the default
    assert s.controller.num_partitions == 1
