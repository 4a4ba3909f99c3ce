"""CreatePartitions (37) end to end against an in-process broker: grow a topic 1 → 3, a producer
and a subscribed consumer created before the growth pick the new partitions up on their next
metadata refresh (metadata.max.age.ms), Kafka's errors, the new partitions survive a restart,
and `gregor topics alter`."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from helpers import RawClient, gregor_command, poll_n, wait_until
from replica_helpers import batch, fetch, produce, values_of

from client import Admin, Consumer, Producer, TopicPartition
from client.errors import (
    ErrorCode,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    UnknownTopicOrPartitionError,
)
from client.partitioner import default_partition
from client.protocol import ApiKey


def _key_for(partition: int, n: int) -> bytes:
    """A key that Kafka's partitioner sends to `partition` of `n` (and not to 0 when n == 1)."""
    return next(
        k for k in (b"k%d" % i for i in range(10_000)) if default_partition(k, n) == partition
    )


def test_grow_produce_consume(broker_server) -> None:
    bs = broker_server.bootstrap
    with (
        Admin(bootstrap_servers=bs) as admin,
        Producer(bootstrap_servers=bs, linger_ms=0, metadata_max_age_ms=100) as producer,
        Consumer(bootstrap_servers=bs, metadata_max_age_ms=100) as consumer,
    ):
        admin.create_topic("grow", partitions=1)
        consumer.subscribe(["grow"])
        sent = [producer.send("grow", b"before-%d" % i).result(10) for i in range(5)]
        assert {md.partition for md in sent} == {0}
        got = poll_n(consumer, 5, timeout=15)

        admin.create_partitions("grow", 3)
        desc = admin.describe_topic("grow")
        assert [p.partition for p in desc.partitions] == [0, 1, 2]
        assert all(p.leader == 1 and p.isr == [1] for p in desc.partitions)
        log_manager = broker_server.server.services.log_manager
        assert {tp for tp in log_manager.logs() if tp[0] == "grow"} == {
            ("grow", 0),
            ("grow", 1),
            ("grow", 2),
        }

        # The running producer learns the new count on its next refresh: a key that hashes to
        # partition 2 of 3 lands there once it has (earlier sends go to partition 0).
        key = _key_for(2, 3)
        values = [b"before-%d" % i for i in range(5)]
        deadline = time.monotonic() + 10
        while True:
            v = b"probe-%d" % len(values)
            md = producer.send("grow", v, key=key).result(10)
            values.append(v)
            if md.partition == 2:
                break
            assert md.partition == 0
            assert time.monotonic() < deadline, "producer never saw the new partitions"
            got += consumer.poll(timeout_ms=20)  # keep the consumer going meanwhile
        for p in (0, 1, 2):
            md = producer.send("grow", b"explicit-%d" % p, partition=p).result(10)
            assert md.partition == p and md.offset >= 0
            values.append(b"explicit-%d" % p)

        # The subscribed consumer is assigned the new partitions and reads them from the start.
        got += poll_n(consumer, len(values) - len(got), timeout=15)
        assert sorted(r.value for r in got) == sorted(values)
        assert consumer.assignment() == {TopicPartition("grow", p) for p in range(3)}
        for p in range(3):
            offsets = [r.offset for r in got if r.partition == p]
            assert offsets == list(range(len(offsets)))


def test_errors(broker_server) -> None:
    with Admin(bootstrap_servers=broker_server.bootstrap) as admin:
        admin.create_topic("e", partitions=2)
        with pytest.raises(InvalidPartitionsError, match="2 partitions"):
            admin.create_partitions("e", 2)
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions("e", 1)
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.create_partitions("missing", 4)
        with pytest.raises(InvalidReplicaAssignmentError):
            admin.create_partitions("e", 3, assignments=[[7]])  # broker 7 does not exist
        with pytest.raises(InvalidReplicaAssignmentError):
            admin.create_partitions("e", 4, assignments=[[1]])  # one entry for two partitions
        admin.create_partitions("e", 5, validate_only=True)
        assert len(admin.describe_topic("e").partitions) == 2
        admin.create_partitions("e", 3, assignments=[[1]])
        assert len(admin.describe_topic("e").partitions) == 3

    with RawClient(broker_server.address) as c:
        body = {
            "topics": [
                {"name": "e", "count": 9, "assignments": None},
                {"name": "e", "count": 9, "assignments": None},
                {"name": "nope", "count": 2, "assignments": None},
                {"name": "e2", "count": 0},
            ],
            "timeout_ms": 5000,
            "validate_only": False,
        }
        resp = c.request(ApiKey.CREATE_PARTITIONS, 0, body)
        codes = [(r["name"], r["error_code"]) for r in resp["results"]]
        assert codes == [
            ("e", ErrorCode.INVALID_REQUEST),
            ("e", ErrorCode.INVALID_REQUEST),
            ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            ("e2", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ]
        versions = c.request(ApiKey.API_VERSIONS, 0, {})
        assert ApiKey.CREATE_PARTITIONS in {a["api_key"] for a in versions["api_keys"]}


def test_new_partitions_survive_restart(broker_factory, tmp_path) -> None:
    data = tmp_path / "restart"
    first = broker_factory(data_dir=data)
    with RawClient(first.address) as c:
        with Admin(bootstrap_servers=first.bootstrap) as admin:
            admin.create_topic("r", partitions=1)
            admin.create_partitions("r", 3)
        for p in range(3):
            assert produce(c, "r", p, batch([b"p%d" % p]), corr=p + 1)["error_code"] == 0
    first.server.shutdown(timeout=10)
    second = broker_factory(data_dir=data)
    with RawClient(second.address) as c:
        for p in range(3):
            assert [v for _, v in values_of(fetch(c, "r", p, 0)["records"])] == [b"p%d" % p]
    with Admin(bootstrap_servers=second.bootstrap) as admin:
        assert [p.high_watermark for p in admin.describe_topic("r").partitions] == [1, 1, 1]
        admin.create_partitions("r", 4)
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions("r", 4)
    wait_until(
        lambda: ("r", 3) in second.server.services.log_manager.logs(), 5, "partition 3's log"
    )


@pytest.mark.slow
def test_cli_topics_alter(gregor_process) -> None:
    server = gregor_process()
    bs = ["--bootstrap-server", server.bootstrap]

    def gregor(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*gregor_command(), *args], capture_output=True, text=True, timeout=60
        )

    assert gregor("topics", "create", "cli", "--partitions", "1", *bs).returncode == 0
    r = gregor("topics", "alter", "cli", "--partitions", "4", *bs)
    assert r.returncode == 0, r.stderr
    assert "4 partitions" in r.stdout
    desc = json.loads(gregor("topics", "describe", "cli", "--json", *bs).stdout)
    assert [p["partition"] for p in desc[0]["partitions"]] == [0, 1, 2, 3]
    r = gregor("topics", "alter", "cli", "--partitions", "2", *bs)
    assert r.returncode == 1 and "INVALID_PARTITIONS" in r.stderr
