"""The membership half of `RaftNode`: the single-server changes (add a learner, promote it,
demote a voter, drop a learner; membership.py), the membership in force (the latest in the log,
committed or not, else the snapshot's, else the bootstrap voters), and what a membership change
means for the node's role.

A mixin, as LeaderMixin is, so that core.py stays readable; it has no state of its own (the
attributes below are RaftNode's). Pure: no I/O. Called only from the thread that owns the node.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from controller.raft.errors import NotLeader
from controller.raft.log import RaftLog
from controller.raft.membership import Membership, MembershipError, check_single_change
from controller.raft.messages import EntryKind
from controller.raft.progress import Progress, ProgressState
from controller.raft.state import Role

_log = logging.getLogger(__name__)


class MembershipMixin:
    # RaftNode's attributes that the membership side uses
    id: int
    term: int
    role: Role
    leader_id: int | None
    log: RaftLog
    progress: dict[int, Progress]
    votes: dict[int, bool]
    lead_transferee: int | None
    max_inflight: int
    max_entries_per_msg: int
    voters: frozenset[int]
    observers: set[int]
    is_voter: bool
    config: Membership
    conf_index: int
    _bootstrap: Membership
    _local_observers: set[int]
    _config_src: tuple[int, bytes] | None
    _prefix: str

    if TYPE_CHECKING:  # RaftNode's and LeaderMixin's (stubs here would shadow them)

        def _check_idle(self) -> None: ...

        def _append(self, items: list[tuple[bytes, EntryKind]]) -> None: ...

        def _become_follower(self, term: int, leader: int | None) -> None: ...

    def add_voter(self, node_id: int, endpoint: str) -> bool:
        """Leader: move `node_id` one step towards voter (Raft §4.2.1): a non-member becomes a
        learner; a learner that holds every committed entry is promoted. Returns True once it
        is a voter in a committed membership. Call again (each tick, say) until then: a step
        waits while an earlier change is uncommitted, the leader has committed nothing in its
        term, a transfer is running, or the learner is catching up. Raises NotLeader."""
        self._check_idle()
        if self.role is not Role.LEADER:
            raise NotLeader(self.leader_id, self.term)
        cfg = self.config
        if node_id in cfg.voters:
            return self.conf_index <= self.log.committed
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
        self._check_idle()
        if self.role is not Role.LEADER:
            raise NotLeader(self.leader_id, self.term)
        cfg = self.config
        if node_id not in cfg.voters:
            return self.conf_index <= self.log.committed
        if self.membership_blocked() is None:
            self._propose_config(cfg.demote(node_id))
        return False

    def remove_learner(self, node_id: int) -> bool:
        """Leader: drop learner `node_id` from the membership (it gets no more entries).
        Returns True once it is no member in a committed membership. MembershipError for a
        voter (demote it first)."""
        self._check_idle()
        if self.role is not Role.LEADER:
            raise NotLeader(self.leader_id, self.term)
        cfg = self.config
        if node_id in cfg.voters:
            raise MembershipError(f"node {node_id} is a voter: remove_voter first")
        if node_id not in cfg.learners:
            return self.conf_index <= self.log.committed
        if self.membership_blocked() is None:
            self._propose_config(cfg.remove_learner(node_id))
        return False

    def membership_blocked(self) -> str | None:
        """Why the leader may not start a membership change now (None: it may)."""
        if self.conf_index > self.log.committed:
            return f"the membership change at index {self.conf_index} is not committed yet"
        if self.log.term(self.log.committed) != self.term:
            return f"the leader has not committed an entry of term {self.term} yet"
        if self.lead_transferee is not None:
            return f"leadership transfer to {self.lead_transferee} in progress"
        return None

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

    def _propose_config(self, new: Membership) -> None:
        check_single_change(self.config, new)
        _log.info(
            "%s membership change: voters %s learners %s -> voters %s learners %s",
            self._prefix,
            sorted(self.config.voters),
            sorted(self.config.learners),
            sorted(new.voters),
            sorted(new.learners),
        )
        self._append([(new.encode(), EntryKind.CONFIG)])

    def _on_log_changed(self) -> None:
        """The log's tail or snapshot changed: put its latest membership in force."""
        src = self.log.latest_config()
        if src == self._config_src:
            return
        self._config_src = src
        index, data = src
        self.config = Membership.decode(data) if data else self._bootstrap
        self.conf_index = index if data else 0
        self._use_config()

    def _use_config(self) -> None:
        self.voters = self.config.voter_ids
        self.observers = (self._local_observers | self.config.learner_ids) - self.voters - {self.id}
        was_voter, self.is_voter = self.is_voter, self.id in self.voters
        if self.role is Role.LEADER:
            members = (self.voters | self.observers) - {self.id}
            for p in members:
                pr = self.progress.get(p)
                if pr is None:
                    pr = Progress(p, False, self.log.last_index + 1, self.max_inflight)
                    self.progress[p] = pr
                pr.is_voter = p in self.voters
            for p in set(self.progress) - members:
                del self.progress[p]
        elif self.is_voter != was_voter or (not self.is_voter and self.role is not Role.OBSERVER):
            if self.is_voter:
                self.role = Role.FOLLOWER
            else:
                self.role = Role.OBSERVER
                self.votes = {}

    def _maybe_step_down_removed(self) -> None:
        """A leader that is no voter of the committed membership hands over (by stepping down:
        the remaining voters elect one of themselves)."""
        if self.role is Role.LEADER and not self.is_voter and self.conf_index <= self.log.committed:
            _log.info("%s no longer a voter: stepping down", self._prefix)
            self._become_follower(self.term, None)

    def _may_campaign(self) -> bool:
        """A voter campaigns; so does a node whose removal is not committed yet (it may hold the
        only copy of that change, which its old partners need to commit — Raft §4.2.2). Either
        way, only votes of the voters in its latest membership count."""
        if self.is_voter:
            return True
        data = self.log.config_at(self.log.committed)
        committed = Membership.decode(data) if data else self._bootstrap
        return self.id in committed.voters
