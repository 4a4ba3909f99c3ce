"""Static membership (group.instance.id) against a `gregor server` process: a member that
closes and comes back with the same instance id within its session timeout gets the same
partitions back, and the other member's assignment never changes meanwhile."""

from __future__ import annotations

import pytest
from helpers import wait_until

from client import Admin, Consumer


@pytest.fixture
def server(gregor_process):
    return gregor_process(
        "--override", "offsets.topic.num.partitions=2",
        "--override", "group.consumer.heartbeat.interval.ms=200",
        "--override", "group.consumer.session.timeout.ms=20000",
    )  # fmt: skip


def test_a_static_member_restarts_without_a_rebalance(server) -> None:
    with Admin(bootstrap_servers=server.bootstrap) as admin:
        admin.create_topic("s", partitions=4)
    changes: list = []
    other = Consumer(bootstrap_servers=server.bootstrap, group_id="st")
    try:
        other.subscribe(["s"], on_assign=lambda ps: changes.append(("assign", ps)),
                        on_revoke=lambda ps: changes.append(("revoke", ps)))  # fmt: skip
        first = Consumer(bootstrap_servers=server.bootstrap, group_id="st",
                         group_instance_id="worker-1")  # fmt: skip
        first.subscribe(["s"])

        def split(c: Consumer) -> bool:
            c.poll(20)
            other.poll(20)
            return len(c.assignment()) == 2 and len(other.assignment()) == 2

        wait_until(lambda: split(first), 60, "the two members to split the topic")
        mine = first.assignment()
        first.close()
        changes.clear()
        with Admin(bootstrap_servers=server.bootstrap) as admin:
            d = admin.describe_group("st")
            assert len(d.members) == 2  # the departed static member still holds its partitions
            epoch = d.group_epoch
        for _ in range(10):  # the other member sees no change while worker-1 restarts
            other.poll(50)
        assert len(other.assignment()) == 2
        second = Consumer(bootstrap_servers=server.bootstrap, group_id="st",
                          group_instance_id="worker-1")  # fmt: skip
        try:
            second.subscribe(["s"])
            wait_until(lambda: split(second), 60, "the restarted instance to get its partitions")
            assert second.assignment() == mine
            assert changes == []  # no revoke, no assign for the other member
            with Admin(bootstrap_servers=server.bootstrap) as admin:
                d = admin.describe_group("st")
                assert d.group_epoch == epoch and len(d.members) == 2
        finally:
            second.close()
    finally:
        other.close()
