"""broker/kafka/classic_groups.py with a fake clock and a timer whose deadlines the test fires."""

from __future__ import annotations

from broker.kafka.classic_groups import MEMBER_ID_REQUIRED, ClassicGroups
from client.errors import ErrorCode


class Timer:
    def __init__(self) -> None:
        self.ops: list = []

    def add(self, op) -> None:
        self.ops.append(op)

    def fire(self) -> None:
        ops, self.ops = self.ops, []
        for op in ops:
            op.run_expiration()


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def _join(
    groups: ClassicGroups, member_id: str, out: list, protocols=(("range", b"m"),),
    rebalance_ms: int = 5_000,
):  # fmt: skip
    groups.join(
        "g", member_id, "consumer", list(protocols), 10_000, rebalance_ms, "c", "/127.0.0.1",
        True, out.append,
    )  # fmt: skip


def _member(groups: ClassicGroups) -> str:
    first: list = []
    _join(groups, "", first)
    assert first[0]["error_code"] == MEMBER_ID_REQUIRED
    return first[0]["member_id"]


def test_two_members_rebalance_and_a_silent_one_expires() -> None:
    timer, clock = Timer(), Clock()
    groups = ClassicGroups(timer, clock)
    a = _member(groups)
    ja: list = []
    _join(groups, a, ja)  # alone: the rebalance ends at once
    assert ja[0]["generation_id"] == 1 and ja[0]["leader"] == a and len(ja[0]["members"]) == 1
    sa: list = []
    groups.sync("g", a, 1, {a: b"all"}, sa.append)
    assert sa[0]["assignment"] == b"all"

    b = _member(groups)
    jb: list = []
    _join(groups, b, jb)  # b waits for a to rejoin
    assert jb == []
    assert groups.heartbeat("g", a, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    ja2: list = []
    _join(groups, a, ja2)
    assert ja2[0]["generation_id"] == jb[0]["generation_id"] == 2
    assert ja2[0]["leader"] == a and {m["member_id"] for m in ja2[0]["members"]} == {a, b}
    assert jb[0]["members"] == []  # only the leader gets the metadata
    sb: list = []
    groups.sync("g", b, 2, {}, sb.append)  # the follower waits for the leader's assignments
    assert sb == []
    groups.sync("g", a, 2, {a: b"p0", b: b"p1"}, [].append)
    assert sb[0]["assignment"] == b"p1"
    assert groups.check_commit("g", b, 1) == ErrorCode.ILLEGAL_GENERATION
    assert groups.check_commit("g", b, 2) == 0

    clock.now += 6
    assert groups.heartbeat("g", a, 2) == 0
    clock.now += 5  # b has been silent past its 10 s session; a's heartbeat notices
    assert groups.heartbeat("g", a, 2) == ErrorCode.REBALANCE_IN_PROGRESS
    assert groups.heartbeat("g", b, 2) == ErrorCode.UNKNOWN_MEMBER_ID
    ja3: list = []
    _join(groups, a, ja3)
    assert ja3[0]["generation_id"] == 3 and [m["member_id"] for m in ja3[0]["members"]] == [a]


def test_commits_during_a_rebalance_as_kafka_checks_them() -> None:
    """A member of the current generation commits while a rebalance is being prepared (a
    cooperative consumer commits what it revokes before rejoining: librdkafka's 0113
    v_commit_during_rebalance); between the join and the leader's SyncGroup the answer is
    REBALANCE_IN_PROGRESS; a stale generation is ILLEGAL_GENERATION."""
    groups = ClassicGroups(Timer(), Clock())
    a = _member(groups)
    _join(groups, a, [])
    groups.sync("g", a, 1, {a: b"all"}, [].append)
    b = _member(groups)
    _join(groups, b, [])  # PreparingRebalance: a has not rejoined yet
    assert groups.heartbeat("g", a, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    assert groups.check_commit("g", a, 1) == 0
    assert groups.check_commit("g", a, 0) == ErrorCode.ILLEGAL_GENERATION
    assert groups.check_commit("g", "stranger", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    _join(groups, a, [])  # everyone rejoined: generation 2, CompletingRebalance
    assert groups.check_commit("g", a, 2) == ErrorCode.REBALANCE_IN_PROGRESS
    groups.sync("g", a, 2, {a: b"p0", b: b"p1"}, [].append)  # Stable
    assert groups.check_commit("g", a, 2) == 0
    assert groups.check_commit("g", a, 1) == ErrorCode.ILLEGAL_GENERATION


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    timer, clock = Timer(), Clock()
    groups = ClassicGroups(timer, clock)
    a, b = _member(groups), _member(groups)
    _join(groups, a, [])
    jb: list = []
    _join(groups, b, jb)  # a does not rejoin
    assert jb == []
    clock.now += 5.1
    timer.fire()  # the rebalance timeout (5 s)
    assert jb[0]["generation_id"] == 2 and jb[0]["leader"] == b
    assert groups.heartbeat("g", a, 1) == ErrorCode.UNKNOWN_MEMBER_ID


def test_leave_and_protocol_checks() -> None:
    groups = ClassicGroups(Timer(), Clock())
    a = _member(groups)
    _join(groups, a, [])
    out: list = []
    _join(groups, "", out, protocols=(("sticky", b""),))  # no protocol in common with a
    assert out[0]["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    out.clear()
    _join(groups, "stranger", out)
    assert out[0]["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    assert groups.leave("g", [a, "stranger"]) == [0, ErrorCode.UNKNOWN_MEMBER_ID]
    assert not groups.is_classic("g")


def test_a_leader_dying_before_its_sync_is_noticed_by_the_followers_retry() -> None:
    timer, clock = Timer(), Clock()
    groups = ClassicGroups(timer, clock)
    a, b = _member(groups), _member(groups)
    _join(groups, a, [])
    jb: list = []
    _join(groups, b, jb)
    _join(groups, a, [])  # generation 2: a leads, b follows
    assert jb[0]["generation_id"] == 2
    first: list = []
    groups.sync("g", b, 2, {}, first.append)  # waits for the leader, which never comes
    assert first == []
    clock.now += 11
    retry: list = []
    groups.sync("g", b, 2, {}, retry.append)  # b's client retried after its request timeout
    assert first[0]["error_code"] == retry[0]["error_code"] == ErrorCode.REBALANCE_IN_PROGRESS
    jb2: list = []
    _join(groups, b, jb2)
    assert jb2[0]["generation_id"] == 3 and jb2[0]["leader"] == b


def test_leaving_answers_a_waiting_request() -> None:
    groups = ClassicGroups(Timer(), Clock())
    a, b = _member(groups), _member(groups)
    _join(groups, a, [])
    jb: list = []
    _join(groups, b, jb)  # waits for a to rejoin
    assert groups.leave("g", [b]) == [0]
    assert jb[0]["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID


def test_close_answers_every_waiting_request() -> None:
    groups = ClassicGroups(Timer(), Clock())
    a, b = _member(groups), _member(groups)
    _join(groups, a, [])
    jb: list = []
    _join(groups, b, jb)  # waits for a
    groups.close()
    assert jb[0]["error_code"] == ErrorCode.NOT_COORDINATOR
    assert not groups.is_classic("g")


def test_a_member_gone_without_leaving_holds_a_rebalance_only_for_its_session() -> None:
    timer, clock = Timer(), Clock()
    groups = ClassicGroups(timer, clock)
    a, b = _member(groups), _member(groups)
    _join(groups, a, [], rebalance_ms=60_000)
    _join(groups, b, [], rebalance_ms=60_000)
    _join(groups, a, [], rebalance_ms=60_000)  # generation 2 with a and b
    timer.ops.clear()
    clock.now += 4
    ja: list = []
    _join(groups, a, ja, rebalance_ms=60_000)  # a rejoins; b died without a LeaveGroup
    assert ja == []
    [op] = timer.ops
    assert op.delay_ms <= 6_001  # b's 10 s session ends 6 s from now, the rebalance in 60
    clock.now += 6.1
    timer.fire()
    assert ja[0]["generation_id"] == 3 and [m["member_id"] for m in ja[0]["members"]] == [a]


def test_an_empty_groups_first_rebalance_waits_for_more_members() -> None:
    """group.initial.rebalance.delay.ms (Kafka's InitialDelayedJoin): members joining an empty
    group within the delay share the first generation; each newcomer extends the wait, up to
    the rebalance timeout."""
    timer, clock = Timer(), Clock()
    groups = ClassicGroups(timer, clock, initial_delay_ms=3000)
    a, b = _member(groups), _member(groups)
    ja: list = []
    _join(groups, a, ja, rebalance_ms=5_000)
    assert ja == []  # alone, but the group was empty: wait for more
    clock.now += 2
    jb: list = []
    _join(groups, b, jb)  # extends the wait to 3 s from now, capped at the 5 s timeout
    clock.now += 1.5
    timer.fire()
    assert ja == [] and jb == []  # 3.5 s in: still waiting
    clock.now += 1.6
    timer.fire()
    assert ja[0]["generation_id"] == jb[0]["generation_id"] == 1
    # a long rebalance timeout (librdkafka's: max.poll.interval.ms) does not lengthen the wait
    groups2 = ClassicGroups(timer, clock, initial_delay_ms=3000)
    jd: list = []
    groups2.join(
        "h", "", "consumer", [("range", b"m")], 10_000, 300_000, "c", "/h", False, jd.append
    )
    clock.now += 3.1
    timer.fire()
    assert jd[0]["generation_id"] == 1
    assert {m["member_id"] for m in ja[0]["members"]} == {a, b}
    # a newcomer to a non-empty group rebalances as usual (no initial wait)
    groups.sync("g", a, 1, {a: b"p0", b: b"p1"}, [].append)
    c = _member(groups)
    jc: list = []
    _join(groups, c, jc)
    ja2, jb2 = [], []
    _join(groups, a, ja2)
    _join(groups, b, jb2)
    assert jc[0]["generation_id"] == ja2[0]["generation_id"] == 2


def test_a_leader_gone_before_its_sync_group_is_expired_by_the_timer() -> None:
    """A follower's SyncGroup waiting for a leader that died (no LeaveGroup) is answered
    REBALANCE_IN_PROGRESS once the leader's session runs out, without another request for
    the group arriving (librdkafka's 0084_destroy_flags)."""
    timer, clock = Timer(), Clock()
    groups = ClassicGroups(timer, clock)
    a = _member(groups)
    _join(groups, a, [])  # alone: generation 1, a leads
    b = _member(groups)
    jb, ja = [], []
    _join(groups, b, jb)
    _join(groups, a, ja)  # generation 2, a still leads
    assert ja[0]["leader"] == a and jb[0]["generation_id"] == 2
    sb: list = []
    groups.sync("g", b, 2, {}, sb.append)  # b waits for a's assignments; a is gone
    timer.fire()  # not yet: a's session (10 s) has not run out
    assert sb == []
    clock.now += 10.1
    timer.fire()
    assert sb[0]["error_code"] == ErrorCode.REBALANCE_IN_PROGRESS
    assert groups.heartbeat("g", a, 2) == ErrorCode.UNKNOWN_MEMBER_ID
