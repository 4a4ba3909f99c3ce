"""The cluster id: fixed once by the active controller, checked on registration, and a node's own
id in its data dir (controller/quorum/cluster_id.py)."""

from __future__ import annotations

import random

import pytest

from client.errors import ConfigError, ErrorCode, InconsistentClusterIdError
from controller.metadata import ClusterId, decode_record
from controller.quorum import ControllerSettings, LocalMetadataLog, QuorumController
from controller.quorum.cluster_id import CLUSTER_ID_FILE, LocalClusterId, new_cluster_id


def _controller(tmp_path, own=None, name="meta"):
    log = LocalMetadataLog(str(tmp_path / name))
    return QuorumController(log, ControllerSettings(), lambda: 0.0, random.Random(1), own), log


def _cluster_id_records(log):
    return [r for _, d in log.read(0) if isinstance(r := decode_record(d), ClusterId)]


def test_first_active_controller_writes_its_own_id_once(tmp_path):
    c, log = _controller(tmp_path, own="kept-id")
    assert c.ensure_cluster_id() == "kept-id" and c.image.cluster_id == "kept-id"
    assert c.ensure_cluster_id() == "kept-id"
    c.tick()
    assert _cluster_id_records(log) == [ClusterId("kept-id")]
    # a controller loading that log later keeps the log's id, whatever its own
    log.close()
    c2, log2 = _controller(tmp_path, own="another")
    assert c2.image.cluster_id == "kept-id" and c2.ensure_cluster_id() == "kept-id"
    assert _cluster_id_records(log2) == [ClusterId("kept-id")]
    log2.close()


def test_without_an_own_id_a_new_one_is_minted(tmp_path):
    c, log = _controller(tmp_path)
    cid = c.ensure_cluster_id()
    assert cid and len(cid) == 22 and cid != new_cluster_id()
    assert _cluster_id_records(log) == [ClusterId(cid)]
    log.close()


def test_registration_with_another_id_is_refused_and_answers_the_quorums(tmp_path):
    c, log = _controller(tmp_path, own="the-cluster")
    r = c.cluster.register_broker(1, "h", 9001, None, "inc-1", (), "the-cluster")
    assert r["error_code"] == 0 and r["cluster_id"] == "the-cluster"
    r = c.cluster.register_broker(2, "h", 9002, None, "inc-2")  # a new broker: no id yet
    assert r["error_code"] == 0 and r["cluster_id"] == "the-cluster"
    before = c.last_written_offset
    r = c.cluster.register_broker(3, "h", 9003, None, "inc-3", (), "other-cluster")
    assert r["error_code"] == ErrorCode.INCONSISTENT_CLUSTER_ID and r["broker_epoch"] == -1
    assert "'other-cluster'" in r["error_message"] and "'the-cluster'" in r["error_message"]
    assert r["cluster_id"] == "the-cluster"
    assert 3 not in c.image.brokers and c.last_written_offset == before
    log.close()


def test_registration_fixes_the_id_when_no_tick_did_yet(tmp_path):
    c, log = _controller(tmp_path)
    assert c.image.cluster_id is None
    r = c.cluster.register_broker(1, "h", 9001, None, "inc-1", (), "brokers-own")
    # the quorum's id comes first: the broker's own is not adopted (the quorum owns the id)
    assert r["error_code"] == ErrorCode.INCONSISTENT_CLUSTER_ID
    assert c.image.cluster_id == r["cluster_id"] != "brokers-own"
    log.close()


def test_local_cluster_id_file(tmp_path):
    local = LocalClusterId(tmp_path)
    assert local.value is None and local.source == str(tmp_path / CLUSTER_ID_FILE)
    local.check(None)
    local.check("anything")  # no own id: nothing to compare
    assert local.store("abc") and (tmp_path / CLUSTER_ID_FILE).read_text() == "abc\n"
    assert not local.store("abc")
    again = LocalClusterId(tmp_path)
    assert again.value == "abc" and again.stored == "abc"
    with pytest.raises(InconsistentClusterIdError) as e:
        again.check("xyz", role="broker 4")
    msg = str(e.value)
    assert "broker 4" in msg and "'abc'" in msg and "'xyz'" in msg
    assert str(tmp_path / CLUSTER_ID_FILE) in msg and "\n" not in msg
    with pytest.raises(InconsistentClusterIdError):
        again.store("xyz")
    assert (tmp_path / CLUSTER_ID_FILE).read_text() == "abc\n"


def test_configured_id_against_the_stored_one(tmp_path):
    LocalClusterId(tmp_path).store("abc")
    assert LocalClusterId(tmp_path, "abc").value == "abc"
    with pytest.raises(InconsistentClusterIdError, match="cluster.id is configured as 'other'"):
        LocalClusterId(tmp_path, "other")
    with pytest.raises(ConfigError):
        LocalClusterId(tmp_path / "x", " ")
    configured = LocalClusterId(tmp_path / "new", "mine")
    with pytest.raises(InconsistentClusterIdError, match="the cluster.id config key"):
        configured.check("theirs")
