"""Consumer groups against a real `gregor server` process (issue 13): members of one group on a
6-partition topic share it with each partition owned by exactly one member at any time (checked
from a timestamped log of the assignment callbacks), every record is consumed once when each
commit follows processing, a member that closes hands its partitions over, a SIGKILLed member's
partitions move after the session timeout and their new owner starts at the last committed
offset, and a commit with a stale member epoch is refused."""

from __future__ import annotations

import itertools
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import RawClient, wait_until

from client import Admin, Consumer, Producer, TopicPartition
from client.errors import ErrorCode

TOPIC = "events"
PARTITIONS = 6
SESSION_MS = 4000


@pytest.fixture
def server(gregor_process):
    return gregor_process(
        "--override", "offsets.topic.num.partitions=3",
        "--override", "group.consumer.heartbeat.interval.ms=200",
        "--override", f"group.consumer.session.timeout.ms={SESSION_MS}",
    )  # fmt: skip


def _produce(bootstrap: str, start: int, n: int) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        for i in range(start, start + n):
            p.send(TOPIC, b"%06d" % i, partition=i % PARTITIONS)
        p.flush()


class Member:
    """A group consumer in a thread: poll, process (record the values), commit, repeat.
    Its callbacks append (monotonic time, member, kind, partition) to the shared log."""

    def __init__(self, name: str, bootstrap: str, log: list, group: str = "g") -> None:
        self.name = name
        self.log = log
        self.values: list[bytes] = []
        self.errors: list[BaseException] = []
        self.stop = threading.Event()
        self.consumer = Consumer(
            bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
            auto_offset_reset="earliest",
        )  # fmt: skip
        self.consumer.subscribe([TOPIC], on_assign=self._assigned, on_revoke=self._revoked)
        self.thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)
        self.thread.start()

    def _assigned(self, tps: list[TopicPartition]) -> None:
        now = time.monotonic()  # owning starts when on_assign is called
        self.log.extend((now, self.name, "assign", tp.partition) for tp in tps)

    def _revoked(self, tps: list[TopicPartition]) -> None:
        now = time.monotonic()  # ... and ends when on_revoke returns
        self.log.extend((now, self.name, "revoke", tp.partition) for tp in tps)

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                records = self.consumer.poll(timeout_ms=100)
                if records:
                    self.values.extend(r.value for r in records)
                    self.consumer.commit()  # after processing
        except BaseException as exc:  # surfaced by the test
            self.errors.append(exc)

    def owned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive()
        self.consumer.close()
        self.log.append((time.monotonic(), self.name, "closed", -1))


def _check_single_owner(log: list) -> None:
    """From the callback log: no partition is owned by two members at any moment."""
    open_at: dict[tuple[str, int], float] = {}
    intervals: dict[int, list[tuple[float, float, str]]] = {}
    for ts, name, kind, p in sorted(log):
        if kind == "assign":
            assert (name, p) not in open_at, f"{name} assigned {p} twice"
            open_at[(name, p)] = ts
        elif kind == "revoke":
            start = open_at.pop((name, p))
            intervals.setdefault(p, []).append((start, ts, name))
    for (name, p), start in open_at.items():
        intervals.setdefault(p, []).append((start, float("inf"), name))
    for p, spans in intervals.items():
        spans.sort()
        for (_s1, e1, n1), (s2, _e2, n2) in itertools.pairwise(spans):
            assert e1 <= s2, f"partition {p} owned by {n1} and {n2} at once ({e1} > {s2})"


def _balanced(members: list[Member]) -> bool:
    for m in members:
        assert not m.errors, f"member {m.name} failed: {m.errors!r}"
    owned = [m.owned() for m in members]
    every = sorted(p for o in owned for p in o)
    return every == list(range(PARTITIONS)) and max(map(len, owned)) - min(map(len, owned)) <= 1


def test_members_share_partitions_once_each_and_consume_everything(server) -> None:
    with Admin(bootstrap_servers=server.bootstrap) as admin:
        admin.create_topic(TOPIC, partitions=PARTITIONS)
    log: list = []
    members = [Member("a", server.bootstrap, log), Member("b", server.bootstrap, log)]
    try:
        _produce(server.bootstrap, 0, 600)
        wait_until(lambda: _balanced(members), 60, "two members to split the topic")
        wait_until(lambda: sum(len(m.values) for m in members) >= 300, 60, "half the records")
        members.append(Member("c", server.bootstrap, log))
        _produce(server.bootstrap, 600, 600)
        wait_until(lambda: _balanced(members), 60, "three members to split the topic")
        assert all(len(m.owned()) == 2 for m in members)
        wait_until(lambda: sum(len(m.values) for m in members) >= 1200, 60, "every record")
        # c closes: its partitions go to a and b, which read what is produced next.
        c = members.pop()
        c_partitions = c.owned()
        c.close()
        wait_until(lambda: _balanced(members), 60, "a and b to take c's partitions")
        _produce(server.bootstrap, 1200, 600)
        wait_until(lambda: sum(len(m.values) for m in [*members, c]) >= 1800, 60, "the rest")
        taken = {p for m in members for p in m.owned()}
        assert c_partitions <= taken
        for m in members:
            assert not m.errors, m.errors
        values = [v for m in [*members, c] for v in m.values]
        assert sorted(values) == [b"%06d" % i for i in range(1800)], "lost or duplicated"
    finally:
        for m in members:
            m.close()
    _check_single_owner(log)
    # c's partitions moved only after c revoked them, each to exactly one member.
    revoked_by_c = [p for _ts, n, k, p in log if n == "c" and k == "revoke"]
    assert sorted(revoked_by_c) == sorted(c_partitions)


def test_killed_member_loses_partitions_after_session_timeout(server, tmp_path: Path) -> None:
    with Admin(bootstrap_servers=server.bootstrap) as admin:
        admin.create_topic(TOPIC, partitions=PARTITIONS)
    _produce(server.bootstrap, 0, 300)
    child = Path(__file__).with_name("group_member_child.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with open(tmp_path / "child.stderr", "wb") as child_stderr:  # the child keeps its own copy
        proc = subprocess.Popen(
            [sys.executable, str(child), server.bootstrap, TOPIC, "g"],
            stdout=subprocess.PIPE, stderr=child_stderr, env=env,
        )  # fmt: skip
    lines: queue.Queue = queue.Queue()
    threading.Thread(
        target=lambda: [lines.put(json.loads(x)) for x in proc.stdout],
        daemon=True,  # type: ignore[union-attr]
    ).start()
    committed: dict[int, int] = {}
    log: list = []
    survivor: Member | None = None
    try:

        def child_committed_all() -> bool:
            while not lines.empty():
                ev = lines.get()
                if ev["event"] == "commit":
                    committed.update({int(k): v for k, v in ev["offsets"].items()})
            return sum(committed.values()) >= 300

        wait_until(child_committed_all, 60, "the child to consume and commit everything")
        survivor = Member("s", server.bootstrap, log)
        wait_until(lambda: len(survivor.owned()) == 3, 60, "the survivor to get half")
        child_owned = set(range(PARTITIONS)) - survivor.owned()
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        killed_at = time.monotonic()
        _produce(server.bootstrap, 300, 300)  # half of it in the dead member's partitions
        with Consumer(bootstrap_servers=server.bootstrap, group_id="g") as probe:
            at_kill = probe.committed([TopicPartition(TOPIC, p) for p in child_owned])
        first_read: dict[int, int] = {}

        def survivor_took_over() -> bool:
            return survivor.owned() == set(range(PARTITIONS))

        wait_until(survivor_took_over, SESSION_MS / 1000 + 30, "the session timeout to move them")
        moved_after = time.monotonic() - killed_at
        assert moved_after >= SESSION_MS / 1000 * 0.5, moved_after  # not before the timeout
        every = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        wait_until(
            lambda: set(survivor.consumer.committed(every).values()) == {600 // PARTITIONS},
            60, "the survivor to read and commit the rest",
        )  # fmt: skip
        # The survivor read the child's partitions from the offsets committed at the kill.
        # (values are %06d of i, with partition i % 6; offsets within a partition are i // 6)
        for v in survivor.values:
            i = int(v)
            p = i % PARTITIONS
            if p in child_owned:
                first_read[p] = min(first_read.get(p, i // PARTITIONS), i // PARTITIONS)
        for p in child_owned:
            start = at_kill[TopicPartition(TOPIC, p)]
            assert start is not None
            assert first_read[p] == start, (p, first_read.get(p), start)
        assert not survivor.errors, survivor.errors
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if survivor is not None:
            survivor.close()


def test_commit_with_a_stale_member_epoch_is_refused(server) -> None:
    with Admin(bootstrap_servers=server.bootstrap) as admin:
        admin.create_topic(TOPIC, partitions=PARTITIONS)
    with RawClient(server.address, timeout=30) as raw:
        find = {"key_type": 0, "coordinator_keys": ["g"]}
        wait_until(
            lambda: raw.request(10, 0, find)["coordinators"][0]["error_code"] == 0,
            60, "a coordinator",
        )  # fmt: skip
        join = {"group_id": "g", "member_id": "m1", "member_epoch": 0,
                "subscribed_topic_names": [TOPIC]}  # fmt: skip

        def joined() -> dict | None:
            r = raw.request(68, 0, join)
            return r if r["error_code"] == 0 else None

        resp = wait_until(joined, 60, "the member to join")
        epoch = resp["member_epoch"]
        assert epoch > 0 and len(resp["assignment"][0]["partitions"]) == PARTITIONS

        def commit(member_epoch: int, member_id: str = "m1") -> int:
            body = {"group_id": "g", "member_id": member_id, "member_epoch": member_epoch,
                    "topics": [{"name": TOPIC, "partitions": [
                        {"partition": 0, "committed_offset": 5}]}]}  # fmt: skip
            return raw.request(8, 0, body)["topics"][0]["partitions"][0]["error_code"]

        assert commit(epoch) == 0
        assert commit(epoch - 1) == ErrorCode.STALE_MEMBER_EPOCH
        assert commit(epoch, "intruder") == ErrorCode.UNKNOWN_MEMBER_ID
        assert commit(-1, "") == ErrorCode.UNKNOWN_MEMBER_ID  # the group has a member
        fetched = raw.request(9, 0, {"group_id": "g", "topics": None})
        assert fetched["topics"] == [{"name": TOPIC, "partitions": [
            {"partition": 0, "committed_offset": 5, "committed_leader_epoch": -1,
             "metadata": None, "error_code": 0}]}]  # fmt: skip
        # A fenced member (wrong epoch on a heartbeat) is removed: its commits are refused.
        hb = {"group_id": "g", "member_id": "m1", "member_epoch": epoch + 7}
        assert raw.request(68, 0, hb)["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
        assert commit(epoch) == ErrorCode.UNKNOWN_MEMBER_ID
