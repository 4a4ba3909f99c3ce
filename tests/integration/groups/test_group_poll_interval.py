"""max.poll.interval.ms: a member that stops calling poll() leaves its group (its partitions go
to the member that keeps polling), a commit it makes late is refused, and its next poll() calls
on_lost and rejoins; against a `gregor server` process."""

from __future__ import annotations

import pytest
from helpers import wait_until

from client import Admin, Consumer, TopicPartition
from client.errors import UnknownMemberIdError


@pytest.fixture
def server(gregor_process):
    return gregor_process(
        "--override", "offsets.topic.num.partitions=2",
        "--override", "group.consumer.heartbeat.interval.ms=200",
    )  # fmt: skip


def test_a_member_that_stops_polling_leaves_and_its_late_commit_is_refused(server) -> None:
    with Admin(bootstrap_servers=server.bootstrap) as admin:
        admin.create_topic("p", partitions=4)
        lost: list = []
        slow = Consumer(bootstrap_servers=server.bootstrap, group_id="pi",
                        max_poll_interval_ms=2000, enable_auto_commit=False)  # fmt: skip
        busy = Consumer(bootstrap_servers=server.bootstrap, group_id="pi")
        try:
            slow.subscribe(["p"], on_lost=lost.extend)
            busy.subscribe(["p"])

            def split() -> bool:
                slow.poll(20)
                busy.poll(20)
                return len(slow.assignment()) == 2 and len(busy.assignment()) == 2

            wait_until(split, 60, "the two members to split the topic")
            had = slow.assignment()
            # slow stops polling: after max.poll.interval.ms it leaves, busy takes everything
            wait_until(lambda: busy.poll(50) is not None and len(busy.assignment()) == 4, 60,
                       "the polling member to take every partition")  # fmt: skip
            assert len(admin.describe_group("pi").members) == 1
            with pytest.raises(UnknownMemberIdError):
                slow.commit({TopicPartition("p", 0): 1})
            # its next poll() runs on_lost and rejoins
            wait_until(split, 60, "the slow member to rejoin and get its share")
            assert sorted(lost) == sorted(had)
        finally:
            slow.close()
            busy.close()
