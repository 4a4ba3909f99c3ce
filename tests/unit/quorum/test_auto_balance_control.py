"""Automatic balancing in the QuorumController's tick (auto_balance_control.py): in node-add
mode a broker registered for the first time receives its share through reassignments (never
more than auto.balance.max.concurrent.moves in flight, each logged with its reason); in
continuous mode a broker fenced longer than auto.balance.unavailable.timeout.ms has its
replicas re-created on the others; off moves nothing; the moves are in the metadata log."""

from __future__ import annotations

import logging
import random
from collections import Counter

import pytest
from test_controller import FakeClock, beat, topic, up

from controller.quorum.controller import QuorumController
from controller.quorum.local import LocalMetadataLog
from controller.quorum.state import ControllerSettings


def _controller(tmp_path, **kw):
    clock = FakeClock()
    log = LocalMetadataLog(str(tmp_path / "meta"))
    settings = ControllerSettings(broker_session_timeout_ms=60_000, **kw)
    return QuorumController(log, settings, clock, random.Random(1)), clock, log


def _tick(c, clock):
    clock.advance(1000)
    c.tick()


def _complete_moves(c, epochs):
    """Each leader's AlterPartition bringing its partition's adding replicas into the ISR (as
    a caught-up follower does): the reassignments complete."""
    for name, p in c.image.reassigning_partitions():
        reg = c.image.partition(name, p)
        isr = list(reg.isr) + [r for r in reg.adding_replicas if r not in reg.isr]
        req = [{"name": name, "partitions": [{"partition": p, "leader_epoch": reg.leader_epoch,
                "new_isr": isr, "partition_epoch": reg.partition_epoch}]}]  # fmt: skip
        resp = c.replication.alter_partition(reg.leader, epochs[reg.leader], req)
        assert resp["topics"][0]["partitions"][0]["error_code"] == 0


def _load(c):
    return Counter(r for t in c.image.topics.values() for reg in t.partitions.values()
                   for r in reg.replicas)  # fmt: skip


def test_node_add_moves_a_share_onto_a_new_broker_within_the_limit(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="controller.quorum.auto_balance_control")
    c, clock, log = _controller(tmp_path, auto_balance_max_concurrent_moves=2)
    try:
        assert c.settings.auto_balance_mode == "node-add"  # the default
        epochs = up(c, 1, 2, 3)
        c.replication.create_topics([topic("t", 8, 3)])
        _tick(c, clock)
        assert c.image.reassigning_partitions() == []  # balanced: nothing moves
        epochs.update(up(c, 4))
        most = 0
        for _ in range(50):
            _tick(c, clock)
            most = max(most, len(c.image.reassigning_partitions()))
            if not c.image.reassigning_partitions() and 4 not in c.auto_balance.waiting:
                break
            _complete_moves(c, epochs)
            beat(c, epochs, 1, 2, 3, 4)
        assert most == 2  # moves ran, never more than the limit at once
        assert 4 not in c.auto_balance.waiting
        load = _load(c)
        assert load[4] == 24 // 4 and max(load.values()) - min(load.values()) <= 1, load
        for reg in c.image.topics["t"].partitions.values():
            assert len(set(reg.replicas)) == 3 and set(reg.isr) == set(reg.replicas)
        moved = [r.getMessage() for r in caplog.records if "auto-balance: moving" in r.getMessage()]
        assert len(moved) == 6 and all("broker 4 joined" in m for m in moved)
        # the moves went through the metadata log: a controller loading it sees the result
        other = QuorumController(log, ControllerSettings(), FakeClock(), random.Random(2))
        assert _load(other) == load
    finally:
        log.close()


def test_off_moves_nothing(tmp_path):
    c, clock, log = _controller(tmp_path, auto_balance_mode="off")
    try:
        up(c, 1, 2, 3)
        c.replication.create_topics([topic("t", 8, 3)])
        _tick(c, clock)
        up(c, 4)
        for _ in range(3):
            _tick(c, clock)
        assert c.image.reassigning_partitions() == [] and _load(c)[4] == 0
    finally:
        log.close()


def test_brokers_of_a_loaded_image_are_not_new(tmp_path):
    """What a new active controller loads counts as known (a decision: a broker registered
    just before a failover is not filled; `gregor cluster rebalance` evens it)."""
    c, clock, log = _controller(tmp_path)
    try:
        up(c, 1, 2, 3)
        c.replication.create_topics([topic("t", 8, 2)])
        _tick(c, clock)
        up(c, 4)
        c.load()  # as a new active controller does
        _tick(c, clock)
        assert c.auto_balance.waiting == set() and c.image.reassigning_partitions() == []
    finally:
        log.close()


def test_continuous_recreates_the_replicas_of_a_broker_fenced_too_long(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="controller.quorum.auto_balance_control")
    c, clock, log = _controller(
        tmp_path, auto_balance_mode="continuous", auto_balance_unavailable_timeout_ms=30_000
    )
    try:
        epochs = up(c, 1, 2, 3, 4)
        rows = [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 2, 4]]
        c.replication.create_topics([topic("t", assignments=[
            {"partition": i, "broker_ids": rs} for i, rs in enumerate(rows)])])  # fmt: skip
        _tick(c, clock)
        # broker 3 stops heartbeating: fenced after the session timeout
        for _ in range(61):
            _tick(c, clock)
            beat(c, epochs, 1, 2, 4)
        assert c.image.brokers[3].fenced
        fenced_at = c.auto_balance.fenced_since[3]
        while clock() - fenced_at < 29_000:
            _tick(c, clock)
            beat(c, epochs, 1, 2, 4)
            assert c.image.reassigning_partitions() == []  # not yet: within the timeout
        for _ in range(3):
            _tick(c, clock)
            beat(c, epochs, 1, 2, 4)
        assert len(c.image.reassigning_partitions()) == 3
        _complete_moves(c, epochs)
        for i in range(3):
            reg = c.image.partition("t", i)
            assert 3 not in reg.replicas and len(set(reg.replicas)) == 3, reg
            assert set(reg.isr) == set(reg.replicas)
        assert c.image.partition("t", 3).replicas == (1, 2, 4)
        moved = [r.getMessage() for r in caplog.records if "auto-balance: moving" in r.getMessage()]
        assert len(moved) == 3 and all("broker 3 unavailable" in m for m in moved)
    finally:
        log.close()


def test_continuous_replans_a_move_whose_target_broker_is_gone(tmp_path, caplog):
    """A move in flight onto a broker that then stays fenced past the timeout could never
    complete (that replica never joins the ISR): continuous mode replaces its target."""
    caplog.set_level(logging.INFO, logger="controller.quorum.auto_balance_control")
    c, clock, log = _controller(
        tmp_path, auto_balance_mode="continuous", auto_balance_unavailable_timeout_ms=30_000
    )
    try:
        epochs = up(c, 1, 2, 3, 4, 5)
        rows = [[1, 2, 3], [2, 3, 4], [3, 4, 1], [4, 1, 2]]
        c.replication.create_topics([topic("t", assignments=[
            {"partition": i, "broker_ids": rs} for i, rs in enumerate(rows)])])  # fmt: skip
        _tick(c, clock)
        [res] = c.reassignments.alter_partition_reassignments(
            [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [1, 2, 5]}]}]
        )
        assert res["partitions"][0]["error_code"] == 0, res
        assert c.image.partition("t", 0).target_replicas == (1, 2, 5)
        for _ in range(61):  # broker 5 stops heartbeating: fenced after the session timeout
            _tick(c, clock)
            beat(c, epochs, 1, 2, 3, 4)
        assert c.image.brokers[5].fenced
        fenced_at = c.auto_balance.fenced_since[5]
        while clock() - fenced_at < 29_000:
            _tick(c, clock)
            beat(c, epochs, 1, 2, 3, 4)
            assert c.image.partition("t", 0).target_replicas == (1, 2, 5)  # within the timeout
        for _ in range(3):
            _tick(c, clock)
            beat(c, epochs, 1, 2, 3, 4)
        target = c.image.partition("t", 0).target_replicas
        assert 5 not in target and len(set(target)) == 3, target
        _complete_moves(c, epochs)
        reg = c.image.partition("t", 0)
        assert 5 not in reg.replicas and not reg.reassigning, reg
        moved = [r.getMessage() for r in caplog.records if "auto-balance: moving" in r.getMessage()]
        assert any("t-0" in m and "broker 5 unavailable" in m for m in moved), moved
    finally:
        log.close()


def test_an_unknown_mode_is_refused(tmp_path):
    with pytest.raises(ValueError, match="off, node-add, continuous"):
        _controller(tmp_path, auto_balance_mode="sometimes")
