"""An in-process single-voter ControllerProcess (real Raft log, real sockets) driven through
RemoteController, and followed by a RemoteMetadataLog observer + MetadataLoader."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest
from helpers import wait_until

from client.errors import ErrorCode
from client.protocol.api_keys import ApiKey
from client.protocol.schema import API_SPECS
from controller.quorum.loader import MetadataLoader
from controller.quorum.network import request
from controller.quorum.process import ControllerProcess
from controller.quorum.remote import RemoteController
from controller.quorum.remote_log import RemoteMetadataLog


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def single(tmp_path):
    port = _free_port()
    cfg = SimpleNamespace(
        node_id=1,
        controller_quorum_voters=f"1@127.0.0.1:{port}",
        metadata_log_dir=str(tmp_path / "meta"),
        controller_quorum_election_timeout_ms=200,
        metadata_log_max_records_between_snapshots=3,
        broker_session_timeout_ms=60_000,
    )
    proc = ControllerProcess(cfg)
    proc.start()
    yield proc, f"1@127.0.0.1:{port}"
    proc.stop()


def test_remote_controller_and_observer(single):
    proc, voters = single
    rc = RemoteController(voters, request_timeout_ms=10_000)
    observer = RemoteMetadataLog(voters, poll_interval_ms=10)
    loader = MetadataLoader(observer)
    loader.start()
    observer.start()
    try:
        reg = rc.register_broker(1, "127.0.0.1", 9092, None, "inc").result(10)
        assert reg["error_code"] == 0
        epoch = reg["broker_epoch"]
        wait_until(lambda: 1 in loader.image.brokers, 5, "observer sees the registration")
        hb = rc.broker_heartbeat(1, epoch, loader.image.offset).result(10)
        assert hb["error_code"] == 0 and not hb["is_fenced"]
        assert (
            rc.broker_heartbeat(1, epoch + 99, 0).result(10)["error_code"]
            == ErrorCode.STALE_BROKER_EPOCH
        )
        # CreateTopics / DeleteTopics are forwarded over the wire when their schemas exist
        if ApiKey.CREATE_TOPICS in API_SPECS and ApiKey.DELETE_TOPICS in API_SPECS:
            res = rc.create_topics(
                [{"name": "w", "num_partitions": 1, "replication_factor": 1}]
            ).result(10)
            assert res[0]["name"] == "w" and res[0]["error_code"] == 0
            dup = rc.create_topics(
                [{"name": "w", "num_partitions": 1, "replication_factor": 1}]
            ).result(10)
            assert dup[0]["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS
            gone = rc.delete_topics(["w", "nope"]).result(10)
            assert [r["error_code"] for r in gone] == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        res = proc.runner.submit(
            lambda c: c.replication.create_topics(
                [{"name": "t", "num_partitions": 2, "replication_factor": 1}]
            )
        ).result(10)
        assert res[0]["error_code"] == 0
        wait_until(lambda: "t" in loader.image.topics, 5, "observer sees the topic")
        # (Incremental)AlterConfigs over the wire: APPEND, then AlterConfigs replacing the set
        [r] = rc.incremental_alter_configs([{"resource_type": 2, "resource_name": "t", "configs": [
            {"name": "cleanup.policy", "config_operation": 2, "value": "compact"}]}]).result(10)  # fmt: skip
        assert r["error_code"] == 0, r
        assert dict(proc.controller.image.topic_config("t")) == {"cleanup.policy": "delete,compact"}
        [r] = rc.alter_configs([{"resource_type": 2, "resource_name": "t", "configs": [
            {"name": "retention.ms", "value": "60000"}]}]).result(10)  # fmt: skip
        assert r["error_code"] == 0, r
        assert dict(proc.controller.image.topic_config("t")) == {"retention.ms": "60000"}
        reg0 = loader.image.partition("t", 0)
        resp = rc.alter_partition(
            1,
            epoch,
            [
                {
                    "name": "t",
                    "partitions": [
                        {
                            "partition": 0,
                            "leader_epoch": reg0.leader_epoch,
                            "new_isr": [1],
                            "partition_epoch": reg0.partition_epoch,
                        }
                    ],
                }
            ],
        ).result(10)
        assert resp["error_code"] == 0 and resp["topics"][0]["partitions"][0]["error_code"] == 0
        # the controller compacted its log (every 3 records); a fresh observer starts from the snapshot
        late = RemoteMetadataLog(voters, poll_interval_ms=10)
        late_loader = MetadataLoader(late)
        late_loader.start()
        late.start()
        try:
            wait_until(
                lambda: late_loader.image.same_state(proc.controller.image),
                5,
                "late observer caught up",
            )
            assert late.latest_snapshot() is not None
        finally:
            late.close()
        wait_until(lambda: loader.image.same_state(proc.controller.image), 5, "observer caught up")
        d = request("127.0.0.1", proc.port, ApiKey.DESCRIBE_QUORUM, {})
        assert d["leader_id"] == 1 and d["role"] == "leader" and d["high_watermark"] > 0
    finally:
        observer.close()
        rc.close()


def test_unknown_api_and_bad_raft_payload(single):
    proc, _ = single
    assert request("127.0.0.1", proc.port, 9999, {})["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    resp = request("127.0.0.1", proc.port, ApiKey.RAFT_MESSAGE, {"payload": b"\x91\x01"})
    assert resp["error_code"] == ErrorCode.INVALID_REQUEST
    versions = request("127.0.0.1", proc.port, ApiKey.API_VERSIONS, {})
    assert {ApiKey.RAFT_MESSAGE, ApiKey.METADATA_FETCH} <= {
        k["api_key"] for k in versions["api_keys"]
    }
