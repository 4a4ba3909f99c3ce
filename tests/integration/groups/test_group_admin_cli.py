"""Admin.list_groups / describe_group (members, committed offsets, log end offsets, lag in one
call) and the CLI: `gregor groups list|describe [--json]`, `gregor consume TOPIC --group G`
resuming where the group left off; against a `gregor server` process."""

from __future__ import annotations

import json
import subprocess

import pytest
from helpers import gregor_command, wait_until

from client import Admin, Consumer, Producer, TopicPartition
from client.errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    InvalidTopicError,
    UnknownMemberIdError,
)


def gregor(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*gregor_command(), *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def server(gregor_process):
    return gregor_process(
        "--override", "offsets.topic.num.partitions=3",
        "--override", "group.consumer.heartbeat.interval.ms=200",
    )  # fmt: skip


def test_consume_with_a_group_resumes_and_describe_shows_the_lag(server) -> None:
    bs = ["--bootstrap-server", server.bootstrap]
    with Admin(bootstrap_servers=server.bootstrap) as admin:
        admin.create_topic("t", partitions=3)
    with Producer(bootstrap_servers=server.bootstrap) as p:
        for i in range(30):
            p.send("t", b"v%02d" % i, partition=i % 3)
        p.flush()
    first = gregor("consume", "t", "--group", "G", "--from-beginning", "--max-messages", "10", *bs)
    assert first.returncode == 0, first.stderr
    assert len(first.stdout.split()) == 10

    with Admin(bootstrap_servers=server.bootstrap) as admin:
        assert [(g.group_id, g.state) for g in admin.list_groups()] == [("G", "empty")]
        d = admin.describe_group("G")
        assert d.state == "empty" and d.members == []
        assert sum(p.committed_offset or 0 for p in d.partitions) == 10
        assert all(p.log_end_offset == 10 for p in d.partitions)
        assert d.total_lag == 20
        with pytest.raises(GroupIdNotFoundError):
            admin.describe_group("nobody")

    table = gregor("groups", "describe", "G", *bs)
    assert table.returncode == 0, table.stderr
    assert "TOTAL LAG 20" in table.stdout
    rows = [line.split() for line in table.stdout.splitlines() if line.startswith("t ")]
    assert len(rows) == 3 and all(r[3] == "10" for r in rows), table.stdout
    as_json = json.loads(gregor("groups", "describe", "G", "--json", *bs).stdout)
    assert as_json["total_lag"] == 20 and len(as_json["partitions"]) == 3
    listed = gregor("groups", "list", *bs)
    assert listed.stdout.split() == ["G", "empty"], listed

    second = gregor("consume", "t", "--group", "G", "--max-messages", "20", *bs)
    assert second.returncode == 0, second.stderr
    seen = first.stdout.split() + second.stdout.split()
    assert sorted(seen) == [f"v{i:02d}" for i in range(30)]  # resumed: none twice, none lost
    assert json.loads(gregor("groups", "describe", "G", "--json", *bs).stdout)["total_lag"] == 0


def test_describe_shows_members_and_their_partitions(server) -> None:
    with Admin(bootstrap_servers=server.bootstrap) as admin:
        admin.create_topic("m", partitions=4)
        revoked: list = []
        with Consumer(bootstrap_servers=server.bootstrap, group_id="live") as c:
            c.subscribe(["m"], on_revoke=revoked.extend)
            wait_until(lambda: c.poll(50) is not None and len(c.assignment()) == 4, 60,
                       "the member to own every partition")  # fmt: skip
            c.commit({TopicPartition("m", 0): 0})
            d = admin.describe_group("live")
            assert d.state == "stable" and len(d.members) == 1
            m = d.members[0]
            assert m.subscribed_topics == ["m"] and len(m.assignment) == 4
            assert m.assignment == m.target_assignment
            assert {p.partition: p.member_id for p in d.partitions} == dict.fromkeys(
                range(4), m.member_id
            )
            assert [p.committed_offset for p in d.partitions] == [0, None, None, None]
            assert [(g.group_id, g.state) for g in admin.list_groups()] == [("live", "stable")]
            # unsubscribe() commits, calls on_revoke here and leaves at once
            c.unsubscribe()
            assert sorted(tp.partition for tp in revoked) == [0, 1, 2, 3]
            assert admin.describe_group("live").members == []
            assert c.assignment() == set()
            c.subscribe(["m"])  # and can join again, as a new member
            wait_until(lambda: c.poll(50) is not None and len(c.assignment()) == 4, 60,
                       "the member to own every partition again")  # fmt: skip
            assert len(admin.describe_group("live").members) == 1
        # close() left the group at once
        assert admin.describe_group("live").members == []
    # Only the coordinator writes __consumer_offsets.
    with Producer(bootstrap_servers=server.bootstrap) as p:
        with pytest.raises(InvalidTopicError, match="internal"):
            p.send("__consumer_offsets", b"junk", partition=0).result(30)


def test_reset_alter_delete_offsets_and_delete_group(server) -> None:
    bs = ["--bootstrap-server", server.bootstrap]
    with Admin(bootstrap_servers=server.bootstrap) as admin:
        admin.create_topic("r", partitions=2)
    with Producer(bootstrap_servers=server.bootstrap) as p:
        for i in range(20):
            p.send("r", b"x", partition=i % 2)
        p.flush()
    tps = [TopicPartition("r", 0), TopicPartition("r", 1)]
    with Admin(bootstrap_servers=server.bootstrap) as admin:
        admin.alter_group_offsets("R", {tps[0]: 3, tps[1]: 4})
        assert [p.committed_offset for p in admin.describe_group("R").partitions] == [3, 4]
        # dry run: prints, writes nothing
        dry = gregor("groups", "reset-offsets", "--group", "R", "--topic", "r", "--shift-by",
                     "-2", *bs)  # fmt: skip
        assert dry.returncode == 0, dry.stderr
        assert "dry run" in dry.stdout and "r  0  3  1" in dry.stdout, dry.stdout
        assert [p.committed_offset for p in admin.describe_group("R").partitions] == [3, 4]
        done = gregor("groups", "reset-offsets", "--group", "R", "--topic", "r", "--to-offset",
                      "99", "--execute", "--json", *bs)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert [r["new"] for r in json.loads(done.stdout)] == [10, 10]  # clamped to the end
        assert [p.committed_offset for p in admin.describe_group("R").partitions] == [10, 10]
        gregor("groups", "reset-offsets", "--group", "R", "--topic", "r", "--to-earliest",
               "--execute", *bs)  # fmt: skip
        assert admin.describe_group("R").total_lag == 20
        admin.delete_group_offsets("R", [tps[1]])
        assert [(p.partition, p.committed_offset) for p in admin.describe_group("R").partitions
                ] == [(0, 0)]  # fmt: skip
        # a group with a member: no delete, no reset, no alter
        with Consumer(bootstrap_servers=server.bootstrap, group_id="R") as c:
            c.subscribe(["r"])
            wait_until(lambda: c.poll(50) is not None and len(c.assignment()) == 2, 60,
                       "the member to join")  # fmt: skip
            refused = gregor("groups", "delete", "R", *bs)
            assert refused.returncode == 1 and "NON_EMPTY_GROUP" in refused.stderr, refused
            busy = gregor("groups", "reset-offsets", "--group", "R", "--topic", "r",
                          "--to-latest", "--execute", *bs)  # fmt: skip
            assert busy.returncode == 1 and "active member" in busy.stderr, busy.stderr
            with pytest.raises(UnknownMemberIdError):
                admin.alter_group_offsets("R", {tps[0]: 1})
            with pytest.raises(GroupSubscribedToTopicError):
                admin.delete_group_offsets("R", [tps[0]])
        deleted = gregor("groups", "delete", "R", *bs)
        assert deleted.returncode == 0, deleted.stderr
        with pytest.raises(GroupIdNotFoundError):
            admin.describe_group("R")
        assert admin.list_groups() == []
