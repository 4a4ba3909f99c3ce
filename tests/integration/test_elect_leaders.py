"""ElectLeaders (43) and OffsetForLeaderEpoch (23) against a combined `gregor server` (one replica per partition, so the
preferred replica always leads): Admin.elect_leaders answers per partition, the CLI prints
Kafka's lines and exits 0 when no election was needed, unknown partitions and election types
are errors, and PartitionDescription carries the leader epoch."""

from __future__ import annotations

import subprocess

import pytest
from helpers import RawClient, gregor_command

from client import Admin, TopicPartition
from client.errors import (
    ConfigError,
    ElectionNotNeededError,
    ErrorCode,
    UnknownTopicOrPartitionError,
)
from client.protocol import ApiKey


def test_admin_elect_leaders(broker_server) -> None:
    with Admin(bootstrap_servers=broker_server.bootstrap) as admin:
        admin.create_topic("e", partitions=2)
        d = admin.describe_topic("e")
        assert all(p.leader_epoch >= 0 for p in d.partitions)
        res = admin.elect_leaders([TopicPartition("e", 0), TopicPartition("nope", 0)])
        assert isinstance(res[TopicPartition("e", 0)], ElectionNotNeededError)
        assert isinstance(res[TopicPartition("nope", 0)], UnknownTopicOrPartitionError)
        res = admin.elect_leaders([TopicPartition("e", 1)], election_type="unclean")
        assert isinstance(res[TopicPartition("e", 1)], ElectionNotNeededError)
        assert admin.elect_leaders() == {}  # every partition: none needed one
        with pytest.raises(ConfigError, match="election_type"):
            admin.elect_leaders(election_type="dirty")


def test_unknown_election_type_on_the_wire(broker_server) -> None:
    with RawClient((broker_server.host, broker_server.port)) as c:
        resp = c.request(
            ApiKey.ELECT_LEADERS,
            0,
            {"election_type": 9, "topic_partitions": [{"topic": "x", "partitions": [0]}]},
        )
    assert resp["error_code"] == ErrorCode.INVALID_REQUEST
    (t,) = resp["replica_election_results"]
    assert t["partition_result"][0]["error_code"] == ErrorCode.INVALID_REQUEST
    assert "election type 9" in t["partition_result"][0]["error_message"]


def _gregor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*gregor_command(), *args], capture_output=True, text=True, timeout=60)


def test_cli_elect_leaders(broker_server) -> None:
    bs = ["--bootstrap-server", broker_server.bootstrap]
    assert _gregor("topics", "create", "c", "--partitions", "2", *bs).returncode == 0
    r = _gregor("topics", "elect-leaders", "--topic", "c", *bs)
    assert r.returncode == 0, r.stderr
    assert "Valid replica already elected for partitions c-0, c-1" in r.stdout
    r = _gregor("topics", "elect-leaders", "--all-topic-partitions", *bs)
    assert r.returncode == 0 and "No partition needed a preferred election" in r.stdout
    r = _gregor("topics", "elect-leaders", "--topic", "c", "--partition", "7", *bs)
    assert r.returncode == 1
    assert "for partition c-7: UnknownTopicOrPartitionError" in r.stdout
    r = _gregor("topics", "elect-leaders", *bs)
    assert r.returncode == 2 and "--topic" in r.stderr


def test_offset_for_leader_epoch_on_the_wire(broker_server) -> None:
    """OffsetForLeaderEpoch (23) against a combined server: the current epoch ends at the log
    end; an epoch newer than the leader's in current_leader_epoch is UNKNOWN_LEADER_EPOCH."""
    with Admin(bootstrap_servers=broker_server.bootstrap) as admin:
        admin.create_topic("ep", partitions=1)
        epoch = admin.describe_topic("ep").partitions[0].leader_epoch
    from client import Producer

    with Producer(bootstrap_servers=broker_server.bootstrap) as prod:
        for i in range(4):
            prod.send("ep", b"%d" % i, partition=0).result(10)
    body = {
        "topics": [
            {
                "name": "ep",
                "partitions": [
                    {"partition": 0, "current_leader_epoch": epoch, "leader_epoch": epoch},
                    {"partition": 0, "current_leader_epoch": epoch + 1, "leader_epoch": epoch},
                ],
            }
        ]
    }
    with RawClient((broker_server.host, broker_server.port)) as c:
        resp = c.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, body)
    ok, newer = resp["topics"][0]["partitions"]
    assert (ok["error_code"], ok["leader_epoch"], ok["end_offset"]) == (0, epoch, 4)
    assert newer["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH
