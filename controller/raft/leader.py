"""`Leader`: what a `RaftNode` holds and does only while it leads one term: a `Progress` per
member (probe / pipelined replicate / snapshot), the heartbeat clock and a leadership transfer
in flight; sending appends, heartbeats and snapshots, advancing the commit index, handling the
followers' answers, and judging whether a learner has caught up (the rules and the membership
in force are `Members`'s, members.py).

The node makes a `Leader` when it wins an election and drops it when it steps down, so no
leader state outlives its term. The leader reads the node's log, term and membership (public
attributes) and sends through the `send` it is given; the node decides role changes (stepping
down), the leader reports what it saw (`tick` returns False when CheckQuorum failed).

Pure: no I/O. Called only from the thread that owns the node.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from controller.raft.membership import Membership, MembershipError
from controller.raft.messages import (
    AppendEntries,
    AppendResponse,
    Entry,
    EntryKind,
    Heartbeat,
    HeartbeatResponse,
    InstallSnapshot,
    Message,
    TimeoutNow,
)
from controller.raft.progress import Progress, ProgressState
from controller.raft.state import ReplicaState

if TYPE_CHECKING:
    from controller.raft.core import RaftNode

_log = logging.getLogger(__name__)


class Leader:
    def __init__(
        self,
        node: RaftNode,
        send: Callable[[Message], None],
        on_log_changed: Callable[[], None],
    ) -> None:
        """Leading `node` from now on, in its current term: every other member starts in probe
        state at the log's end. `send` queues a message; `on_log_changed` is the node's (its
        log's latest membership is put in force) after each append."""
        self.node = node
        self._send = send
        self._on_log_changed = on_log_changed
        self.progress: dict[int, Progress] = {}
        self.heartbeat_elapsed = 0
        self.transferee: int | None = None  # a leadership transfer in flight (TimeoutNow)
        nxt = node.log.last_index + 1
        for p in (node.voters | node.observers) - {node.id}:
            self.progress[p] = Progress(p, p in node.voters, nxt, node.max_inflight)

    def track(self, voters: frozenset[int], members: Iterable[int]) -> None:
        """The membership in force changed: track the progress of exactly `members` (others
        than this node), voters among them counted for the commit index."""
        members = set(members) - {self.node.id}
        for p in members:
            pr = self.progress.get(p)
            if pr is None:
                pr = Progress(p, False, self.node.log.last_index + 1, self.node.max_inflight)
                self.progress[p] = pr
            pr.is_voter = p in voters
        for p in set(self.progress) - members:
            del self.progress[p]

    # -- time ---------------------------------------------------------------------------------

    def quorum_active(self) -> bool:
        """CheckQuorum, once per election timeout: did a quorum of voters (this one included)
        answer since the last check? Starts the next period."""
        node = self.node
        active = (node.id in node.members.voters) + sum(
            1 for pr in self.progress.values() if pr.is_voter and pr.recent_active
        )
        if active < node.quorum():
            return False
        for pr in self.progress.values():
            pr.recent_active = False
        return True

    def end_transfer(self) -> None:
        """An election timeout passed: a transfer still in flight has failed."""
        if self.transferee is not None:
            _log.info("%s leadership transfer to %s timed out", self.node.prefix, self.transferee)
            self.transferee = None

    def tick_heartbeat(self) -> None:
        self.heartbeat_elapsed += 1
        if self.heartbeat_elapsed >= self.node.heartbeat_timeout:
            self.heartbeat_elapsed = 0
            node = self.node
            for pr in self.progress.values():
                c = min(pr.match, node.log.committed)
                self._send(Heartbeat(pr.node_id, node.id, node.term, commit=c))

    # -- replication --------------------------------------------------------------------------

    def append(self, items: list[tuple[bytes, EntryKind]]) -> None:
        """Append entries of this term, commit if that decides (a single voter), replicate."""
        node = self.node
        first = node.log.last_index + 1
        node.log.append(
            [Entry(first + i, node.term, data, kind) for i, (data, kind) in enumerate(items)]
        )
        self._on_log_changed()
        self.maybe_commit()  # a single voter commits at once
        self.bcast_append()

    def maybe_commit(self) -> bool:
        """Commit the highest index a quorum of voters holds, if it is of this term."""
        node = self.node
        log = node.log
        matches = sorted(
            (log.last_index if v == node.id else self.progress[v].match for v in node.voters),
            reverse=True,
        )
        idx = matches[node.quorum() - 1]
        if idx > log.committed and log.term(idx) == node.term:
            return log.commit_to(idx)
        return False

    def bcast_append(self) -> None:
        for pr in self.progress.values():
            if self.send_append(pr):
                while self.send_append(pr, send_if_empty=False):
                    pass  # pipeline up to max_inflight messages

    def send_append(self, pr: Progress, send_if_empty: bool = True) -> bool:
        if pr.is_paused():
            return False
        node = self.node
        log = node.log
        prev = pr.next - 1
        prev_term = log.term(prev)
        if prev_term is None:
            assert prev < log.snapshot.index, (pr, log.last_index)
            snap = log.snapshot
            _log.debug("%s sending snapshot %d to %s", node.prefix, snap.index, pr.node_id)
            self._send(InstallSnapshot(pr.node_id, node.id, node.term, snapshot=snap))
            pr.become_snapshot(snap.index, node.ticks)
            return True
        entries = log.slice(pr.next, log.last_index + 1, node.max_entries_per_msg)
        if not entries and not send_if_empty:
            return False
        self._send(
            AppendEntries(
                pr.node_id,
                node.id,
                node.term,
                prev_index=prev,
                prev_term=prev_term,
                entries=tuple(entries),
                commit=log.committed,
            )
        )
        pr.sent_entries(entries[-1].index if entries else prev)
        return True

    def transfer(self, to: int) -> None:
        """Hand leadership to voter `to`: TimeoutNow once it holds the whole log."""
        self.transferee = to
        pr = self.progress[to]
        if pr.match == self.node.log.last_index:
            self._send(TimeoutNow(to, self.node.id, self.node.term))
        else:
            self.send_append(pr)

    # -- answers ------------------------------------------------------------------------------

    def handle_append_response(self, m: AppendResponse) -> None:
        pr = self.progress.get(m.from_)
        if pr is None:
            return
        node = self.node
        pr.recent_active = True
        pr.last_contact_tick = node.ticks
        if not m.success:
            if pr.maybe_decrease(m.rejected_index, m.hint_index):
                self.send_append(pr)
            return
        if not pr.maybe_update(m.match_index):
            return
        if pr.state is ProgressState.PROBE or (
            pr.state is ProgressState.SNAPSHOT and pr.match >= pr.pending_snapshot
        ):
            pr.become_replicate()
        if self.maybe_commit():
            self.bcast_append()
        while self.send_append(pr, send_if_empty=False):
            pass
        if m.from_ == self.transferee and pr.match == node.log.last_index:
            _log.info("%s transferee %s is up to date: TimeoutNow", node.prefix, m.from_)
            self._send(TimeoutNow(m.from_, node.id, node.term))

    def handle_heartbeat_response(self, m: HeartbeatResponse) -> None:
        pr = self.progress.get(m.from_)
        if pr is None:
            return
        node = self.node
        pr.recent_active = True
        pr.last_contact_tick = node.ticks
        if pr.state is ProgressState.PROBE:
            pr.paused = False
        elif pr.state is ProgressState.REPLICATE and len(pr.inflight) >= pr.max_inflight:
            pr.inflight.popleft()
        elif (
            pr.state is ProgressState.SNAPSHOT
            and node.ticks - pr.snapshot_sent_tick >= node.election_timeout
        ):
            pr.become_probe()  # the snapshot (or its answer) was probably lost: retry
        if pr.match < node.log.last_index:
            self.send_append(pr)

    def replica_states(self) -> tuple[tuple[ReplicaState, ...], tuple[ReplicaState, ...]]:
        """(voters, observers) as this leader sees them, in id order (DescribeQuorum)."""
        node = self.node
        voters = tuple(
            ReplicaState(v, node.log.last_index, node.ticks)
            if v == node.id
            else ReplicaState(v, self.progress[v].match, self.progress[v].last_contact_tick)
            for v in sorted(node.voters)
        )
        observers = tuple(
            ReplicaState(o, self.progress[o].match, self.progress[o].last_contact_tick)
            for o in sorted(node.observers)
        )
        return voters, observers

    # -- membership changes, one server at a time ---------------------------------------------

    def add_voter(self, node_id: int, endpoint: str) -> bool:
        """Move `node_id` one step towards voter (Raft §4.2.1): a non-member becomes a
        learner; a learner that holds every committed entry is promoted. Returns True once it
        is a voter in a committed membership. Call again (each tick, say) until then: a step
        waits while an earlier change is uncommitted, the leader has committed nothing in its
        term, a transfer is running, or the learner is catching up."""
        members = self.node.members
        cfg = members.config
        if node_id in cfg.voters:
            return members.committed(self.node.log)
        if self.membership_blocked() is not None:
            return False
        if node_id not in cfg.learners:
            self._propose_config(cfg.add_learner(node_id, endpoint))
        elif self.learner_caught_up(node_id):
            self._propose_config(cfg.promote(node_id))
        return False

    def remove_voter(self, node_id: int) -> bool:
        """Demote voter `node_id` to learner. Returns True once it is not a voter in a
        committed membership (call again until then). A leader that demotes itself keeps leading
        until the change commits, then steps down. MembershipError for the last voter."""
        members = self.node.members
        cfg = members.config
        if node_id not in cfg.voters:
            return members.committed(self.node.log)
        if self.membership_blocked() is None:
            self._propose_config(cfg.demote(node_id))
        return False

    def remove_learner(self, node_id: int) -> bool:
        """Drop learner `node_id` from the membership (it gets no more entries). Returns True
        once it is no member in a committed membership. MembershipError for a voter (demote it
        first)."""
        members = self.node.members
        cfg = members.config
        if node_id in cfg.voters:
            raise MembershipError(f"node {node_id} is a voter: remove_voter first")
        if node_id not in cfg.learners:
            return members.committed(self.node.log)
        if self.membership_blocked() is None:
            self._propose_config(cfg.remove_learner(node_id))
        return False

    def membership_blocked(self) -> str | None:
        node = self.node
        return node.members.blocked(node.log, node.term, self.transferee)

    def _propose_config(self, new: Membership) -> None:
        self.append([(self.node.members.change(new), EntryKind.CONFIG)])

    def learner_caught_up(self, node_id: int) -> bool:
        """Learner `node_id` answered in this term and is in replicate state within one
        pipeline window (`max_entries_per_msg * max_inflight`) of the commit index, or holds
        it all (its acknowledgements then keep pace with the voters')."""
        pr = self.progress.get(node_id)
        if pr is None or pr.last_contact_tick is None:
            return False
        committed = self.node.log.committed
        if pr.match >= committed:
            return True
        window = self.node.max_entries_per_msg * self.node.max_inflight
        return pr.state is ProgressState.REPLICATE and pr.match + window >= committed
