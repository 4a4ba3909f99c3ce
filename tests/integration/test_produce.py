"""Produce against an in-process broker over raw protocol requests: acks 0/1/all, the fsync
wait, per-partition errors (corrupt batch, too large, unknown, not leader)."""

from __future__ import annotations

import pytest
from helpers import RawClient, wait_until
from replica_helpers import batch, create_topic, fetch, produce, values_of

from client.errors import ErrorCode
from client.protocol import ApiKey


@pytest.fixture
def client(broker_server):
    with RawClient(broker_server.address) as c:
        yield c


def _log(broker, topic: str, partition: int = 0):
    return broker.server.services.log_manager.get(topic, partition)


@pytest.mark.parametrize("acks", [1, -1])
def test_acked_produce_is_fsynced_before_the_ack(broker_server, client, acks):
    assert create_topic(client, "t1")["error_code"] == 0
    for i in range(5):
        r = produce(client, "t1", 0, batch([b"a%d" % i, b"b%d" % i]), acks=acks, corr=i + 1)
        assert r["error_code"] == 0, r
        assert r["base_offset"] == 2 * i
        # the ack arrives only once the group commit covered the batch
        assert _log(broker_server, "t1").flushed_offset >= r["base_offset"] + 2
    p = broker_server.server.services.replica_manager.get_partition("t1", 0)
    assert p.high_watermark == 10
    got = fetch(client, "t1", 0, 0)
    assert got["error_code"] == 0 and got["high_watermark"] == 10
    assert [v for _, v in values_of(got["records"])] == [
        x for i in range(5) for x in (b"a%d" % i, b"b%d" % i)
    ]


def test_acks_zero_sends_no_response(broker_server, client):
    assert create_topic(client, "t0")["error_code"] == 0
    body = {
        "acks": 0,
        "timeout_ms": 1000,
        "topics": [{"name": "t0", "partitions": [{"partition": 0, "records": batch([b"x"])}]}],
    }
    client.send(ApiKey.PRODUCE, 0, 7, body)
    client.send(ApiKey.PRODUCE, 0, 8, body)
    # the next request's answer is the first thing on the wire: acks=0 wrote nothing
    client.send(ApiKey.METADATA, 0, 9, {"topics": None, "allow_auto_topic_creation": False})
    corr, resp = client.recv()
    assert corr == 9 and [t["name"] for t in resp["topics"]] == ["t0"]
    wait_until(lambda: _log(broker_server, "t0").end_offset == 2, 5, "acks=0 records appended")


def test_corrupt_batch_fails_only_its_partition(broker_server, client):
    assert create_topic(client, "tc", partitions=2)["error_code"] == 0
    bad = bytearray(batch([b"x", b"y"]))
    bad[-1] ^= 0xFF  # breaks the CRC
    body = {
        "acks": -1,
        "timeout_ms": 5000,
        "topics": [
            {
                "name": "tc",
                "partitions": [
                    {"partition": 0, "records": bytes(bad)},
                    {"partition": 1, "records": batch([b"good"])},
                ],
            },
            {"name": "nope", "partitions": [{"partition": 0, "records": batch([b"z"])}]},
        ],
    }
    resp = client.request(ApiKey.PRODUCE, 0, body)
    by = {(t["name"], p["partition"]): p for t in resp["topics"] for p in t["partitions"]}
    assert by[("tc", 0)]["error_code"] == ErrorCode.CORRUPT_MESSAGE
    assert by[("tc", 1)]["error_code"] == 0 and by[("tc", 1)]["base_offset"] == 0
    assert by[("nope", 0)]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _log(broker_server, "tc", 0).end_offset == 0
    assert values_of(fetch(client, "tc", 1, 0)["records"]) == [(0, b"good")]


def test_message_too_large_and_unknown_partition(broker_factory):
    broker = broker_factory(**{"message.max.bytes": 2000, "auto.create.topics.enable": False})
    with RawClient(broker.address) as c:
        assert create_topic(c, "big")["error_code"] == 0
        r = produce(c, "big", 0, batch([b"v" * 5000]))
        assert r["error_code"] == ErrorCode.MESSAGE_TOO_LARGE
        assert produce(c, "big", 3, batch([b"v"]))["error_code"] == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
        assert produce(c, "small", 0, batch([b"v"]))["error_code"] == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
        # auto-creation is off: the topic never appears
        meta = c.request(
            ApiKey.METADATA, 0, {"topics": [{"name": "small"}], "allow_auto_topic_creation": True}
        )
        assert meta["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_batch_far_above_the_limit_is_too_large_not_corrupt(broker_server, client):
    """Issue 10, item 6: 40 MiB against the default 1 MiB message.max.bytes, CRC broken too."""
    assert create_topic(client, "huge")["error_code"] == 0
    big = bytearray(batch([b"h" * (40 << 20)]))
    big[-1] ^= 0xFF
    r = produce(client, "huge", 0, bytes(big))
    assert r["error_code"] == ErrorCode.MESSAGE_TOO_LARGE, r
    assert "exceeds max.message.bytes" in r["error_message"]
    assert _log(broker_server, "huge").end_offset == 0


def test_produce_to_unknown_topic_auto_creates_it(broker_server, client):
    r = produce(client, "auto", 0, batch([b"v"]))
    assert r["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # retriable: created meanwhile
    wait_until(
        lambda: "auto" in broker_server.server.services.metadata.topics, 10, "auto-created topic"
    )
    assert produce(client, "auto", 0, batch([b"v"]), corr=2)["error_code"] == 0


def test_not_leader_when_partition_led_elsewhere(broker_server, client):
    """A replica this broker follows (leader elsewhere) refuses produce and fetch."""
    assert create_topic(client, "tl")["error_code"] == 0
    part = broker_server.server.services.replica_manager.get_partition("tl", 0)
    part.make_follower(99, part.leader_epoch + 1, part.partition_epoch, (1, 99), (1, 99))
    assert produce(client, "tl", 0, batch([b"v"]))["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert fetch(client, "tl", 0, 0)["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_flush_on_ack_false_acks_before_fsync(broker_factory):
    broker = broker_factory(**{"log.flush.on.ack": False})
    with RawClient(broker.address) as c:
        assert create_topic(c, "nf")["error_code"] == 0
        r = produce(c, "nf", 0, batch([b"a", b"b", b"c"]))
        assert r["error_code"] == 0
        part = broker.server.services.replica_manager.get_partition("nf", 0)
        assert part.high_watermark == 3  # HW = LEO without flush-on-ack
        assert len(values_of(fetch(c, "nf", 0, 0)["records"])) == 3
