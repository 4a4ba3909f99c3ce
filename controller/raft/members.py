"""The membership in force on one Raft node, and the node's place in it.

`Members` owns what the node knows of its group: the bootstrap voters (the constructor's), the
observers this node was told to replicate to, the membership in force (the latest in the log,
committed or not, else the snapshot's, else the bootstrap's: membership.py) and where it came
from, and what follows from it: the voter ids, the observers, whether this node votes. It also
holds the rules a membership change must pass (one server at a time, after the previous change
committed and after the leader committed an entry of its term; Raft §4.2.1) and who may
campaign (§4.2.2). `RaftNode` acts on what it says (roles, progress). Pure: no I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from controller.raft.log import RaftLog
from controller.raft.membership import Membership, check_single_change

_log = logging.getLogger(__name__)


class Members:
    def __init__(
        self,
        node_id: int,
        voters: Iterable[int],
        endpoints: Mapping[int, str] | None,
        observers: Iterable[int],
        prefix: str,
    ) -> None:
        self.node_id = node_id
        self.bootstrap = Membership.of(voters, endpoints)
        if not self.bootstrap.voters:
            raise ValueError("a Raft group needs at least one voter")
        self._local_observers = set(observers)
        self._prefix = prefix
        self.config = self.bootstrap
        """The membership in force: the latest in the log, committed or not."""
        self.conf_index = 0
        """Index of the entry (or snapshot) that holds `config`; 0 for the bootstrap."""
        self._source: tuple[int, bytes] | None = None
        self.voters: frozenset[int] = frozenset()
        self.observers: set[int] = set()
        self.is_voter = False
        self._recompute()

    def follow(self, log: RaftLog) -> bool:
        """Put the log's latest membership in force; True when it changed."""
        src = log.latest_config()
        if src == self._source:
            return False
        self._source = src
        index, data = src
        self.config = Membership.decode(data) if data else self.bootstrap
        self.conf_index = index if data else 0
        self._recompute()
        return True

    def add_observer(self, node_id: int) -> None:
        self._local_observers.add(node_id)
        self._recompute()

    def remove_observer(self, node_id: int) -> None:
        self._local_observers.discard(node_id)
        self._recompute()

    def _recompute(self) -> None:
        self.voters = self.config.voter_ids
        self.observers = (
            (self._local_observers | self.config.learner_ids) - self.voters - {self.node_id}
        )
        self.is_voter = self.node_id in self.voters

    def committed(self, log: RaftLog) -> bool:
        """The membership in force is committed."""
        return self.conf_index <= log.committed

    def blocked(self, log: RaftLog, term: int, lead_transferee: int | None) -> str | None:
        """Why a leader in `term` may not start a membership change now (None: it may)."""
        if self.conf_index > log.committed:
            return f"the membership change at index {self.conf_index} is not committed yet"
        if log.term(log.committed) != term:
            return f"the leader has not committed an entry of term {term} yet"
        if lead_transferee is not None:
            return f"leadership transfer to {lead_transferee} in progress"
        return None

    def change(self, new: Membership) -> bytes:
        """The CONFIG entry's data for `new`, checked to be a single-server change of the
        membership in force (MembershipError otherwise)."""
        check_single_change(self.config, new)
        _log.info(
            "%s membership change: voters %s learners %s -> voters %s learners %s",
            self._prefix,
            sorted(self.config.voters),
            sorted(self.config.learners),
            sorted(new.voters),
            sorted(new.learners),
        )
        return new.encode()

    def may_campaign(self, log: RaftLog) -> bool:
        """A voter campaigns; so does a node whose removal is not committed yet (it may hold the
        only copy of that change, which its old partners need to commit: Raft §4.2.2). Either
        way, only votes of the voters in its latest membership count."""
        if self.is_voter:
            return True
        data = log.config_at(log.committed)
        committed = Membership.decode(data) if data else self.bootstrap
        return self.node_id in committed.voters
