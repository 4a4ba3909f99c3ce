"""Automatic balancing (auto.balance.mode) across real processes: 3 `gregor controller` and 3
`gregor broker` processes, a topic of 3 partitions (RF 3) on brokers 4, 5, 6, under acks=all
load from an idempotent producer writing to every partition.

- node-add (the default): a 4th broker started against the running cluster receives its share
  (2 of the 9 replicas) with no command;
- continuous (unavailable timeout 3 s): a broker stopped for good has its replicas re-created
  on the others, the replication factor restored.

Each checks the history of every partition: every acknowledged record is at its acknowledged
offset (nothing lost), no value twice (idempotence), values in the order sent.
"""

from __future__ import annotations

import signal
from collections import Counter

import pytest
from cluster_history import Load, check_history
from helpers import wait_until

from client import Admin

pytestmark = pytest.mark.slow

OVERRIDES = {"replica.lag.time.max.ms": 10_000, "replica.fetch.backoff.ms": 200}
TOPIC = "ab"
PARTITIONS = 3


def _placement(admin: Admin) -> dict[int, tuple[list[int], list[int]]]:
    return {
        p.partition: (list(p.replicas), list(p.isr)) for p in admin.describe_topic(TOPIC).partitions
    }


def _start(controller_quorum, brokers, tmp_path, **controller) -> tuple:
    q = controller_quorum(**{"broker.session.timeout.ms": 3000, **controller})
    q.start_all()
    q.wait_leader(10, "a controller leader")
    d = tmp_path / "brokers"
    d.mkdir()
    b = brokers(d, q.voters, [4, 5, 6, 7], OVERRIDES)
    b.start_all((4, 5, 6))
    with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
        wait_until(
            lambda: {x.node_id for x in admin.describe_cluster().brokers} == {4, 5, 6},
            30,
            "brokers 4, 5, 6 unfenced",
        )
        admin.create_topic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        wait_until(
            lambda: (pl := _placement(admin)) and all(len(i) == 3 for _, i in pl.values()),
            30,
            "every partition in sync",
        )
    return q, b


def _settled(admin: Admin, brokers: set[int]):
    """The placement once no move is in flight, every replica on `brokers` and in sync."""
    if admin.list_partition_reassignments():
        return None
    pl = _placement(admin)
    for rs, isr in pl.values():
        if not set(rs) <= brokers or sorted(isr) != sorted(rs) or len(rs) != 3:
            return None
    return pl


def test_a_fourth_broker_receives_its_share_with_no_command(
    controller_quorum, brokers, tmp_path
) -> None:
    _q, b = _start(controller_quorum, brokers, tmp_path)
    load = Load(b.bootstrap_all(), TOPIC, PARTITIONS, batch=30)
    try:
        load.wait_acked(300)
        with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
            b.start(7)
            pl = wait_until(
                lambda: (
                    (pl := _settled(admin, {4, 5, 6, 7}))
                    and sum(7 in rs for rs, _ in pl.values()) == 2
                    and pl
                ),
                90,
                "broker 7 holding 2 replicas, in sync, no move in flight",
            )
            counts = Counter(r for rs, _ in pl.values() for r in rs)
            assert counts[7] == 2 and max(counts.values()) - min(counts.values()) <= 1, counts
        load.wait_acked(300)
    finally:
        load.stop()
    check_history(b.bootstrap_all(), load, minimum=300)


@pytest.mark.long  # (the planner and controller loop: tests/unit/quorum/test_auto_balance_*)
def test_continuous_recreates_a_stopped_brokers_replicas(
    controller_quorum, brokers, tmp_path
) -> None:
    _q, b = _start(
        controller_quorum,
        brokers,
        tmp_path,
        **{"auto.balance.mode": "continuous", "auto.balance.unavailable.timeout.ms": 3000},
    )
    load = Load(b.bootstrap_all(), TOPIC, PARTITIONS, batch=30)
    try:
        load.wait_acked(300)
        with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
            b.start(7)
            wait_until(
                lambda: (
                    (pl := _settled(admin, {4, 5, 6, 7}))
                    and sum(7 in rs for rs, _ in pl.values()) == 2
                ),
                90,
                "broker 7 filled",
            )  # (the placement before broker 7 got anything is "settled" too)
            b.stop(5, signal.SIGKILL)  # gone for good
            pl = wait_until(
                lambda: _settled(admin, {4, 6, 7}), 120, "broker 5's replicas re-created"
            )
            assert all(5 not in rs for rs, _ in pl.values())
        load.wait_acked(300)
    finally:
        load.stop()
    check_history(b.bootstrap_all(), load, minimum=300)
