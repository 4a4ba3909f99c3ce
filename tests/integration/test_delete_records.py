"""DeleteRecords (21) against a combined `gregor server`: Admin.delete_records moves the log
start offset (ListOffsets earliest, describe_topic, consumers starting from the beginning all
see it; segments wholly below are deleted), -1 means the high watermark, and the errors are
Kafka's: OFFSET_OUT_OF_RANGE above the HW, UNKNOWN_TOPIC_OR_PARTITION, POLICY_VIOLATION on a
compacted-only topic. Then `gregor topics delete-records`, both forms."""

from __future__ import annotations

import json
import subprocess

import pytest
from helpers import RawClient, gregor_command, poll_n, wait_until

from client import Admin, Consumer, Producer, TopicPartition
from client.errors import (
    ConfigError,
    ErrorCode,
    OffsetOutOfRangeError,
    PolicyViolationError,
    UnknownTopicOrPartitionError,
)
from client.protocol import ApiKey


def _produce(bootstrap: str, topic: str, n: int, partition: int = 0) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=0) as p:
        for i in range(n):  # one batch each: the log start can land between any two records
            p.send(topic, b"%04d" % i + b"x" * 300, partition=partition).result(15)


def test_delete_records_moves_the_log_start_everywhere_it_shows(broker_server) -> None:
    bs = broker_server.bootstrap
    tp0, tp1 = TopicPartition("d", 0), TopicPartition("d", 1)
    with Admin(bootstrap_servers=bs) as admin:
        admin.create_topic("d", partitions=2, config={"segment.bytes": "2048"})
        _produce(bs, "d", 30, 0)
        _produce(bs, "d", 5, 1)
        log = broker_server.server.services.log_manager.get("d", 0)
        segments_before = log.segment_base_offsets
        assert len(segments_before) > 3 and segments_before[0] == 0
        assert admin.delete_records({tp0: 17, tp1: -1}) == {tp0: 17, tp1: 5}
        assert admin.list_offsets({tp0: -2, tp1: -2}) == {tp0: 17, tp1: 5}
        d = {p.partition: p for p in admin.describe_topic("d").partitions}
        assert d[0].log_start_offset == 17 and d[0].high_watermark == 30
        # the segments wholly below 17 are gone from disk, the one holding 17 stays
        bases = log.segment_base_offsets
        assert bases[0] <= 17 and (len(bases) == 1 or bases[1] > 17), bases
        assert len(bases) < len(segments_before)
        on_disk = sorted(int(f.name.split(".")[0]) for f in log.directory.glob("*.log"))
        assert on_disk == bases
        # an offset below the current start changes nothing
        assert admin.delete_records({tp0: 3}) == {tp0: 17}
    with Consumer(bootstrap_servers=bs, auto_offset_reset="earliest") as c:
        c.assign([tp0])
        got = poll_n(c, 13, timeout=15)
        assert [r.offset for r in got] == list(range(17, 30))
        assert got[0].value.startswith(b"0017")
        assert c.beginning_offsets([tp0, tp1]) == {tp0: 17, tp1: 5}
    with Consumer(bootstrap_servers=bs, auto_offset_reset="earliest") as c:
        c.assign([tp0])
        c.seek(tp0, 2)  # below the new start: out of range, reset to the earliest
        assert poll_n(c, 1, timeout=15)[0].offset == 17


def test_errors_are_kafkas(broker_server) -> None:
    bs = broker_server.bootstrap
    with Admin(bootstrap_servers=bs) as admin:
        admin.create_topic("e")
        admin.create_topic("compacted", config={"cleanup.policy": "compact"})
        _produce(bs, "e", 4)
        with pytest.raises(OffsetOutOfRangeError, match="e-0.*high watermark 4"):
            admin.delete_records({TopicPartition("e", 0): 5})
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_records({TopicPartition("nope", 0): 1})
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_records({TopicPartition("e", 3): 1})
        with pytest.raises(PolicyViolationError, match="compact"):
            admin.delete_records({TopicPartition("compacted", 0): 0})
        with pytest.raises(ConfigError, match=">= -1"):
            admin.delete_records({TopicPartition("e", 0): -2})
        assert admin.list_offsets({TopicPartition("e", 0): -2}) == {TopicPartition("e", 0): 0}
        assert admin.delete_records({TopicPartition("e", 0): 4}) == {TopicPartition("e", 0): 4}


def test_on_the_wire(broker_server) -> None:
    with Admin(bootstrap_servers=broker_server.bootstrap) as admin:
        admin.create_topic("w")
    _produce(broker_server.bootstrap, "w", 3)
    with RawClient(broker_server.address) as c:
        resp = c.request(
            ApiKey.DELETE_RECORDS,
            0,
            {
                "topics": [
                    {"name": "w", "partitions": [{"partition": 0, "offset": 9}]},
                    {"name": "x", "partitions": [{"partition": 0, "offset": 0}]},
                ],
                "timeout_ms": 1000,
            },
        )
    got = {t["name"]: t["partitions"][0] for t in resp["topics"]}
    assert got["w"]["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
    assert got["x"]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _gregor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*gregor_command(), *args], capture_output=True, text=True, timeout=60)


def test_cli_delete_records(broker_server, tmp_path) -> None:
    bs = ["--bootstrap-server", broker_server.bootstrap]
    assert _gregor("topics", "create", "c", "--partitions", "2", *bs).returncode == 0
    _produce(broker_server.bootstrap, "c", 6, 0)
    _produce(broker_server.bootstrap, "c", 6, 1)
    r = _gregor("topics", "delete-records", "c", "--partition", "0", "--offset", "2", *bs)
    assert r.returncode == 0, r.stderr
    assert "partition: c-0\tlow_watermark: 2" in r.stdout
    plan = tmp_path / "offsets.json"
    plan.write_text(
        json.dumps(
            {
                "partitions": [
                    {"topic": "c", "partition": 0, "offset": -1},
                    {"topic": "c", "partition": 1, "offset": 3},
                ],
                "version": 1,
            }
        )
    )
    r = _gregor("topics", "delete-records", "--offset-json-file", str(plan), *bs)
    assert r.returncode == 0, r.stderr
    assert "partition: c-0\tlow_watermark: 6" in r.stdout
    assert "partition: c-1\tlow_watermark: 3" in r.stdout
    with Admin(bootstrap_servers=broker_server.bootstrap) as admin:
        wait_until(
            lambda: [p.log_start_offset for p in admin.describe_topic("c").partitions] == [6, 3],
            10,
            "the new log starts",
        )
    r = _gregor("topics", "delete-records", "c", "--partition", "0", "--offset", "99", *bs)
    assert r.returncode == 1 and "error:" in r.stderr and "high watermark 6" in r.stderr
    r = _gregor("topics", "delete-records", "c", "--offset", "1", *bs)
    assert r.returncode == 1 and "--partition" in r.stderr
    plan.write_text('{"partitions": [{"topic": "c", "partition": "zero", "offset": 1}]}')
    r = _gregor("topics", "delete-records", "--offset-json-file", str(plan), *bs)
    assert r.returncode == 1 and "partitions[0]" in r.stderr
    r = _gregor("topics", "delete-records", "--help")
    assert "--offset-json-file" in r.stdout and "last stable offset" in r.stdout
