"""One consumer group's membership state machine (KIP-848), pure: no clock, no I/O, no locks.
The coordinator passes `now_ms` in and holds its lock around every call.

Epochs:
- the **group epoch** goes up whenever what the assignment depends on changes: a member joins,
  leaves or is removed, a subscription changes, a subscribed topic gains partitions;
- the **assignment epoch** is the group epoch the current target assignment was computed at
  (recomputed lazily, on the next heartbeat after a change);
- each **member epoch** reaches the assignment epoch once the member has given up the
  partitions it no longer gets (revocation confirmed by its heartbeat).

Handing a partition over, incrementally: a member told to give up partitions keeps its epoch and
is told the partitions it keeps; once a heartbeat says it no longer owns the revoked ones
(`owned_topic_partitions`), they are released, the member moves to the new epoch and gets the
new partitions that are free. A partition still owned (or being revoked) by another member is
held back ("unreleased") and given on a later heartbeat, once its old owner let it go. So no
partition is ever owned by two members.

Fencing: a heartbeat with an epoch other than the member's current one (or its previous one
while nothing new was handed out, i.e. a lost response) gets FENCED_MEMBER_EPOCH and the member
is removed; an unknown member id gets UNKNOWN_MEMBER_ID. A member silent past its session
timeout, or that has not revoked within its rebalance timeout, is removed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from broker.group.assignors import TP, assign
from client.errors import ErrorCode

EMPTY: frozenset[TP] = frozenset()
LEAVE_STATIC = -2  # the member epoch a static member leaves with


class GroupError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message


@dataclass
class Member:
    member_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    subscribed: tuple[str, ...] = ()  # names asked for and names the regex matched
    names: tuple[str, ...] = ()  # names asked for
    regex: str | None = None
    member_epoch: int = 0
    previous_epoch: int = -1
    assigned: frozenset[TP] = EMPTY  # owned now, as far as the coordinator knows
    revoking: frozenset[TP] = EMPTY  # part of `assigned` the member was told to give up
    session_deadline_ms: int = 0
    revoke_deadline_ms: int = -1
    instance_id: str | None = None  # static membership
    left_epoch: int = -1  # a static member that left (epoch -2): the epoch it had

    @property
    def owned_after_revocation(self) -> frozenset[TP]:
        return self.assigned - self.revoking


@dataclass
class HeartbeatResult:
    member_id: str
    member_epoch: int
    assignment: frozenset[TP] | None


@dataclass
class ConsumerGroup:
    group_id: str
    assignor: str = "uniform"
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    target: dict[str, frozenset[TP]] = field(default_factory=dict)
    topic_partitions: dict[str, int] = field(default_factory=dict)  # what `target` was built on

    # -- queries ----------------------------------------------------------------------------------

    @property
    def state(self) -> str:
        if not self.members:
            return "empty"
        if self.assignment_epoch < self.group_epoch:
            return "assigning"
        for m in self.members.values():
            if m.revoking or m.member_epoch != self.assignment_epoch:
                return "reconciling"
            if m.assigned != self.target.get(m.member_id, EMPTY):
                return "reconciling"
        return "stable"

    def owner_of(self, tp: TP) -> str | None:
        for m in self.members.values():
            if tp in m.assigned:
                return m.member_id
        return None

    def check_commit(self, member_id: str, member_epoch: int) -> None:
        """OffsetCommit's fencing: raise GroupError unless this member at this epoch may commit."""
        if not member_id and member_epoch < 0:
            if self.members:
                raise GroupError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"group {self.group_id} has members: a commit needs a member id and epoch",
                )
            return
        m = self.members.get(member_id)
        if m is None:
            raise GroupError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"member {member_id} is not in group {self.group_id}"
            )
        if member_epoch != m.member_epoch:
            raise GroupError(
                ErrorCode.STALE_MEMBER_EPOCH,
                f"member {member_id} commits with epoch {member_epoch}, its epoch is"
                f" {m.member_epoch}",
            )

    # -- heartbeat --------------------------------------------------------------------------------

    def heartbeat(
        self,
        member_id: str,
        member_epoch: int,
        *,
        now_ms: int,
        subscribed: list[str] | None,
        owned: frozenset[TP] | None,
        regex: str | None = None,
        resolve: Callable[[str], tuple[str, ...]] | None = None,
        assignor: str | None,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        partition_counts: Callable[[list[str]], Mapping[str, int]],
        client_id: str = "",
        client_host: str = "",
        instance_id: str | None = None,
    ) -> HeartbeatResult:
        """One ConsumerGroupHeartbeat. Raises GroupError for the error answers."""
        if not member_id:
            raise GroupError(ErrorCode.INVALID_REQUEST, "member_id is required")
        if member_epoch == -1:
            self.remove(member_id)
            return HeartbeatResult(member_id, -1, None)
        if member_epoch == LEAVE_STATIC:
            self._static_leave(member_id, now_ms)
            return HeartbeatResult(member_id, LEAVE_STATIC, None)
        if member_epoch == 0:
            if not subscribed and not regex:
                raise GroupError(
                    ErrorCode.INVALID_REQUEST,
                    "a joining member must name the topics it subscribes, or a regex",
                )
            if member_id in self.members:  # a rejoin after being fenced: start over
                self.remove(member_id)
            m = Member(member_id, session_timeout_ms, rebalance_timeout_ms, client_id, client_host)
            m.names = tuple(sorted(set(subscribed or ())))
            m.regex = regex or None
            m.subscribed = self._resolve(m, resolve)
            m.instance_id = instance_id
            if instance_id is not None and self._replace_static(m):
                pass  # took over the departed instance's partitions and epoch: no rebalance
            else:
                self.group_epoch += 1
            self.members[member_id] = m
            owned = EMPTY
        else:
            got = self.members.get(member_id)
            if got is None:
                raise GroupError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"member {member_id} is not in group {self.group_id}",
                )
            m = got
            lost_response = (
                member_epoch == m.previous_epoch and owned is not None and owned <= m.assigned
            )
            if member_epoch != m.member_epoch and not lost_response:
                self.remove(member_id)
                raise GroupError(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"member {member_id} sent epoch {member_epoch}, its epoch is"
                    f" {m.member_epoch}: fenced",
                )
            if subscribed is not None:
                m.names = tuple(sorted(set(subscribed)))
            if regex is not None:
                m.regex = regex or None
            now_subscribed = self._resolve(m, resolve)
            if now_subscribed != m.subscribed:
                m.subscribed = now_subscribed
                self.group_epoch += 1
        if assignor and assignor != self.assignor:
            if not self.members or list(self.members) == [member_id]:
                self.assignor = assignor
        m.session_deadline_ms = now_ms + m.session_timeout_ms
        self._maybe_compute_target(partition_counts)
        self._reconcile(m, owned, now_ms)
        return HeartbeatResult(member_id, m.member_epoch, m.owned_after_revocation)

    @staticmethod
    def _resolve(m: Member, resolve: Callable[[str], tuple[str, ...]] | None) -> tuple[str, ...]:
        if m.regex is None or resolve is None:
            return m.names
        return tuple(sorted(set(m.names) | set(resolve(m.regex))))

    def _maybe_compute_target(
        self, partition_counts: Callable[[list[str]], Mapping[str, int]]
    ) -> None:
        topics = sorted({t for m in self.members.values() for t in m.subscribed})
        counts = dict(partition_counts(topics))
        if counts != self.topic_partitions:
            self.topic_partitions = counts
            self.group_epoch += 1
        if self.assignment_epoch == self.group_epoch:
            return
        self.target = assign(
            self.assignor,
            {mid: m.subscribed for mid, m in self.members.items()},
            counts,
            {mid: m.assigned for mid, m in self.members.items()},
        )
        self.assignment_epoch = self.group_epoch

    def _reconcile(self, m: Member, owned: frozenset[TP] | None, now_ms: int) -> None:
        target = self.target.get(m.member_id, EMPTY)
        if m.revoking:
            if owned is None or owned & m.revoking:
                return  # still waiting for the member to let them go
            m.assigned = m.assigned - m.revoking
            m.revoking = EMPTY
            m.revoke_deadline_ms = -1
        revoke = m.assigned - target
        if revoke:
            m.revoking = frozenset(revoke)
            m.revoke_deadline_ms = now_ms + m.rebalance_timeout_ms
            return
        wanted = target - m.assigned
        if wanted:
            taken = {tp for o in self.members.values() if o is not m for tp in o.assigned}
            m.assigned = m.assigned | frozenset(tp for tp in wanted if tp not in taken)
        if m.member_epoch != self.assignment_epoch:
            m.previous_epoch = m.member_epoch
            m.member_epoch = self.assignment_epoch

    # -- static membership (group.instance.id) ---------------------------------------------------

    def _static_leave(self, member_id: str, now_ms: int) -> None:
        """Epoch -2: a static member leaves for a restart. It keeps its partitions (nobody else
        gets them) until its session timeout; a member joining with its instance id first
        takes them over without a rebalance."""
        m = self.members.get(member_id)
        if m is None:
            return
        if m.instance_id is None:
            self.remove(member_id)  # (not static: a plain leave)
            return
        m.left_epoch = m.member_epoch
        m.member_epoch = LEAVE_STATIC
        m.session_deadline_ms = now_ms + m.session_timeout_ms

    def _replace_static(self, new: Member) -> bool:
        """A joining member with an instance id in use: take over a departed one (True);
        UNRELEASED_INSTANCE_ID while the old one has not left."""
        old = next((o for o in self.members.values() if o.instance_id == new.instance_id), None)
        if old is None:
            return False
        if old.member_epoch != LEAVE_STATIC:
            raise GroupError(
                ErrorCode.UNRELEASED_INSTANCE_ID,
                f"instance id {new.instance_id} is still used by member {old.member_id} (it has"
                " not left; it will be removed after its session timeout)",
            )
        del self.members[old.member_id]
        new.assigned, new.revoking = old.assigned, old.revoking
        new.member_epoch = new.previous_epoch = old.left_epoch
        if old.member_id in self.target:
            self.target[new.member_id] = self.target.pop(old.member_id)
        if new.subscribed != old.subscribed:
            self.group_epoch += 1
        return True

    # -- removal ----------------------------------------------------------------------------------

    def remove(self, member_id: str) -> Member | None:
        m = self.members.pop(member_id, None)
        if m is not None:
            self.target.pop(member_id, None)
            self.group_epoch += 1
        return m

    def expired(self, now_ms: int) -> list[tuple[Member, str]]:
        """Members past their session timeout or their revocation deadline (not removed)."""
        out = []
        for m in self.members.values():
            if now_ms >= m.session_deadline_ms:
                out.append((m, f"session timeout ({m.session_timeout_ms} ms)"))
            elif m.revoke_deadline_ms >= 0 and now_ms >= m.revoke_deadline_ms:
                out.append((m, f"did not revoke {sorted(m.revoking)} within"
                               f" {m.rebalance_timeout_ms} ms"))  # fmt: skip
        return out
