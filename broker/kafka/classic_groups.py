"""Kafka's classic consumer group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) for
clients on the Kafka listener. Gregor's own coordinator (broker/group/) assigns partitions
itself (KIP-848's model); a classic group instead elects a leader member that computes the
assignment client-side, so its membership lives here, while its offsets are the coordinator's
(OffsetCommit is checked against the generation here, then stored by broker/group/).

States (Kafka's names):

    Empty ──join──► PreparingRebalance ──every member rejoined, or rebalance timeout──►
    CompletingRebalance ──leader's SyncGroup──► Stable ──join / leave / session expiry──►
    PreparingRebalance ...

- JoinGroup v4+ with no member id gets MEMBER_ID_REQUIRED and an id to rejoin with (KIP-394).
- The first rebalance of an empty group waits group.initial.rebalance.delay.ms for more
  members to join, each newcomer extending the wait by that much, up to the rebalance
  timeout (Kafka's InitialDelayedJoin), so consumers started together share the first
  generation instead of rebalancing once per newcomer.
- A rebalance ends when every member rejoined, or at the largest rebalance timeout; members
  that did not rejoin are removed. The generation goes up by one; the leader (the previous
  one if still there) gets every member's metadata for the chosen protocol (the first of the
  leader's protocols that every member lists); the protocol metadata and the assignments are
  passed through untouched.
- SyncGroup: followers wait for the leader's; the leader's assignments answer everyone.
- OffsetCommit (checked here): accepted from a member of the current generation, also while
  a rebalance is being prepared; REBALANCE_IN_PROGRESS between the join and the leader's
  SyncGroup, as Kafka answers.
- Heartbeat: REBALANCE_IN_PROGRESS while preparing a rebalance (members rejoin),
  ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID for stale members. Sessions are checked when a
  request for the group arrives: a member silent for longer than its session timeout is
  removed and a rebalance starts (the surviving members' next heartbeat tells them).
- A group name used by Gregor's own (KIP-848) protocol cannot join here
  (INCONSISTENT_GROUP_PROTOCOL), as Kafka refuses mixing the two.

Membership is in memory on the coordinator: after a coordinator move, members rejoin (they
get NOT_COORDINATOR / UNKNOWN_MEMBER_ID and find the new one), as after any rebalance.

Threads: any; one lock guards every group. Answers (callbacks) are called after the lock is
released, on the calling thread or the timer's reaper thread (rebalance timeout).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from broker.purgatory.delayed import DelayedOperation
from client.errors import ErrorCode
from client.protocol.body import Body

log = logging.getLogger(__name__)

Answer = Callable[[Body], None]
MEMBER_ID_REQUIRED = 79


@dataclass
class Member:
    member_id: str
    client_id: str
    host: str
    protocols: list[tuple[str, bytes]]
    session_ms: int
    rebalance_ms: int
    last_seen: float
    assignment: bytes = b""
    join: Answer | None = None
    sync: Answer | None = None


@dataclass
class Group:
    group_id: str
    state: str = "Empty"
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)  # ids handed out, not joined yet
    join_op: DelayedJoin | None = None
    rebalance_deadline: float = 0.0  # clock time the current rebalance ends at the latest
    initial_until: float = 0.0  # an empty group's first rebalance waits for more members until


class DelayedJoin(DelayedOperation):
    """Ends a rebalance: when every member rejoined (forced) or at the rebalance timeout."""

    def __init__(self, groups: ClassicGroups, group: Group, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.groups = groups
        self.group = group

    forced = False  # set by finish(): every member rejoined or left

    def try_complete(self) -> bool:
        return False

    def finish(self) -> None:
        self.forced = True
        self.force_complete()

    def on_complete(self) -> None:
        self.groups._finish_join(self.group, self)


class DelayedSessionCheck(DelayedOperation):
    """Expires silent members when the first of their sessions runs out, while a follower's
    SyncGroup waits for a leader that may be gone (nothing else would ask)."""

    def __init__(self, groups: ClassicGroups, group: Group, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.groups = groups
        self.group = group

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        self.groups._check_sessions(self.group)


class Timer(Protocol):
    """What the groups need of a SystemTimer (broker/purgatory/timer.py)."""

    def add(self, op: DelayedOperation) -> None: ...


class ClassicGroups:
    """Every classic group this broker coordinates. `timer` (a SystemTimer) runs rebalance
    timeouts; `clock` returns monotonic seconds."""

    def __init__(
        self,
        timer: Timer,
        clock: Callable[[], float] = time.monotonic,
        initial_delay_ms: int = 0,
    ) -> None:
        self._timer = timer
        self._clock = clock
        self._initial_delay_s = initial_delay_ms / 1000
        self._lock = threading.Lock()
        self._groups: dict[str, Group] = {}

    # -- JoinGroup -----------------------------------------------------------------------------
    def join(
        self,
        group_id: str,
        member_id: str,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_ms: int,
        rebalance_ms: int,
        client_id: str,
        host: str,
        require_known_id: bool,
        answer: Answer,
    ) -> None:
        now = self._clock()
        start: DelayedJoin | None = None
        finish: DelayedJoin | None = None
        with self._lock:
            g = self._groups.setdefault(group_id, Group(group_id))
            self._seen(g, member_id, now)
            start = self._expire(g, now)
            error = self._check_join(g, member_id, protocol_type, protocols)
            if error is None and not member_id:
                member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
                if require_known_id:
                    g.pending.add(member_id)
                    error = (MEMBER_ID_REQUIRED, member_id)
            if error is not None:
                code, mid = error
                out = _join_error(code, mid)
            else:
                out = None
                g.pending.discard(member_id)
                m = g.members.get(member_id)
                if m is None:
                    m = g.members[member_id] = Member(
                        member_id, client_id, host, protocols, session_ms, rebalance_ms, now
                    )
                else:
                    m.protocols, m.session_ms, m.rebalance_ms = protocols, session_ms, rebalance_ms
                    m.last_seen = now
                if m.join is not None:  # a duplicate join replaces the one waiting
                    self._later(m.join, _join_error(int(ErrorCode.REBALANCE_IN_PROGRESS), ""))
                m.join = answer
                g.protocol_type = protocol_type
                if g.state == "Empty" and self._initial_delay_s > 0:
                    g.initial_until = now + self._initial_delay_s  # (extended by newcomers)
                if g.state != "PreparingRebalance":
                    start = self._prepare(g)
                if now < g.initial_until:
                    g.initial_until = min(
                        g.rebalance_deadline, max(g.initial_until, now + self._initial_delay_s)
                    )
                elif all(x.join is not None for x in g.members.values()):
                    finish = g.join_op
        if out is not None:
            answer(out)
        self._run_later()
        if start is not None:
            self._timer.add(start)
        if finish is not None:
            finish.finish()

    def _check_join(
        self, g: Group, member_id: str, protocol_type: str, protocols: list[tuple[str, bytes]]
    ) -> tuple[int, str] | None:
        if member_id and member_id not in g.members and member_id not in g.pending:
            return int(ErrorCode.UNKNOWN_MEMBER_ID), member_id
        others = [m for m in g.members.values() if m.member_id != member_id]
        if not protocols or (others and g.protocol_type not in (None, protocol_type)):
            return int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL), member_id
        names = {n for n, _ in protocols}
        if others and not all(names & {n for n, _ in m.protocols} for m in others):
            return int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL), member_id
        return None

    def _prepare(self, g: Group) -> DelayedJoin:
        """Start a rebalance (lock held): waiting SyncGroups are told to rejoin."""
        g.state = "PreparingRebalance"
        for m in g.members.values():
            if m.sync is not None:
                self._later(m.sync, _sync_error(int(ErrorCode.REBALANCE_IN_PROGRESS)))
                m.sync = None
        now = self._clock()
        g.rebalance_deadline = (
            now + max((m.rebalance_ms for m in g.members.values()), default=0) / 1000
        )
        op = g.join_op = DelayedJoin(self, g, self._join_delay_ms(g, now))
        log.info("classic group %s: rebalancing (generation %d)", g.group_id, g.generation)
        return op

    def _join_delay_ms(self, g: Group, now: float) -> int:
        """Until the rebalance deadline, or sooner, when the session of a member that has not
        rejoined runs out (a member gone without LeaveGroup must not hold the group up for a
        whole rebalance timeout)."""
        until = g.rebalance_deadline
        for m in g.members.values():
            if m.join is None:
                until = min(until, m.last_seen + m.session_ms / 1000)
        if g.initial_until > now:  # an empty group's first wait: every member has joined
            until = g.initial_until
        return max(0, int((until - now) * 1000) + 1)

    def _finish_join(self, g: Group, op: DelayedJoin) -> None:
        again = None
        with self._lock:
            if g.join_op is op:
                now = self._clock()
                for mid in [
                    mid for mid, m in g.members.items()
                    if m.join is None and now - m.last_seen > m.session_ms / 1000
                ]:  # fmt: skip
                    log.info("classic group %s: member %s session expired", g.group_id, mid)
                    del g.members[mid]
                waiting = any(m.join is None for m in g.members.values())
                waiting = (waiting and not op.forced) or now < g.initial_until
                if waiting and now < g.rebalance_deadline:
                    again = g.join_op = DelayedJoin(self, g, self._join_delay_ms(g, now))
                else:
                    self._complete_join(g)
        self._run_later()
        if again is not None:
            self._timer.add(again)

    def _complete_join(self, g: Group) -> None:
        """The rebalance ends (lock held): new generation, join answers queued."""
        g.join_op = None
        g.initial_until = 0.0
        for mid in [mid for mid, m in g.members.items() if m.join is None]:
            log.info("classic group %s: %s did not rejoin in time", g.group_id, mid)
            del g.members[mid]
        g.generation += 1
        if not g.members:
            g.state, g.leader, g.protocol = "Empty", None, None
            return
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        leader = g.members[g.leader]
        common = [
            n for n, _ in leader.protocols
            if all(n in {x for x, _ in m.protocols} for m in g.members.values())
        ]  # fmt: skip
        g.protocol = common[0] if common else leader.protocols[0][0]
        g.state = "CompletingRebalance"
        everyone = [
            {"member_id": m.member_id, "group_instance_id": None,
             "metadata": dict(m.protocols)[g.protocol]}
            for m in g.members.values()
        ]  # fmt: skip
        for m in g.members.values():
            assert m.join is not None
            self._later(
                m.join,
                {
                    "error_code": 0,
                    "generation_id": g.generation,
                    "protocol_type": g.protocol_type,
                    "protocol_name": g.protocol,
                    "leader": g.leader,
                    "member_id": m.member_id,
                    "members": everyone if m.member_id == g.leader else [],
                },
            )
            m.join = None
            m.assignment = b""
        log.info(
            "classic group %s: generation %d, %d members, leader %s, protocol %s",
            g.group_id, g.generation, len(g.members), g.leader, g.protocol,
        )  # fmt: skip

    # -- SyncGroup, Heartbeat, LeaveGroup ------------------------------------------------------
    def sync(
        self, group_id: str, member_id: str, generation: int, assignments: dict[str, bytes],
        answer: Answer,
    ) -> None:  # fmt: skip
        start: DelayedOperation | None = None
        with self._lock:
            g = self._groups.get(group_id)
            if g is not None:  # a leader that died before its SyncGroup is noticed here
                self._seen(g, member_id, self._clock())
                start = self._expire(g, self._clock())
            m = g.members.get(member_id) if g is not None else None
            if g is None or m is None:
                out: Body | None = _sync_error(int(ErrorCode.UNKNOWN_MEMBER_ID))
            elif generation != g.generation:
                out = _sync_error(int(ErrorCode.ILLEGAL_GENERATION))
            elif g.state == "PreparingRebalance":
                out = _sync_error(int(ErrorCode.REBALANCE_IN_PROGRESS))
            elif g.state == "Stable":
                out = self._sync_ok(g, m)
            else:  # CompletingRebalance
                out = None
                m.last_seen = self._clock()
                if m.sync is not None:  # a retry: the earlier request still needs its answer
                    self._later(m.sync, _sync_error(int(ErrorCode.REBALANCE_IN_PROGRESS)))
                m.sync = answer
                if member_id == g.leader:
                    for x in g.members.values():
                        x.assignment = assignments.get(x.member_id, b"")
                    g.state = "Stable"
                    for x in g.members.values():
                        if x.sync is not None:
                            self._later(x.sync, self._sync_ok(g, x))
                            x.sync = None
                else:  # waits for the leader's: expire it if its session runs out first
                    start = self._session_check(g, self._clock())
        if out is not None:
            answer(out)
        self._run_later()
        if start is not None:
            self._timer.add(start)

    def _session_check(self, g: Group, now: float) -> DelayedSessionCheck | None:
        """A check at the end of the first session of a member with no request waiting here
        (lock held)."""
        silent = [m for m in g.members.values() if m.sync is None and m.join is None]
        if not silent:
            return None
        until = min(m.last_seen + m.session_ms / 1000 for m in silent)
        return DelayedSessionCheck(self, g, max(0, int((until - now) * 1000) + 1))

    def _check_sessions(self, g: Group) -> None:
        """The timer's: expire silent members of `g` while followers' SyncGroups wait."""
        start: DelayedOperation | None = None
        with self._lock:
            if self._groups.get(g.group_id) is g and g.state == "CompletingRebalance":
                now = self._clock()
                start = self._expire(g, now)
                if start is None and any(m.sync is not None for m in g.members.values()):
                    start = self._session_check(g, now)  # (still alive: look again later)
        self._run_later()
        if start is not None:
            self._timer.add(start)

    def _sync_ok(self, g: Group, m: Member) -> Body:
        return {
            "error_code": 0,
            "protocol_type": g.protocol_type,
            "protocol_name": g.protocol,
            "assignment": m.assignment,
        }

    def heartbeat(self, group_id: str, member_id: str, generation: int) -> int:
        """The Heartbeat error code (0: carry on)."""
        start = None
        with self._lock:
            g = self._groups.get(group_id)
            if g is None:
                return int(ErrorCode.UNKNOWN_MEMBER_ID)
            self._seen(g, member_id, self._clock())
            start = self._expire(g, self._clock())
            m = g.members.get(member_id)
            if m is None:
                code = int(ErrorCode.UNKNOWN_MEMBER_ID)
            else:
                m.last_seen = self._clock()
                if g.state == "PreparingRebalance":
                    code = int(ErrorCode.REBALANCE_IN_PROGRESS)
                elif generation != g.generation:
                    code = int(ErrorCode.ILLEGAL_GENERATION)
                else:
                    code = 0
        self._run_later()
        if start is not None:
            self._timer.add(start)
        return code

    def leave(self, group_id: str, member_ids: list[str]) -> list[int]:
        """Remove members; one error code per id (UNKNOWN_MEMBER_ID for a stranger)."""
        codes = []
        start = finish = None
        with self._lock:
            g = self._groups.get(group_id)
            for mid in member_ids:
                m = g.members.pop(mid, None) if g is not None else None
                codes.append(0 if m is not None else int(ErrorCode.UNKNOWN_MEMBER_ID))
                if m is not None:
                    self._answer_waiting(m)
            if g is not None and any(c == 0 for c in codes):
                start, finish = self._after_removal(g)
        self._run_later()
        if start is not None:
            self._timer.add(start)
        if finish is not None:
            finish.finish()
        return codes

    def check_commit(
        self, group_id: str, member_id: str, generation: int, txn: bool = False
    ) -> int:
        """The error code for an OffsetCommit of `group_id` from a classic member (0: store
        it). generation -1 (a consumer outside any group) is always let through. As in
        Kafka's GroupCoordinator, a member of the current generation may commit while a
        rebalance is being prepared (a cooperative consumer commits what it revokes before it
        rejoins); only between the join and the leader's SyncGroup (CompletingRebalance) is it
        REBALANCE_IN_PROGRESS. A TxnOffsetCommit (`txn`) is checked for member and
        generation only, as Kafka's doTxnCommitOffsets. A commit from outside the group
        (generation -1, no member id: an admin's AlterConsumerGroupOffsets, assign() and
        commit()) is UNKNOWN_MEMBER_ID while the group has members, as Kafka's
        validateOffsetCommit answers ("only members can commit offsets"), transactional
        ones excepted."""
        if generation < 0 and not member_id:
            if txn:
                return 0
            with self._lock:
                g = self._groups.get(group_id)
                busy = g is not None and bool(g.members)
            return int(ErrorCode.UNKNOWN_MEMBER_ID) if busy else 0
        with self._lock:
            g = self._groups.get(group_id)
            if g is not None and g.state == "CompletingRebalance" and not txn:
                return int(ErrorCode.REBALANCE_IN_PROGRESS)
            if g is None or member_id not in g.members:
                return int(ErrorCode.UNKNOWN_MEMBER_ID)
            if generation != g.generation:
                return int(ErrorCode.ILLEGAL_GENERATION)
            g.members[member_id].last_seen = self._clock()
            return 0

    def describe(self, group_id: str) -> Body | None:
        """DescribeGroups' entry for a classic group with members (None: not one)."""
        with self._lock:
            g = self._groups.get(group_id)
            if g is None or not g.members:
                return None
            return {
                "error_code": 0,
                "group_id": group_id,
                "group_state": g.state,
                "protocol_type": g.protocol_type or "",
                "protocol_data": g.protocol or "",
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": None,
                        "client_id": m.client_id,
                        "client_host": m.host,
                        "member_metadata": dict(m.protocols).get(g.protocol or "", b""),
                        "member_assignment": m.assignment,
                    }
                    for m in g.members.values()
                ],
            }

    def subscriptions(self, group_id: str) -> tuple[str, list[bytes]] | None:
        """(protocol type, each member's protocol metadata) of a classic group with members
        (None: not one): the chosen protocol's metadata, or every protocol a member lists
        while none is chosen yet (OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC)."""
        with self._lock:
            g = self._groups.get(group_id)
            if g is None or not g.members:
                return None
            return g.protocol_type or "", [
                meta
                for m in g.members.values()
                for name, meta in m.protocols
                if g.protocol is None or name == g.protocol
            ]

    def listing(self) -> dict[str, tuple[str, str]]:
        """{group id: (state, protocol type)} of the classic groups with members."""
        with self._lock:
            return {
                gid: (g.state, g.protocol_type or "")
                for gid, g in self._groups.items()
                if g.members
            }

    def forget(self, group_id: str) -> bool:
        """Drop an empty classic group (DeleteGroups); False when it has members."""
        with self._lock:
            g = self._groups.get(group_id)
            if g is not None and (g.members or g.join_op is not None):
                return False
            self._groups.pop(group_id, None)
            return True

    def close(self) -> None:
        """The broker is shutting down: every waiting JoinGroup and SyncGroup is answered
        NOT_COORDINATOR (the clients find the next coordinator and rejoin there)."""
        with self._lock:
            for g in self._groups.values():
                g.join_op = None  # a rebalance timeout firing later finds nothing to end
                for m in g.members.values():
                    if m.join is not None:
                        self._later(
                            m.join, _join_error(int(ErrorCode.NOT_COORDINATOR), m.member_id)
                        )
                        m.join = None
                    if m.sync is not None:
                        self._later(m.sync, _sync_error(int(ErrorCode.NOT_COORDINATOR)))
                        m.sync = None
            self._groups.clear()
        self._run_later()

    def is_classic(self, group_id: str) -> bool:
        with self._lock:
            g = self._groups.get(group_id)
            return g is not None and bool(g.members or g.pending)

    # -- helpers (lock held) -------------------------------------------------------------------
    def _expire(self, g: Group, now: float) -> DelayedJoin | None:
        """Remove members whose session ran out; start a rebalance when any was."""
        gone = [
            mid
            for mid, m in g.members.items()
            if m.join is None and m.sync is None and now - m.last_seen > m.session_ms / 1000
        ]  # fmt: skip  (a member with a request waiting here is alive)
        for mid in gone:
            log.info("classic group %s: member %s session expired", g.group_id, mid)
            del g.members[mid]
        if not gone:
            return None
        start, _ = self._after_removal(g)
        return start

    def _seen(self, g: Group, member_id: str, now: float) -> None:
        """A request from `member_id` shows it is alive (before expiring anyone)."""
        m = g.members.get(member_id)
        if m is not None:
            m.last_seen = now

    def _answer_waiting(self, m: Member) -> None:
        """A removed member's waiting requests still get their answers (each holds its
        connection muted and its bytes in the memory pool until answered)."""
        if m.join is not None:
            self._later(m.join, _join_error(int(ErrorCode.UNKNOWN_MEMBER_ID), m.member_id))
            m.join = None
        if m.sync is not None:
            self._later(m.sync, _sync_error(int(ErrorCode.UNKNOWN_MEMBER_ID)))
            m.sync = None

    def _after_removal(self, g: Group) -> tuple[DelayedJoin | None, DelayedJoin | None]:
        if not g.members:
            if g.join_op is not None:
                return None, g.join_op
            g.state, g.leader = "Empty", None
            return None, None
        if g.state == "PreparingRebalance":
            done = all(m.join is not None for m in g.members.values())
            return None, g.join_op if done else None
        return self._prepare(g), None

    _pending_answers: threading.local = threading.local()

    def _later(self, answer: Answer, body: Body) -> None:
        """Queue an answer to send once the lock is released (this thread's queue)."""
        q = getattr(self._pending_answers, "q", None)
        if q is None:
            q = self._pending_answers.q = []
        q.append((answer, body))

    def _run_later(self) -> None:
        q = getattr(self._pending_answers, "q", None)
        if not q:
            return
        self._pending_answers.q = []
        for answer, body in q:
            try:
                answer(body)
            except Exception:
                log.exception("classic group answer failed")


def _join_error(code: int, member_id: str) -> Body:
    return {
        "error_code": code,
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": "",
        "leader": "",
        "member_id": member_id,
        "members": [],
    }


def _sync_error(code: int) -> Body:
    return {"error_code": code, "protocol_type": None, "protocol_name": None, "assignment": b""}
