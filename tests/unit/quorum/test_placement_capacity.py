"""Brokers that report they cannot take new replicas (BrokerHeartbeat.cannot_create_replicas,
e.g. out of file descriptors) are skipped by the controller's placement; when too few brokers
are left, CreateTopics / CreatePartitions are refused with INVALID_REPLICATION_FACTOR naming the
broker and its reason, and nothing is written."""

from __future__ import annotations

import concurrent.futures

from test_controller import beat, env, topic, up  # noqa: F401  (env is a fixture)

from client.errors import ErrorCode
from client.protocol.api_keys import ApiKey
from controller.quorum.remote import RemoteController

REASON = (
    "out of file descriptors: 1020 open under open-files limit 1024 (4 free, 16 kept in"
    " reserve): raise `ulimit -n` (LimitNOFILE=) or lower log.max.open.files"
)


def starve(c, epochs, b, reason=REASON):
    hb = c.cluster.broker_heartbeat(
        b, epochs[b], c.last_written_offset, cannot_create_replicas=reason
    )
    assert hb["error_code"] == 0 and not hb["is_fenced"], hb


def test_new_replicas_go_only_to_brokers_that_can_take_them(env):  # noqa: F811
    c, _, _ = env
    epochs = up(c, 1, 2, 3)
    starve(c, epochs, 2)
    assert c.cluster.cannot_create() == {2: REASON}
    [res] = c.replication.create_topics([topic("t", 12, 2)])
    assert res["error_code"] == 0, res
    parts = c.image.topics["t"].partitions
    assert all(set(reg.replicas) == {1, 3} for reg in parts.values())
    assert all(reg.leader in (1, 3) for reg in parts.values())
    [res] = c.replication.create_partitions([{"name": "t", "count": 20, "assignments": None}])
    assert res["error_code"] == 0, res
    parts = c.image.topics["t"].partitions
    assert len(parts) == 20 and all(2 not in reg.replicas for reg in parts.values())
    # broker 2 still counts as live: it keeps leading what it led
    assert 2 in c.cluster.live()


def test_too_few_brokers_left_refuses_and_writes_nothing(env):  # noqa: F811
    c, _, _ = env
    epochs = up(c, 1, 2)
    [ok] = c.replication.create_topics([topic("old", 2, 2)])
    assert ok["error_code"] == 0
    starve(c, epochs, 2)
    offset = c.last_written_offset
    for validate_only in (True, False):
        [res] = c.replication.create_topics([topic("late", 4, 2)], validate_only=validate_only)
        assert res["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR, res
        msg = res["error_message"]
        assert "replication factor 2 larger than the 1 live brokers" in msg, msg
        assert "broker 2: out of file descriptors" in msg, msg
        assert "open-files limit 1024" in msg and "ulimit -n" in msg, msg
        assert "log.max.open.files" in msg, msg
    [res] = c.replication.create_partitions([{"name": "old", "count": 3, "assignments": None}])
    assert res["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR, res
    assert "broker 2" in res["error_message"]
    assert c.last_written_offset == offset  # nothing was created
    assert "late" not in c.image.topics and len(c.image.topics["old"].partitions) == 2
    # a topic that fits on the brokers left is still created in the same request
    results = c.replication.create_topics([topic("late", 4, 2), topic("small", 2, 1)])
    assert [r["error_code"] for r in results] == [ErrorCode.INVALID_REPLICATION_FACTOR, 0]
    assert all(reg.replicas == (1,) for reg in c.image.topics["small"].partitions.values())


def test_every_broker_out_names_each_and_recovers(env):  # noqa: F811
    c, _, _ = env
    epochs = up(c, 1, 2)
    starve(c, epochs, 1)
    starve(c, epochs, 2, "out of file descriptors recently (open-files limit 512)")
    [res] = c.replication.create_topics([topic("t", 1, 1)])
    assert res["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR
    assert "the 0 live brokers" in res["error_message"]
    assert "broker 1: out of" in res["error_message"]
    assert (
        "broker 2: out of file descriptors recently (open-files limit 512)"
        in (res["error_message"])
    )
    beat(c, epochs, 1)  # broker 1's descriptors came back: its heartbeat says nothing
    assert c.cluster.cannot_create() == {
        2: "out of file descriptors recently (open-files limit 512)"
    }
    [res] = c.replication.create_topics([topic("t", 2, 1)])
    assert res["error_code"] == 0, res
    assert all(reg.replicas == (1,) for reg in c.image.topics["t"].partitions.values())


def test_manual_assignment_to_such_a_broker_is_refused(env):  # noqa: F811
    c, _, _ = env
    epochs = up(c, 1, 2)
    starve(c, epochs, 2)
    [res] = c.replication.create_topics(
        [topic("m", assignments=[{"partition": 0, "broker_ids": [1, 2]}])]
    )
    assert res["error_code"] == ErrorCode.INVALID_REPLICA_ASSIGNMENT, res
    assert "broker 2 cannot take new replicas now: out of file descriptors" in res["error_message"]
    [res] = c.replication.create_topics(
        [topic("m", assignments=[{"partition": 0, "broker_ids": [1]}])]
    )
    assert res["error_code"] == 0, res
    [res] = c.replication.create_partitions([{"name": "m", "count": 2, "assignments": [[2]]}])
    assert res["error_code"] == ErrorCode.INVALID_REPLICA_ASSIGNMENT, res
    assert len(c.image.topics["m"].partitions) == 1


def test_the_report_ends_with_the_session_and_is_bounded(env):  # noqa: F811
    c, clock, _ = env
    epochs = up(c, 1, 2)
    starve(c, epochs, 2, "x" * 10_000)
    assert len(c.cluster.cannot_create()[2]) == 300
    clock.advance(1500)  # broker 2 goes silent: fenced, and its report goes with its session
    beat(c, epochs, 1)
    assert c.cluster.check_sessions() == [2]
    assert c.cluster.cannot_create() == {}
    [res] = c.replication.create_topics(
        [topic("t", 1, 2)]
    )  # the usual answer: too few live brokers
    assert res["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR
    assert "available brokers: 1" in res["error_message"]


class _Recording(RemoteController):
    """Keeps the request bodies instead of sending them."""

    def __init__(self) -> None:
        super().__init__({1: ("127.0.0.1", 1)})
        self.sent: list[tuple[int, dict]] = []

    def _send(self, api_key, body, unwrap, timeout_ms=None):  # type: ignore[no-untyped-def]
        self.sent.append((api_key, body))
        return concurrent.futures.Future()


def test_the_remote_channel_carries_the_reason() -> None:
    rc = _Recording()
    try:
        rc.broker_heartbeat(1, 5, 10, cannot_create_replicas="out of descriptors")
        rc.broker_heartbeat(1, 5, 10)
    finally:
        rc.close()
    [(key, body), (_, plain)] = rc.sent
    assert key == ApiKey.BROKER_HEARTBEAT
    assert body["cannot_create_replicas"] == "out of descriptors"
    assert plain["cannot_create_replicas"] is None
