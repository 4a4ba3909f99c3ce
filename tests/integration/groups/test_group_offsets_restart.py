"""Committed offsets live in __consumer_offsets: a restarted `gregor server` loads them from
the log before it answers for the group, and a consumer of the group resumes there. Also an
assign()-mode consumer with a group_id commits (explicitly, and by auto-commit on close)."""

from __future__ import annotations

import signal

from helpers import wait_until

from client import Admin, Consumer, Producer, TopicPartition

OVERRIDES = ("--override", "offsets.topic.num.partitions=2",
             "--override", "group.consumer.heartbeat.interval.ms=200")  # fmt: skip


def test_offsets_survive_a_restart_and_the_group_resumes(gregor_process, tmp_path) -> None:
    data = tmp_path / "data"
    server = gregor_process(*OVERRIDES, data_dir=data)
    with Admin(bootstrap_servers=server.bootstrap) as admin:
        admin.create_topic("r", partitions=2)
    with Producer(bootstrap_servers=server.bootstrap) as p:
        for i in range(20):
            p.send("r", b"%02d" % i, partition=i % 2)
        p.flush()
    tps = [TopicPartition("r", 0), TopicPartition("r", 1)]
    with Consumer(bootstrap_servers=server.bootstrap, group_id="keep",
                  auto_offset_reset="earliest", enable_auto_commit=False) as c:  # fmt: skip
        c.subscribe(["r"])
        got: list = []
        wait_until(lambda: got.extend(c.poll(100)) or len(got) == 20, 60, "all 20 records")
        c.commit({tps[0]: 4, tps[1]: 7})
        assert c.committed(tps) == {tps[0]: 4, tps[1]: 7}
    # SIGKILL: no clean shutdown; the commit was acknowledged, so it is in the log.
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(10)
    server = gregor_process(*OVERRIDES, data_dir=data)
    assert "loaded" in wait_until(
        lambda: next((ln for ln in server.stderr().splitlines() if "loaded" in ln
                      and "__consumer_offsets" in ln), None), 30, "the coordinator's load line",
    )  # fmt: skip
    with Consumer(bootstrap_servers=server.bootstrap, group_id="keep",
                  enable_auto_commit=False) as c:  # fmt: skip
        assert c.committed(tps) == {tps[0]: 4, tps[1]: 7}
        c.subscribe(["r"])
        got = []
        wait_until(lambda: got.extend(c.poll(100)) or len(got) == 10 - 4 + 10 - 7, 60,
                   "the records after the committed offsets")  # fmt: skip
        firsts = {tp.partition: min(r.offset for r in got if r.partition == tp.partition)
                  for tp in tps}  # fmt: skip
        assert firsts == {0: 4, 1: 7}


def test_assign_mode_consumer_commits_to_its_group(gregor_process) -> None:
    server = gregor_process(*OVERRIDES)
    with Admin(bootstrap_servers=server.bootstrap) as admin:
        admin.create_topic("a", partitions=1)
    with Producer(bootstrap_servers=server.bootstrap) as p:
        for i in range(5):
            p.send("a", b"x%d" % i, partition=0).result(30)
    tp = TopicPartition("a", 0)
    with Consumer(bootstrap_servers=server.bootstrap, group_id="solo",
                  auto_offset_reset="earliest") as c:  # fmt: skip
        c.assign([tp])
        got: list = []
        wait_until(lambda: got.extend(c.poll(100)) or len(got) == 5, 60, "5 records")
        c.commit({tp: 2})
        assert c.committed([tp]) == {tp: 2}
    # close() auto-committed the position (5)
    with Consumer(bootstrap_servers=server.bootstrap, group_id="solo") as c:
        assert c.committed([tp]) == {tp: 5}
