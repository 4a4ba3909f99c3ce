"""QuorumController on a real LocalMetadataLog with a fake clock."""

from __future__ import annotations

import random

import pytest

from client.errors import ErrorCode
from controller.metadata import NO_LEADER
from controller.quorum import ControllerSettings, LocalMetadataLog, QuorumController

E = ErrorCode


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, ms: float) -> None:
        self.now += ms


@pytest.fixture
def env(tmp_path):
    clock = FakeClock()
    log = LocalMetadataLog(str(tmp_path / "meta"))
    settings = ControllerSettings(broker_session_timeout_ms=1000)
    c = QuorumController(log, settings, clock, random.Random(1))
    yield c, clock, log
    log.close()


def up(c, *ids, racks=None):
    epochs = {}
    for b in ids:
        r = c.cluster.register_broker(b, "127.0.0.1", 9000 + b, (racks or {}).get(b), f"inc-{b}")
        assert r["error_code"] == 0
        epochs[b] = r["broker_epoch"]
        hb = c.cluster.broker_heartbeat(b, epochs[b], c.last_written_offset)
        assert hb["error_code"] == 0 and not hb["is_fenced"], hb
    return epochs


def beat(c, epochs, *ids):
    for b in ids:
        assert c.cluster.broker_heartbeat(b, epochs[b], c.last_written_offset)["error_code"] == 0


def topic(name, n=-1, rf=-1, configs=None, assignments=None):
    return {
        "name": name,
        "num_partitions": n,
        "replication_factor": rf,
        "assignments": assignments or [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
    }


def test_create_topics_places_and_elects(env):
    c, _, _ = env
    up(c, 1, 2, 3)
    [res] = c.replication.create_topics([topic("orders", 6, 3)])
    assert res == {
        "name": "orders",
        "error_code": 0,
        "error_message": None,
        "num_partitions": 6,
        "replication_factor": 3,
    }
    t = c.image.topics["orders"]
    assert len(t.topic_id) == 16 and sorted(t.partitions) == list(range(6))
    leaders = [p.leader for p in t.partitions.values()]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]
    for p in t.partitions.values():
        assert p.isr == p.replicas and p.leader == p.replicas[0]
        assert (p.leader_epoch, p.partition_epoch) == (0, 0)
    [d] = c.replication.create_topics([topic("d")])
    assert (d["num_partitions"], d["replication_factor"]) == (1, 1)


def test_create_topics_errors(env):
    c, _, log = env
    up(c, 1, 2)
    c.replication.create_topics([topic("exists", 1, 1)])
    end = log.end_offset()
    results = c.replication.create_topics(
        [
            topic("exists", 1, 1),
            topic("bad name!", 1, 1),
            topic("", 1, 1),
            topic("x" * 250, 1, 1),
            topic("rf", 1, 3),
            topic("np", 0, 1),
            topic("cfg", 1, 1, {"retention.ms": "soon"}),
            topic("cfg2", 1, 1, {"no.such.key": "1"}),
            topic("dup", 1, 1),
            topic("dup", 1, 1),
            topic("manual-bad", 2, -1, assignments=[{"partition": 0, "broker_ids": [1]}]),
            topic("manual-unknown", assignments=[{"partition": 0, "broker_ids": [9]}]),
        ]
    )
    codes = [r["error_code"] for r in results]
    assert codes == [
        E.TOPIC_ALREADY_EXISTS,
        E.INVALID_TOPIC_EXCEPTION,
        E.INVALID_TOPIC_EXCEPTION,
        E.INVALID_TOPIC_EXCEPTION,
        E.INVALID_REPLICATION_FACTOR,
        E.INVALID_PARTITIONS,
        E.INVALID_CONFIG,
        E.INVALID_CONFIG,
        E.INVALID_REQUEST,
        E.INVALID_REQUEST,
        E.INVALID_REQUEST,
        E.INVALID_REPLICA_ASSIGNMENT,
    ]
    assert all(r["error_message"] for r in results)
    assert log.end_offset() == end, "nothing written for failed topics"
    assert c.replication.create_topics([topic("v", 3, 2)], validate_only=True)[0]["error_code"] == 0
    assert "v" not in c.image.topics and log.end_offset() == end


def test_manual_assignments_refused_with_invalid_replica_assignment(env):
    """topics create --replica-assignment's server side: uneven sizes, duplicate or unknown
    broker ids, and a partition listed twice are INVALID_REPLICA_ASSIGNMENT (39)."""
    c, _, log = env
    up(c, 1, 2, 3)
    end = log.end_offset()

    def a(*rows, numbers=None):
        return [
            {"partition": p, "broker_ids": list(r)}
            for p, r in zip(numbers or range(len(rows)), rows, strict=True)
        ]

    results = c.replication.create_topics(
        [
            topic("uneven", assignments=a([1, 2], [2])),
            topic("dup", assignments=a([1, 2], [3, 3])),
            topic("unknown", assignments=a([1, 9])),
            topic("twice", assignments=a([1], [2], numbers=[0, 0])),
            topic("gap", assignments=a([1], [2], numbers=[0, 2])),
        ]
    )
    assert [(r["error_code"], r["error_message"]) for r in results] == [
        (39, "every partition needs the same, non-zero number of replicas"),
        (39, "partition 1: duplicate broker ids [3, 3]"),
        (39, "partition 0: unknown brokers [9]"),
        (39, "partitions must be numbered 0..n-1, each once"),
        (39, "partitions must be numbered 0..n-1, each once"),
    ]
    assert ErrorCode.INVALID_REPLICA_ASSIGNMENT == 39
    assert log.end_offset() == end


def test_manual_assignment_and_configs(env):
    c, _, _ = env
    up(c, 1, 2, 3)
    [r] = c.replication.create_topics(
        [
            topic(
                "m",
                assignments=[
                    {"partition": 0, "broker_ids": [3, 1]},
                    {"partition": 1, "broker_ids": [2, 3]},
                ],
                configs={"retention.bytes": "1000", "min.insync.replicas": "2"},
            )
        ]
    )
    assert (r["error_code"], r["num_partitions"], r["replication_factor"]) == (0, 2, 2)
    assert c.image.partition("m", 0).replicas == (3, 1) and c.image.partition("m", 0).leader == 3
    assert dict(c.image.topic_config("m")) == {
        "retention.bytes": "1000",
        "min.insync.replicas": "2",
    }


def test_rf_counts_only_live_brokers(env):
    c, clock, _ = env
    e = up(c, 1, 2, 3)
    clock.advance(600)
    beat(c, e, 1, 2)
    clock.advance(600)
    assert c.cluster.check_sessions() == [3]
    assert (
        c.replication.create_topics([topic("t", 1, 3)])[0]["error_code"]
        == E.INVALID_REPLICATION_FACTOR
    )
    assert c.replication.create_topics([topic("t", 4, 2)])[0]["error_code"] == 0
    assert all(3 not in p.replicas for p in c.image.topics["t"].partitions.values())


def test_delete_topics_and_create_partitions(env):
    c, _, _ = env
    up(c, 1, 2, 3)
    c.replication.create_topics([topic("a", 2, 2), topic("b", 1, 1)])
    res = c.replication.delete_topics(["a", "nope"])
    assert [r["error_code"] for r in res] == [0, E.UNKNOWN_TOPIC_OR_PARTITION]
    assert "a" not in c.image.topics
    res = c.replication.create_partitions(
        [
            {"name": "b", "count": 4, "assignments": None},
            {"name": "b2", "count": 2, "assignments": None},
        ]
    )
    assert [r["error_code"] for r in res] == [0, E.UNKNOWN_TOPIC_OR_PARTITION]
    assert sorted(c.image.topics["b"].partitions) == [0, 1, 2, 3]
    assert (
        c.replication.create_partitions([{"name": "b", "count": 4}])[0]["error_code"]
        == E.INVALID_PARTITIONS
    )
    res = c.replication.create_partitions([{"name": "b", "count": 5, "assignments": [[2]]}])
    assert res[0]["error_code"] == 0 and c.image.partition("b", 4).replicas == (2,)
    # a count of 2^31-1 is refused at once, as CreateTopics refuses it (the schema fuzz sent one
    # and the controller tried to place two billion partitions)
    [huge] = c.replication.create_partitions(
        [{"name": "b", "count": 2**31 - 1, "assignments": None}]
    )
    assert huge["error_code"] == E.INVALID_PARTITIONS and "in one request" in huge["error_message"]


def test_registration_heartbeat_and_unfence_when_caught_up(env):
    c, clock, _ = env
    r = c.cluster.register_broker(1, "h", 1, None, "inc")
    epoch = r["broker_epoch"]
    assert c.image.brokers[1].fenced
    hb = c.cluster.broker_heartbeat(1, epoch, current_metadata_offset=-1)
    assert hb == {
        "error_code": 0,
        "is_caught_up": False,
        "is_fenced": True,
        "should_shut_down": False,
    }
    hb = c.cluster.broker_heartbeat(1, epoch, c.last_written_offset)
    assert hb["is_caught_up"] and not hb["is_fenced"] and not c.image.brokers[1].fenced
    assert c.cluster.broker_heartbeat(1, epoch + 100, 0)["error_code"] == E.STALE_BROKER_EPOCH
    assert c.cluster.broker_heartbeat(7, 0, 0)["error_code"] == E.BROKER_ID_NOT_REGISTERED
    # another incarnation while the session is alive is refused; after expiry it is accepted
    assert (
        c.cluster.register_broker(1, "h", 1, None, "other")["error_code"]
        == E.DUPLICATE_BROKER_REGISTRATION
    )
    clock.advance(1000)
    r2 = c.cluster.register_broker(1, "h", 1, None, "other")
    assert r2["error_code"] == 0 and r2["broker_epoch"] > epoch and c.image.brokers[1].fenced


def test_session_expiry_fences_and_moves_leaders(env):
    c, clock, _ = env
    e = up(c, 1, 2, 3)
    c.replication.create_topics([topic("t", 3, 2), topic("solo", 3, 1)])
    led_by_1 = [p for p, reg in c.image.topics["t"].partitions.items() if reg.leader == 1]
    assert led_by_1
    clock.advance(999)
    assert c.cluster.check_sessions() == []
    beat(c, e, 2, 3)
    clock.advance(1)
    assert c.cluster.check_sessions() == [1]
    assert c.image.brokers[1].fenced
    for p, reg in c.image.topics["t"].partitions.items():
        assert 1 not in reg.isr and reg.leader != 1
        if p in led_by_1:
            assert reg.leader_epoch == 1 and reg.leader in reg.replicas
    for reg in c.image.topics["solo"].partitions.values():
        if reg.replicas == (1,):
            assert reg.leader == NO_LEADER and reg.isr == (1,), "last ISR member stays in the ISR"
    # broker 1 comes back: re-registers, catches up, offline partitions get it back as leader
    r = c.cluster.register_broker(1, "h", 1, None, "inc-1b")
    hb = c.cluster.broker_heartbeat(1, r["broker_epoch"], c.last_written_offset)
    assert not hb["is_fenced"]
    for reg in c.image.topics["solo"].partitions.values():
        assert reg.leader != NO_LEADER


def test_unclean_leader_election(env):
    c, clock, _ = env
    e = up(c, 1, 2)
    c.replication.create_topics(
        [
            topic(
                "u",
                assignments=[{"partition": 0, "broker_ids": [1, 2]}],
                configs={"unclean.leader.election.enable": "true"},
            ),
            topic("c", assignments=[{"partition": 0, "broker_ids": [1, 2]}]),
        ]
    )
    for name in ("u", "c"):
        reg = c.image.partition(name, 0)
        c.replication.alter_partition(
            1,
            e[1],
            [
                {
                    "name": name,
                    "partitions": [
                        {
                            "partition": 0,
                            "leader_epoch": reg.leader_epoch,
                            "new_isr": [1],
                            "partition_epoch": reg.partition_epoch,
                        }
                    ],
                }
            ],
        )
    clock.advance(600)
    beat(c, e, 2)
    clock.advance(600)
    assert c.cluster.check_sessions() == [1]
    assert c.image.partition("u", 0).leader == 2 and c.image.partition("u", 0).isr == (2,)
    assert c.image.partition("c", 0).leader == NO_LEADER and c.image.partition("c", 0).isr == (1,)


def test_controlled_shutdown(env):
    c, _, _ = env
    e = up(c, 1, 2, 3)
    c.replication.create_topics([topic("t", 6, 2)])
    assert c.image.partitions_led_by(1)
    hb = c.cluster.broker_heartbeat(1, e[1], c.last_written_offset, want_shutdown=True)
    assert hb["should_shut_down"] and hb["is_fenced"]
    assert not c.image.partitions_led_by(1)
    assert all(1 not in r.isr for r in c.image.topics["t"].partitions.values())
    assert c.replication.create_topics([topic("n", 3, 2)])[0]["error_code"] == 0
    assert all(1 not in r.replicas for r in c.image.topics["n"].partitions.values())


def test_restart_restores_state_and_snapshots(env, tmp_path):
    c, clock, log = env
    up(c, 1, 2)
    c.replication.create_topics([topic("a", 2, 2)])
    image = c.image
    log.close()
    log2 = LocalMetadataLog(str(tmp_path / "meta"))
    c2 = QuorumController(log2, ControllerSettings(), clock, random.Random(2))
    assert c2.image == image
    from controller.metadata import snapshot_bytes

    log2.write_snapshot(c2.image.offset, snapshot_bytes(c2.image))
    c2.replication.create_topics([topic("b", 1, 1)])
    log2.close()
    log3 = LocalMetadataLog(str(tmp_path / "meta"))
    c3 = QuorumController(log3, ControllerSettings(), clock, random.Random(3))
    assert c3.image == c2.image and "b" in c3.image.topics
    log3.close()


def test_producer_id_blocks(env):
    c, _, _ = env
    e = up(c, 1)
    a = c.cluster.allocate_producer_ids(1, e[1])
    b = c.cluster.allocate_producer_ids(1, e[1])
    assert (a["producer_id_start"], b["producer_id_start"]) == (0, a["producer_id_len"])
    assert c.cluster.allocate_producer_ids(1, -5)["error_code"] == E.STALE_BROKER_EPOCH


def test_preferred_leader_election_and_auto_rebalance(tmp_path):
    clock = FakeClock()
    log = LocalMetadataLog(str(tmp_path))
    c = QuorumController(
        log,
        ControllerSettings(broker_session_timeout_ms=1000, leader_imbalance_check_interval_ms=5000),
        clock,
        random.Random(1),
    )
    e = up(c, 1, 2)
    c.replication.create_topics(
        [
            topic(
                "p",
                assignments=[
                    {"partition": 0, "broker_ids": [1, 2]},
                    {"partition": 1, "broker_ids": [2, 1]},
                ],
            )
        ]
    )
    # broker 1 restarts: leadership of p-0 moves to 2; once back and in the ISR again it is
    # not the leader until a preferred election
    assert c.cluster.broker_heartbeat(1, e[1], c.last_written_offset, want_shutdown=True)[
        "should_shut_down"
    ]
    r = c.cluster.register_broker(1, "h", 1, None, "again")
    assert r["error_code"] == 0
    e[1] = r["broker_epoch"]
    c.cluster.broker_heartbeat(1, e[1], c.last_written_offset)
    assert c.image.partition("p", 0).leader == 2
    res = c.replication.elect_preferred_leaders([("p", 0)])
    assert res[0]["error_code"] == E.PREFERRED_LEADER_NOT_AVAILABLE, "1 is not in the ISR yet"
    reg = c.image.partition("p", 0)
    c.replication.alter_partition(
        2,
        e[2],
        [
            {
                "name": "p",
                "partitions": [
                    {
                        "partition": 0,
                        "leader_epoch": reg.leader_epoch,
                        "new_isr": [2, 1],
                        "partition_epoch": reg.partition_epoch,
                    }
                ],
            }
        ],
    )
    res = c.replication.elect_preferred_leaders([("p", 0), ("p", 1), ("zz", 0)])
    assert [r["error_code"] for r in res] == [
        0,
        E.ELECTION_NOT_NEEDED,
        E.UNKNOWN_TOPIC_OR_PARTITION,
    ]
    assert c.image.partition("p", 0).leader == 1
    # the periodic rebalance does the same on its own
    c.cluster.broker_heartbeat(1, e[1], c.last_written_offset, want_shutdown=True)
    r = c.cluster.register_broker(1, "h", 1, None, "third")
    c.cluster.broker_heartbeat(1, r["broker_epoch"], c.last_written_offset)
    reg = c.image.partition("p", 0)
    assert reg.leader == 2
    c.replication.alter_partition(
        2,
        e[2],
        [
            {
                "name": "p",
                "partitions": [
                    {
                        "partition": 0,
                        "leader_epoch": reg.leader_epoch,
                        "new_isr": [2, 1],
                        "partition_epoch": reg.partition_epoch,
                    }
                ],
            }
        ],
    )
    c.cluster.broker_heartbeat(2, e[2], c.last_written_offset)
    clock.advance(5000)
    c.cluster.broker_heartbeat(1, r["broker_epoch"], c.last_written_offset)
    c.cluster.broker_heartbeat(2, e[2], c.last_written_offset)
    c.tick()
    assert c.image.partition("p", 0).leader == 1
    log.close()


def test_incremental_alter_configs(env):
    c, _, _ = env
    up(c, 1)
    c.replication.create_topics([topic("t", 1, 1, {"retention.ms": "100"})])
    res = c.configs.incremental_alter_configs(
        [
            {
                "resource_type": 2,
                "resource_name": "t",
                "configs": [
                    {"name": "retention.ms", "config_operation": 1, "value": None},
                    {"name": "retention.bytes", "config_operation": 0, "value": "4096"},
                ],
            },
            {"resource_type": 2, "resource_name": "nope", "configs": []},
            {
                "resource_type": 2,
                "resource_name": "t",
                "configs": [{"name": "segment.bytes", "config_operation": 0, "value": "tiny"}],
            },
            {
                "resource_type": 4,
                "resource_name": "1",
                "configs": [{"name": "log.retention.ms", "config_operation": 0, "value": "5"}],
            },
            {"resource_type": 9, "resource_name": "x", "configs": []},
        ]
    )
    assert [r["error_code"] for r in res] == [
        0,
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.INVALID_CONFIG,
        E.INVALID_CONFIG,  # dynamic broker configs: refused until brokers apply them
        E.INVALID_REQUEST,
    ]
    assert dict(c.image.topic_config("t")) == {"retention.bytes": "4096"}
    assert dict(c.image.config_for(4, "1")) == {}
    assert (
        c.configs.incremental_alter_configs(
            [
                {
                    "resource_type": 2,
                    "resource_name": "t",
                    "configs": [{"name": "retention.ms", "config_operation": 0, "value": "9"}],
                }
            ],
            validate_only=True,
        )[0]["error_code"]
        == 0
    )
    assert "retention.ms" not in c.image.topic_config("t")


def _ops(name, *configs, rtype=2):
    return [{"resource_type": rtype, "resource_name": name, "configs": [
        {"name": k, "config_operation": op, "value": v} for k, op, v in configs]}]  # fmt: skip


def test_incremental_append_and_subtract_on_list_keys_only(env):
    c, _, _ = env
    up(c, 1)
    c.replication.create_topics([topic("t", 1, 1)])
    # APPEND starts from the default (log.cleanup.policy: delete); an item already there once
    [r] = c.configs.incremental_alter_configs(_ops("t", ("cleanup.policy", 2, "compact,delete")))
    assert r["error_code"] == 0, r
    assert dict(c.image.topic_config("t")) == {"cleanup.policy": "delete,compact"}
    [r] = c.configs.incremental_alter_configs(_ops("t", ("cleanup.policy", 3, "delete")))
    assert r["error_code"] == 0 and c.image.topic_config("t")["cleanup.policy"] == "compact"
    for op in (2, 3):  # not a list: INVALID_CONFIG, nothing written
        [r] = c.configs.incremental_alter_configs(_ops("t", ("retention.ms", op, "5")))
        assert r["error_code"] == E.INVALID_CONFIG and "list-typed" in r["error_message"], r
    [r] = c.configs.incremental_alter_configs(
        _ops("1", ("follower.replication.throttled.rate", 2, "5"), rtype=4)
    )
    assert r["error_code"] == E.INVALID_CONFIG, r
    # subtracting the last item leaves an empty policy, which is not valid
    [r] = c.configs.incremental_alter_configs(_ops("t", ("cleanup.policy", 3, "compact")))
    assert r["error_code"] == E.INVALID_CONFIG, r
    [r] = c.configs.incremental_alter_configs(_ops("t", ("cleanup.policy", 4, "x")))
    assert r["error_code"] == E.INVALID_REQUEST, r
    assert dict(c.image.topic_config("t")) == {"cleanup.policy": "compact"}


def test_alter_configs_replaces_the_resources_whole_set(env):
    c, _, _ = env
    up(c, 1)
    c.replication.create_topics([topic("t", 1, 1, {"retention.ms": "100", "segment.ms": "9"})])

    def replace(name, configs, rtype=2, validate_only=False):
        resources = [{"resource_type": rtype, "resource_name": name,
                      "configs": [{"name": k, "value": v} for k, v in configs.items()]}]  # fmt: skip
        [r] = c.configs.alter_configs(resources, validate_only)
        return r

    assert replace("t", {"retention.bytes": "4096"}, validate_only=True)["error_code"] == 0
    assert dict(c.image.topic_config("t")) == {"retention.ms": "100", "segment.ms": "9"}
    r = replace("t", {"retention.bytes": "4096", "segment.ms": None})  # null: deleted too
    assert r["error_code"] == 0, r
    assert dict(c.image.topic_config("t")) == {"retention.bytes": "4096"}
    r = replace("t", {"retention.ms": "soon"})  # refused whole: nothing deleted either
    assert r["error_code"] == E.INVALID_CONFIG, r
    assert dict(c.image.topic_config("t")) == {"retention.bytes": "4096"}
    assert replace("nope", {})["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    key = "follower.replication.throttled.rate"
    assert replace("1", {key: "100"}, rtype=4)["error_code"] == 0
    assert dict(c.image.config_for(4, "1")) == {key: "100"}
    assert replace("1", {}, rtype=4)["error_code"] == 0
    assert dict(c.image.config_for(4, "1")) == {}


@pytest.mark.parametrize(
    ("key", "bad", "good"),
    [
        ("segment.bytes", "74", "75"),  # the log's minimum: one batch header + 14
        ("segment.bytes", str(2**31), str(2**31 - 1)),  # index positions are uint32
        ("max.message.bytes", "60", "61"),  # smaller than any record batch
        ("segment.index.bytes", "11", "12"),  # not even one index entry
    ],
)
def test_topic_configs_the_log_cannot_use_are_rejected(env, key, bad, good):
    c, _, log = env
    up(c, 1)
    end = log.end_offset()
    [r] = c.replication.create_topics([topic("t", 1, 1, {key: bad})])
    assert r["error_code"] == E.INVALID_CONFIG and key in r["error_message"], r
    assert log.end_offset() == end and "t" not in c.image.topics
    [r] = c.replication.create_topics([topic("t", 1, 1, {key: good})])
    assert r["error_code"] == 0, r
    assert c.image.topic_config("t")[key] == good
    [r] = c.configs.incremental_alter_configs(
        [
            {
                "resource_type": 2,
                "resource_name": "t",
                "configs": [{"name": key, "config_operation": 0, "value": bad}],
            }
        ]
    )
    assert r["error_code"] == E.INVALID_CONFIG and key in r["error_message"], r
    assert c.image.topic_config("t")[key] == good


def test_unclean_election_through_elect_leaders(env):
    """ElectLeaders type 1: an offline partition whose last ISR member is gone gets a live
    replica as leader with ISR = [it]; partitions with a leader need none; none live, none
    eligible; an unknown type is refused."""
    from client.errors import InvalidRequestError

    c, _, _ = env
    e = up(c, 1, 2)
    c.replication.create_topics([topic("u", assignments=[{"partition": 0, "broker_ids": [1, 2]}])])
    assert c.replication.elect_leaders(1, [("u", 0)])[0]["error_code"] == E.ELECTION_NOT_NEEDED
    # 2 leaves (ISR [1]) and comes back out of the ISR; then 1 leaves: offline, ISR [1]
    c.cluster.broker_heartbeat(2, e[2], c.last_written_offset, want_shutdown=True)
    e[2] = c.cluster.register_broker(2, "h", 2, None, "again")["broker_epoch"]
    c.cluster.broker_heartbeat(2, e[2], c.last_written_offset)
    c.cluster.broker_heartbeat(1, e[1], c.last_written_offset, want_shutdown=True)
    reg = c.image.partition("u", 0)
    assert (reg.leader, reg.isr) == (NO_LEADER, (1,))
    assert (
        c.replication.elect_leaders(0, [("u", 0)])[0]["error_code"]
        == E.PREFERRED_LEADER_NOT_AVAILABLE
    )
    res = c.replication.elect_leaders(1, [("u", 0), ("nope", 0)])
    assert [r["error_code"] for r in res] == [0, E.UNKNOWN_TOPIC_OR_PARTITION]
    reg = c.image.partition("u", 0)
    assert (reg.leader, reg.isr) == (2, (2,))
    assert c.replication.elect_leaders(1, [("u", 0)])[0]["error_code"] == E.ELECTION_NOT_NEEDED
    # nobody live: no eligible leader
    c.cluster.broker_heartbeat(2, e[2], c.last_written_offset, want_shutdown=True)
    res = c.replication.elect_leaders(1, [("u", 0)])
    assert res[0]["error_code"] == E.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert c.replication.elect_leaders(1, None) == []  # all partitions: only the elected are listed
    with pytest.raises(InvalidRequestError, match="election type"):
        c.replication.elect_leaders(7, None)


def test_auto_rebalance_respects_the_imbalance_percentage():
    """leader.imbalance.per.broker.percentage: a broker's partitions led elsewhere are moved
    back only when their share is above the percentage (Kafka's trigger)."""
    from controller.metadata.image import MetadataImage, PartitionRegistration, TopicImage
    from controller.quorum.replication import imbalanced_partitions

    def reg(replicas, leader):
        return PartitionRegistration(tuple(replicas), tuple(replicas), leader, 1, 1)

    parts = {p: reg([1, 2], 1) for p in range(10)}
    parts[0] = reg([1, 2], 2)  # 1 of broker 1's 10 preferred partitions led elsewhere: 10 %
    parts[10] = reg([2, 1], 1)  # broker 2's only preferred partition led elsewhere: 100 %
    image = MetadataImage(topics={"t": TopicImage("t", b"x" * 16, parts)})
    assert imbalanced_partitions(image, 10) == [("t", 10)]
    assert imbalanced_partitions(image, 9) == [("t", 0), ("t", 10)]
    assert imbalanced_partitions(image, 100) == []
