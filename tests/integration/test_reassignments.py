"""AlterPartitionReassignments (45) and ListPartitionReassignments (46) against a combined
`gregor server` (the in-process controller channel): Kafka's per-partition errors, a reorder
of a one-replica partition (complete at once), the throttle key as the one dynamic broker
config, the CLI's refusals of bad plans, and the raw wire shapes."""

from __future__ import annotations

import json
import subprocess

import pytest
from helpers import RawClient, gregor_command

from client import Admin, TopicPartition
from client.errors import (
    ConfigError,
    InvalidConfigError,
    InvalidReplicaAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)
from client.protocol import ApiKey


def test_admin_reassignments_on_one_node(broker_server) -> None:
    tp = TopicPartition("r", 0)
    with Admin(bootstrap_servers=broker_server.bootstrap) as admin:
        admin.create_topic("r", partitions=2)
        res = admin.alter_partition_reassignments(
            {
                tp: [1],  # where it is: nothing moves
                TopicPartition("r", 1): [1, 2],  # broker 2 is not registered
                TopicPartition("nope", 0): [1],
            }
        )
        assert res[tp] is None
        assert isinstance(res[TopicPartition("r", 1)], InvalidReplicaAssignmentError)
        assert "not registered" in str(res[TopicPartition("r", 1)])
        assert isinstance(res[TopicPartition("nope", 0)], UnknownTopicOrPartitionError)
        res = admin.alter_partition_reassignments({tp: None})
        assert isinstance(res[tp], NoReassignmentInProgressError)
        assert admin.list_partition_reassignments() == {}
        assert admin.list_partition_reassignments([tp, TopicPartition("nope", 3)]) == {}
        assert admin.describe_topic("r").partitions[0].replicas == [1]
        with pytest.raises(ConfigError, match="list of broker ids"):
            admin.alter_partition_reassignments({tp: "1"})  # type: ignore[dict-item]
        # the throttle is accepted (and followed live); other broker keys are not
        admin.incremental_alter_configs(
            {("broker", ""): {"follower.replication.throttled.rate": 1_000_000}}
        )
        admin.incremental_alter_configs(
            {("broker", ""): {"follower.replication.throttled.rate": None}}
        )
        with pytest.raises(InvalidConfigError, match="follower side"):
            admin.incremental_alter_configs(
                {("broker", "1"): {"leader.replication.throttled.rate": 1000}}
            )


def test_the_wire_shapes(broker_server) -> None:
    with Admin(bootstrap_servers=broker_server.bootstrap) as admin:
        admin.create_topic("w", partitions=1)
    with RawClient((broker_server.host, broker_server.port)) as c:
        resp = c.request(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            0,
            {"topics": [{"name": "w", "partitions": [{"partition_index": 0, "replicas": None}]}]},
        )
        assert resp["error_code"] == 0
        [t] = resp["responses"]
        assert t["partitions"] == [
            {
                "partition_index": 0,
                "error_code": 85,
                "error_message": "no reassignment of w-0 is in progress",
            }
        ]
        resp = c.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"topics": None})
        assert resp["error_code"] == 0 and resp["topics"] == []


def _gregor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*gregor_command(), *args], capture_output=True, text=True, timeout=60)


def test_cli_on_one_node(broker_server, tmp_path) -> None:
    bs = ["--bootstrap-server", broker_server.bootstrap]
    assert _gregor("topics", "create", "c", "--partitions", "3", *bs).returncode == 0
    plan = tmp_path / "plan.json"
    r = _gregor("partitions", "reassign", "--generate", "--brokers", "1", "--plan", str(plan), *bs)
    assert r.returncode == 0 and "0 partitions change" in r.stdout, r.stdout + r.stderr
    assert json.loads(plan.read_text()) == {"version": 1, "partitions": []}
    r = _gregor("partitions", "reassign", "--execute", "--plan", str(plan), *bs)
    assert r.returncode == 1 and "lists no partition" in r.stderr
    r = _gregor("partitions", "reassign", "--generate", "--brokers", "1,9", *bs)
    assert r.returncode == 1 and "brokers [9] are not registered" in r.stderr
    r = _gregor("partitions", "reassign", "--generate", *bs)
    assert r.returncode == 1 and "--generate needs --brokers" in r.stderr
    plan.write_text('{"partitions": [{"topic": "c", "partition": 0, "replicas": [1, 1]}]}')
    r = _gregor("partitions", "reassign", "--verify", "--plan", str(plan), *bs)
    assert r.returncode == 1 and "duplicate broker ids" in r.stderr
    plan.write_text('{"partitions": [{"topic": "c", "partition": 2, "replicas": [1]}]}')
    r = _gregor("partitions", "reassign", "--execute", "--plan", str(plan), "--throttle", "0", *bs)
    assert r.returncode == 1 and "positive number of bytes/s" in r.stderr
    r = _gregor("partitions", "reassign", "--execute", "--plan", str(plan), *bs)
    assert r.returncode == 0 and "Started the reassignment of 1 partitions" in r.stdout
    r = _gregor("partitions", "reassign", "--verify", "--plan", str(plan), *bs)
    assert r.returncode == 0 and "c-2: complete" in r.stdout, r.stdout
    r = _gregor("broker", "decommission", "1", *bs)
    assert r.returncode == 1 and "cannot move every replica off broker 1" in r.stderr, r.stderr
    r = _gregor("broker", "recommission", "1", *bs)
    assert r.returncode == 0 and "Cancelled 0 moves off broker 1" in r.stdout
    r = _gregor("broker")
    assert r.returncode == 2 and "--config FILE is needed" in r.stderr


def test_describe_log_dirs(broker_server) -> None:
    from client import Producer

    with Admin(bootstrap_servers=broker_server.bootstrap) as admin:
        admin.create_topic("sz", partitions=2)
        with Producer(bootstrap_servers=broker_server.bootstrap) as p:
            p.send("sz", b"v" * 5000, partition=1).result(30)
    with Admin(bootstrap_servers=broker_server.bootstrap) as admin:  # knows no broker yet
        [(node, dirs)] = admin.describe_log_dirs([1]).items()
        assert node == 1 and len(dirs) == 1
        [d] = dirs.values()
        assert d.error is None and d.total_bytes > d.usable_bytes > 0
        sizes = {tp: s for tp, s in d.replicas.items() if tp.topic == "sz"}
        assert sizes[TopicPartition("sz", 0)] == 0
        assert sizes[TopicPartition("sz", 1)] > 5000  # the batch, header included
    with RawClient((broker_server.host, broker_server.port)) as c:
        resp = c.request(
            ApiKey.DESCRIBE_LOG_DIRS, 0, {"topics": [{"topic": "sz", "partitions": [1]}]}
        )
        [r] = resp["results"]
        assert [t["name"] for t in r["topics"]] == ["sz"]
        assert [p["partition_index"] for p in r["topics"][0]["partitions"]] == [1]
