"""The leader's half of `RaftNode`: heartbeats and CheckQuorum, appending, replicating
(probe / pipelined replicate / snapshot per follower), advancing the commit index, and the
leader's steps of a membership change (the rules and the membership in force are `Members`'s,
members.py).

A mixin so that core.py stays readable; it has no state of its own (the attributes below are
RaftNode's). Pure: no I/O. Called only from the thread that owns the node.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from controller.raft.errors import NotLeader
from controller.raft.log import RaftLog
from controller.raft.members import Members
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
from controller.raft.state import Role

_log = logging.getLogger(__name__)


class LeaderMixin:
    # RaftNode's attributes that the leader side uses
    id: int
    term: int
    members: Members
    leader_id: int | None
    max_inflight: int
    log: RaftLog
    progress: dict[int, Progress]
    ticks: int
    election_elapsed: int
    heartbeat_elapsed: int
    election_timeout: int
    heartbeat_timeout: int
    check_quorum: bool
    max_entries_per_msg: int
    lead_transferee: int | None
    role: Role
    _prefix: str

    def _send(self, m: Message) -> None:
        raise NotImplementedError

    def _quorum(self) -> int:
        raise NotImplementedError

    def _become_follower(self, term: int, leader: int | None) -> None:
        raise NotImplementedError

    if TYPE_CHECKING:  # RaftNode's (a stub here would shadow it)

        def _on_log_changed(self) -> None: ...

        def _check_idle(self) -> None: ...

    # -- membership changes, one server at a time ---------------------------------------------

    def add_voter(self, node_id: int, endpoint: str) -> bool:
        """Leader: move `node_id` one step towards voter (Raft §4.2.1): a non-member becomes a
        learner; a learner that holds every committed entry is promoted. Returns True once it
        is a voter in a committed membership. Call again (each tick, say) until then: a step
        waits while an earlier change is uncommitted, the leader has committed nothing in its
        term, a transfer is running, or the learner is catching up. Raises NotLeader."""
        cfg = self._membership_call()
        if node_id in cfg.voters:
            return self.members.committed(self.log)
        if self.membership_blocked() is not None:
            return False
        if node_id not in cfg.learners:
            self._propose_config(cfg.add_learner(node_id, endpoint))
        elif self.learner_caught_up(node_id):
            self._propose_config(cfg.promote(node_id))
        return False

    def remove_voter(self, node_id: int) -> bool:
        """Leader: demote voter `node_id` to learner. Returns True once it is not a voter in a
        committed membership (call again until then). A leader that demotes itself keeps leading
        until the change commits, then steps down. MembershipError for the last voter."""
        cfg = self._membership_call()
        if node_id not in cfg.voters:
            return self.members.committed(self.log)
        if self.membership_blocked() is None:
            self._propose_config(cfg.demote(node_id))
        return False

    def remove_learner(self, node_id: int) -> bool:
        """Leader: drop learner `node_id` from the membership (it gets no more entries).
        Returns True once it is no member in a committed membership. MembershipError for a
        voter (demote it first)."""
        cfg = self._membership_call()
        if node_id in cfg.voters:
            raise MembershipError(f"node {node_id} is a voter: remove_voter first")
        if node_id not in cfg.learners:
            return self.members.committed(self.log)
        if self.membership_blocked() is None:
            self._propose_config(cfg.remove_learner(node_id))
        return False

    def membership_blocked(self) -> str | None:
        """Why the leader may not start a membership change now (None: it may)."""
        return self.members.blocked(self.log, self.term, self.lead_transferee)

    def learner_caught_up(self, node_id: int) -> bool:
        """Leader: learner `node_id` answered in this term and is in replicate state within one
        pipeline window (`max_entries_per_msg * max_inflight`) of the commit index, or holds
        it all (its acknowledgements then keep pace with the voters')."""
        pr = self.progress.get(node_id)
        if pr is None or pr.last_contact_tick is None:
            return False
        if pr.match >= self.log.committed:
            return True
        window = self.max_entries_per_msg * self.max_inflight
        return pr.state is ProgressState.REPLICATE and pr.match + window >= self.log.committed

    def _membership_call(self) -> Membership:
        self._check_idle()
        if self.role is not Role.LEADER:
            raise NotLeader(self.leader_id, self.term)
        return self.members.config

    def _propose_config(self, new: Membership) -> None:
        self._append([(self.members.change(new), EntryKind.CONFIG)])

    def _maybe_step_down_removed(self) -> None:
        """A leader that is no voter of the committed membership hands over (by stepping down:
        the remaining voters elect one of themselves)."""
        m = self.members
        if self.role is Role.LEADER and not m.is_voter and m.committed(self.log):
            _log.info("%s no longer a voter: stepping down", self._prefix)
            self._become_follower(self.term, None)

    def _tick_leader(self) -> None:
        self._maybe_step_down_removed()
        if self.role is not Role.LEADER:
            return
        self.heartbeat_elapsed += 1
        self.election_elapsed += 1
        if self.election_elapsed >= self.election_timeout:
            self.election_elapsed = 0
            if self.check_quorum:
                active = (self.id in self.members.voters) + sum(
                    1 for pr in self.progress.values() if pr.is_voter and pr.recent_active
                )
                if active < self._quorum():
                    _log.info("%s lost contact with a quorum: stepping down", self._prefix)
                    self._become_follower(self.term, None)
                    return
                for pr in self.progress.values():
                    pr.recent_active = False
            if self.lead_transferee is not None:
                _log.info(
                    "%s leadership transfer to %s timed out", self._prefix, self.lead_transferee
                )
                self.lead_transferee = None
        if self.heartbeat_elapsed >= self.heartbeat_timeout:
            self.heartbeat_elapsed = 0
            for pr in self.progress.values():
                c = min(pr.match, self.log.committed)
                self._send(Heartbeat(pr.node_id, self.id, self.term, commit=c))

    def _append(self, items: list[tuple[bytes, EntryKind]]) -> None:
        first = self.log.last_index + 1
        self.log.append(
            [Entry(first + i, self.term, data, kind) for i, (data, kind) in enumerate(items)]
        )
        self._on_log_changed()
        self._maybe_commit()  # a single voter commits at once
        self._bcast_append()

    def _maybe_commit(self) -> bool:
        matches = sorted(
            (
                self.log.last_index if v == self.id else self.progress[v].match
                for v in self.members.voters
            ),
            reverse=True,
        )
        idx = matches[self._quorum() - 1]
        if idx > self.log.committed and self.log.term(idx) == self.term:
            return self.log.commit_to(idx)
        return False

    def _bcast_append(self) -> None:
        for pr in self.progress.values():
            if self._send_append(pr):
                while self._send_append(pr, send_if_empty=False):
                    pass  # pipeline up to max_inflight messages

    def _send_append(self, pr: Progress, send_if_empty: bool = True) -> bool:
        if pr.is_paused():
            return False
        prev = pr.next - 1
        prev_term = self.log.term(prev)
        if prev_term is None:
            assert prev < self.log.snapshot.index, (pr, self.log.last_index)
            snap = self.log.snapshot
            _log.debug("%s sending snapshot %d to %s", self._prefix, snap.index, pr.node_id)
            self._send(InstallSnapshot(pr.node_id, self.id, self.term, snapshot=snap))
            pr.become_snapshot(snap.index, self.ticks)
            return True
        entries = self.log.slice(pr.next, self.log.last_index + 1, self.max_entries_per_msg)
        if not entries and not send_if_empty:
            return False
        self._send(
            AppendEntries(
                pr.node_id,
                self.id,
                self.term,
                prev_index=prev,
                prev_term=prev_term,
                entries=tuple(entries),
                commit=self.log.committed,
            )
        )
        pr.sent_entries(entries[-1].index if entries else prev)
        return True

    def _handle_append_response(self, m: AppendResponse) -> None:
        pr = self.progress.get(m.from_)
        if pr is None:
            return
        pr.recent_active = True
        pr.last_contact_tick = self.ticks
        if not m.success:
            if pr.maybe_decrease(m.rejected_index, m.hint_index):
                self._send_append(pr)
            return
        if not pr.maybe_update(m.match_index):
            return
        if pr.state is ProgressState.PROBE or (
            pr.state is ProgressState.SNAPSHOT and pr.match >= pr.pending_snapshot
        ):
            pr.become_replicate()
        if self._maybe_commit():
            self._bcast_append()
        while self._send_append(pr, send_if_empty=False):
            pass
        if m.from_ == self.lead_transferee and pr.match == self.log.last_index:
            _log.info("%s transferee %s is up to date: TimeoutNow", self._prefix, m.from_)
            self._send(TimeoutNow(m.from_, self.id, self.term))

    def _handle_heartbeat_response(self, m: HeartbeatResponse) -> None:
        pr = self.progress.get(m.from_)
        if pr is None:
            return
        pr.recent_active = True
        pr.last_contact_tick = self.ticks
        if pr.state is ProgressState.PROBE:
            pr.paused = False
        elif pr.state is ProgressState.REPLICATE and len(pr.inflight) >= pr.max_inflight:
            pr.inflight.popleft()
        elif (
            pr.state is ProgressState.SNAPSHOT
            and self.ticks - pr.snapshot_sent_tick >= self.election_timeout
        ):
            pr.become_probe()  # the snapshot (or its answer) was probably lost: retry
        if pr.match < self.log.last_index:
            self._send_append(pr)
