"""Partition reassignment on the QuorumController (KIP-455): AlterPartitionReassignments starts
(union of replicas, adding/removing), the leader's ISR expansion completes it (leader moved off a
removed replica, removed replicas dropped), cancel reverts, the state is in the metadata log (a
new controller loading the log, a snapshot), and the errors are Kafka's."""

from __future__ import annotations

import os
import random

from test_controller import E, beat, env, topic, up  # noqa: F401  (env is a fixture)

from controller.metadata.image import PartitionRegistration
from controller.metadata.records import NO_LEADER
from controller.metadata.snapshot import load_snapshot, snapshot_bytes
from controller.quorum import reassignment
from controller.quorum.controller import QuorumController


def _move(c, name, p, replicas):
    [t] = c.reassignments.alter_partition_reassignments(
        [{"name": name, "partitions": [{"partition_index": p, "replicas": replicas}]}]
    )
    [r] = t["partitions"]
    return r["error_code"], r["error_message"]


def _expand(c, e, name, p, new_isr):
    """The leader's AlterPartition adding replicas to the ISR (as broker/replica/isr.py)."""
    reg = c.image.partition(name, p)
    req = [{"name": name, "partitions": [{"partition": p, "leader_epoch": reg.leader_epoch,
            "new_isr": list(new_isr), "partition_epoch": reg.partition_epoch}]}]  # fmt: skip
    resp = c.replication.alter_partition(reg.leader, e[reg.leader], req)
    return resp["topics"][0]["partitions"][0]["error_code"]


def _created(c, *replicas):
    c.replication.create_topics(
        [topic("t", assignments=[{"partition": 0, "broker_ids": list(replicas)}])]
    )
    return c.image.partition("t", 0)


def test_move_to_a_new_broker_completes_when_it_joins_the_isr(env):  # noqa: F811
    c, _, _ = env
    e = up(c, 1, 2, 3, 4)
    _created(c, 1, 2, 3)
    assert _move(c, "t", 0, [4, 2, 3]) == (0, None)
    reg = c.image.partition("t", 0)
    # the union, target first; the old leader still leads, the ISR is unchanged
    assert reg.replicas == (4, 2, 3, 1)
    assert (reg.adding_replicas, reg.removing_replicas) == ((4,), (1,))
    assert reg.target_replicas == (4, 2, 3) and reg.original_replicas == (2, 3, 1)
    assert reg.isr == (1, 2, 3) and reg.leader == 1
    listed = c.reassignments.list_partition_reassignments()
    assert listed == [{"name": "t", "partitions": [{"partition_index": 0,
                       "replicas": [4, 2, 3, 1], "adding_replicas": [4],
                       "removing_replicas": [1]}]}]  # fmt: skip
    # the new replica joins the ISR: in the same record, the reassignment completes and the
    # leader moves off the removed broker 1 to the first in-sync target replica
    epoch = reg.leader_epoch
    assert _expand(c, e, "t", 0, [1, 2, 3, 4]) == 0
    reg = c.image.partition("t", 0)
    assert reg.replicas == (4, 2, 3) and reg.isr == (2, 3, 4)
    assert not reg.reassigning and reg.leader == 4 and reg.leader_epoch == epoch + 1
    assert c.reassignments.list_partition_reassignments() == []


def test_an_isr_change_that_does_not_complete_leaves_the_move_in_flight(env):  # noqa: F811
    c, _, _ = env
    e = up(c, 1, 2, 3, 4, 5)
    _created(c, 1, 2, 3)
    assert _move(c, "t", 0, [1, 4, 5])[0] == 0
    assert _expand(c, e, "t", 0, [1, 2, 3, 4]) == 0
    reg = c.image.partition("t", 0)
    assert reg.isr == (1, 2, 3, 4) and reg.reassigning and reg.leader == 1
    # the leader stays (it is in the target); the removed replicas leave with the completion
    assert _expand(c, e, "t", 0, [1, 2, 3, 4, 5]) == 0
    reg = c.image.partition("t", 0)
    assert (reg.replicas, reg.isr, reg.leader) == ((1, 4, 5), (1, 4, 5), 1)
    assert not reg.reassigning


def test_a_shrink_or_reorder_completes_at_once(env):  # noqa: F811
    c, _, _ = env
    up(c, 1, 2, 3)
    _created(c, 1, 2, 3)
    assert _move(c, "t", 0, [3, 2, 1])[0] == 0
    reg = c.image.partition("t", 0)
    assert (reg.replicas, reg.leader, reg.reassigning) == ((3, 2, 1), 1, False)
    assert _move(c, "t", 0, [2, 3])[0] == 0  # RF 3 -> 2, every target replica is in sync
    reg = c.image.partition("t", 0)
    assert (reg.replicas, reg.isr, reg.leader, reg.reassigning) == ((2, 3), (2, 3), 2, False)


def test_cancel_reverts_to_the_original_replicas(env):  # noqa: F811
    c, _, _ = env
    e = up(c, 1, 2, 3, 4, 5)
    _created(c, 1, 2, 3)
    assert _move(c, "t", 0, [4, 5, 3])[0] == 0
    assert _expand(c, e, "t", 0, [1, 2, 3, 4]) == 0  # halfway: 4 in sync, 5 not yet
    assert _move(c, "t", 0, None) == (0, None)
    reg = c.image.partition("t", 0)
    # the original order is kept; the added replicas leave the replicas and the ISR
    assert (reg.replicas, reg.isr, reg.leader, reg.reassigning) == ((3, 1, 2), (1, 2, 3), 1, False)
    code, msg = _move(c, "t", 0, None)
    assert code == E.NO_REASSIGNMENT_IN_PROGRESS and "no reassignment" in msg


def test_cancel_moves_the_leader_back_when_an_added_replica_leads(env):  # noqa: F811
    """A preferred-leader election during the move gave the leadership to an added in-sync
    replica; cancelling elects an original in-sync replica."""
    c, _, _ = env
    e = up(c, 1, 2, 3, 4, 5)
    _created(c, 1, 2, 3)
    assert _move(c, "t", 0, [4, 5, 3])[0] == 0
    assert _expand(c, e, "t", 0, [1, 2, 3, 4]) == 0
    c.replication.elect_preferred_leaders([("t", 0)])
    reg = c.image.partition("t", 0)
    assert reg.leader == 4 and reg.reassigning  # the target's first replica, in sync
    assert _move(c, "t", 0, None)[0] == 0
    reg = c.image.partition("t", 0)
    assert (reg.replicas, reg.isr, reg.leader, reg.reassigning) == ((3, 1, 2), (1, 2, 3), 3, False)


def test_a_new_target_replaces_the_move_in_flight(env):  # noqa: F811
    """Kafka's rule: the new target is computed against the current (union) replicas, so a
    replica the first move was adding and the second leaves out is removed."""
    c, _, _ = env
    e = up(c, 1, 2, 3, 4, 5)
    _created(c, 1, 2, 3)
    assert _move(c, "t", 0, [4, 2, 3])[0] == 0
    assert _move(c, "t", 0, [5, 2, 3])[0] == 0
    reg = c.image.partition("t", 0)
    assert reg.replicas == (5, 2, 3, 4, 1)
    assert (reg.adding_replicas, reg.removing_replicas) == ((5,), (4, 1))
    assert _expand(c, e, "t", 0, [1, 2, 3, 5]) == 0
    reg = c.image.partition("t", 0)
    assert (reg.replicas, reg.isr, reg.leader, reg.reassigning) == ((5, 2, 3), (2, 3, 5), 5, False)


def test_errors_are_kafkas(env):  # noqa: F811
    c, clock, log = env
    e = up(c, 1, 2, 3, 4)
    _created(c, 1, 2, 3)
    clock.advance(600)
    beat(c, e, 1, 2, 3)
    clock.advance(600)
    assert c.cluster.check_sessions() == [4]  # 4 is fenced
    end = log.end_offset()
    for target, why in (
        ([], "non-empty"),
        ([1, 1, 2], "duplicate"),
        ([1, 2, 9], "not registered"),
        ([1, 2, 4], "fenced"),
        ("x", "non-empty list"),
    ):
        code, msg = _move(c, "t", 0, target)
        assert code == E.INVALID_REPLICA_ASSIGNMENT and why in msg, (target, msg)
    assert _move(c, "nope", 0, [1])[0] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert _move(c, "t", 7, [1])[0] == E.UNKNOWN_TOPIC_OR_PARTITION
    [t] = c.reassignments.alter_partition_reassignments(
        [
            {
                "name": "t",
                "partitions": [
                    {"partition_index": 0, "replicas": [3, 2, 1]},
                    {"partition_index": 0, "replicas": [2, 1, 3]},
                ],
            }
        ]
    )
    assert [r["error_code"] for r in t["partitions"]] == [0, E.INVALID_REQUEST]
    assert log.end_offset() > end  # only the valid reorder was written
    assert c.image.partition("t", 0).replicas == (3, 2, 1)


def test_the_state_is_in_the_metadata_log(env, tmp_path):  # noqa: F811
    """A new controller on the same log (a failover) and a snapshot both hold the move; the
    new controller completes a move that can complete at its first tick."""
    c, clock, log = env
    up(c, 1, 2, 3, 4)
    _created(c, 1, 2, 3)
    assert _move(c, "t", 0, [4, 2, 3])[0] == 0
    reg = c.image.partition("t", 0)
    assert load_snapshot(snapshot_bytes(c.image)).partition("t", 0) == reg
    # an ISR that holds the whole target while the move is in flight (as a controller that
    # died before completing would leave it); the next active controller completes it
    from controller.metadata.records import PartitionChange

    c.core.write([PartitionChange(c.image.topics["t"].topic_id, 0, isr=(1, 2, 3, 4))])
    c2 = QuorumController(log, c.settings, clock, random.Random(2))
    loaded = c2.image.partition("t", 0)
    assert loaded.reassigning and loaded.isr == (1, 2, 3, 4)
    assert c2.reassignments.list_partition_reassignments([("t", 0), ("t", 5)])[0]["partitions"][0][
        "adding_replicas"
    ] == [4]
    for b in (1, 2, 3, 4):  # a load counts every registered broker as just heard from
        assert b in c2.cluster.live()
    c2.tick()
    done = c2.image.partition("t", 0)
    assert (done.replicas, done.isr, done.leader, done.reassigning) == (
        (4, 2, 3),
        (2, 3, 4),
        4,
        False,
    )


def test_pure_rules():
    tid = b"\x01" * 16
    # the leader is being removed and no target replica in the ISR is live: wait
    reg = PartitionRegistration((4, 2, 1), (1, 2, 4), 1, 3, 7, (4,), (1,))
    assert reassignment.completion(tid, 0, reg, live={1}) is None
    ch = reassignment.completion(tid, 0, reg, live={1, 2})
    assert ch is not None and (ch.replicas, ch.isr, ch.leader) == ((4, 2), (2, 4), 2)
    assert (ch.adding_replicas, ch.removing_replicas) == ((), ())
    # an offline partition completes and stays offline (the ordinary election brings it back)
    off = PartitionRegistration((4, 2, 1), (1, 2, 4), NO_LEADER, 3, 7, (4,), (1,))
    ch = reassignment.completion(tid, 0, off, live=set())
    assert ch is not None and ch.leader is None and ch.replicas == (4, 2)
    # cancelling when only added replicas are in sync would lose the data: refused
    only_new = PartitionRegistration((4, 1), (4,), 4, 3, 7, (4,), (1,))
    try:
        reassignment.cancel(tid, 0, only_new, live={1, 4})
    except reassignment.ReassignmentRefused as e:
        assert "no original replica" in str(e)
    else:
        raise AssertionError("cancel must be refused")
    # no reassignment in flight: nothing to complete
    assert reassignment.completion(tid, 0, PartitionRegistration((1,), (1,), 1, 0, 0), {1}) is None


def test_the_throttle_is_the_one_dynamic_broker_config(env):  # noqa: F811
    c, _, _ = env
    up(c, 1, 2)

    def alter(name, key, value, op=0):
        [r] = c.configs.incremental_alter_configs(
            [
                {
                    "resource_type": 4,
                    "resource_name": name,
                    "configs": [{"name": key, "config_operation": op, "value": value}],
                }
            ]
        )
        return r["error_code"], r["error_message"]

    key = "follower.replication.throttled.rate"
    assert alter("", key, "1048576") == (0, None)
    assert alter("2", key, "1000") == (0, None)
    assert dict(c.image.config_for(4, "")) == {key: "1048576"}
    assert dict(c.image.config_for(4, "2")) == {key: "1000"}
    assert alter("2", key, None, op=1) == (0, None)
    assert dict(c.image.config_for(4, "2")) == {}
    for value in ("0", "-5", "fast", ""):
        code, msg = alter("", key, value)
        assert code == E.INVALID_CONFIG and "positive number of bytes" in msg, value
    code, msg = alter("", "leader.replication.throttled.rate", "1000")
    assert code == E.INVALID_CONFIG and "follower side" in msg
    code, msg = alter("1", "log.retention.ms", "5")
    assert code == E.INVALID_CONFIG and "restart it" in msg


def test_random_moves_keep_the_invariants(env):  # noqa: F811
    """Random starts, cancels, ISR expansions and shrinks (by the leader, through
    AlterPartition) and preferred elections on one partition over six brokers. After every
    step: replicas = target + removing; ISR within the replicas and holding the leader; no
    replica enters the ISR but by an expansion (nothing acknowledged can be lost); a move whose
    target is all in sync has completed. Prints its seed."""
    seed = int(os.environ.get("GREGOR_SEED", random.randrange(1 << 30)))
    print(f"seed={seed} (GREGOR_SEED={seed} to replay)")
    rng = random.Random(seed)
    c, _, _ = env
    e = up(c, 1, 2, 3, 4, 5, 6)
    _created(c, 1, 2, 3)
    for step in range(200):
        before = c.image.partition("t", 0)
        entered: set[int] = set()
        op = rng.random()
        if op < 0.3:
            target = rng.sample(range(1, 7), rng.randint(1, 4))
            code, msg = _move(c, "t", 0, target)
            assert code == 0, (seed, step, msg)
        elif op < 0.4:
            code, _msg = _move(c, "t", 0, None)
            if not before.reassigning:
                assert code == E.NO_REASSIGNMENT_IN_PROGRESS, (seed, step)
            elif set(before.original_replicas) & set(before.isr):
                assert code == 0, (seed, step, _msg)
            else:  # only added replicas in sync: refused, nothing changes
                assert code == E.INVALID_REPLICA_ASSIGNMENT, (seed, step)
        elif op < 0.75:
            out = [r for r in before.replicas if r not in before.isr]
            if out:
                r = rng.choice(out)
                assert _expand(c, e, "t", 0, [*before.isr, r]) == 0, (seed, step)
                entered = {r}
        elif op < 0.9:
            others = [r for r in before.isr if r != before.leader]
            if others:
                gone = rng.choice(others)
                new_isr = [r for r in before.isr if r != gone]
                assert _expand(c, e, "t", 0, new_isr) == 0, (seed, step)
        else:
            c.replication.elect_preferred_leaders([("t", 0)])
        reg = c.image.partition("t", 0)
        target = reg.target_replicas
        where = (seed, step, before, reg)
        assert reg.replicas == target + reg.removing_replicas, where
        assert set(reg.adding_replicas) <= set(target), where
        assert not set(reg.removing_replicas) & set(target), where
        assert reg.isr and set(reg.isr) <= set(reg.replicas), where
        assert reg.leader in reg.isr, where
        assert set(reg.isr) <= set(before.isr) | entered, where
        assert reg.leader in set(before.isr) | entered, where
        if reg.reassigning:
            assert not set(target) <= set(reg.isr), where  # all brokers live: it completes
