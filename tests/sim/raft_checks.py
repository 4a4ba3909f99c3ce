"""The invariants of the Raft simulation (tests/sim/raft_sim.py), with the global knowledge they
need: what was committed at each index and by which term, which node led each term, which
membership pairs were already checked, and what leaders accepted. A violation calls `sim.fail`
(SimFailure naming the seed).

  * `node(n)` after every step of a node: one leader per term; term and commit index never go
    back; committed entries never change; successive memberships in a log have intersecting
    majorities; a leader runs the membership committed at its index; a leader holds every entry
    committed in an earlier term (leader completeness). Returns whether `n` is a leader seen for
    the first time in its term (the simulation may crash it then).
  * `accepted_committed()` at the end: every proposal accepted by a leader that is still leader
    of that term is committed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller.raft.core import RaftNode
from controller.raft.membership import Membership
from controller.raft.state import Role

if TYPE_CHECKING:
    from raft_sim import SimNode, Simulation


class RaftChecks:
    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.leader_of_term: dict[int, int] = {}
        self.committed: dict[int, tuple[int, bytes]] = {}  # index -> (term, data)
        self.commit_term: dict[int, int] = {}  # index -> term of the first node seen committing it
        self.max_committed = 0
        self.completeness_checked: set[int] = set()
        self.checked_config_pairs: set[tuple[bytes, bytes]] = set()
        self.accepted: list[tuple[int, int, int, bytes]] = []  # leader, term, index, data

    def node(self, n: SimNode) -> bool:
        raft = n.raft
        assert raft is not None
        fail = self.sim.fail
        if raft.term < n.max_term:
            fail(f"node {n.id} term went back {n.max_term} -> {raft.term}")
        n.max_term = raft.term
        commit = raft.commit_index
        if commit < n.max_commit:
            fail(f"node {n.id} commit went back {n.max_commit} -> {commit}")
        if commit > n.max_commit:
            for idx in range(max(n.max_commit + 1, raft.snapshot.index + 1), commit + 1):
                self._committed_entry(n.id, raft, idx)
            n.max_commit = commit
        if raft.log.config_entries:
            self._config_chain(n.id, raft)
        if raft.role is not Role.LEADER:
            return False
        if raft.snapshot.index < raft.conf_index <= raft.commit_index:
            self._committed_config(n.id, raft)
        other = self.leader_of_term.setdefault(raft.term, n.id)
        if other != n.id:
            fail(f"two leaders in term {raft.term}: {other} and {n.id}")
        # Leader completeness: entries committed in earlier terms are in this leader's log.
        new_leader = raft.term not in self.completeness_checked
        if new_leader:
            self.completeness_checked.add(raft.term)
            check = range(raft.snapshot.index + 1, self.max_committed + 1)
        else:
            check = range(self.max_committed, self.max_committed + 1)
        for idx in check:
            if idx > raft.snapshot.index and self.commit_term[idx] < raft.term:
                if raft.entry_term(idx) != self.committed[idx][0]:
                    fail(f"leader {n.id} (term {raft.term}) lacks committed entry {idx}")
        return new_leader

    def _committed_entry(self, node_id: int, raft: RaftNode, idx: int) -> None:
        term = raft.entry_term(idx)
        entries = raft.log.slice(idx, idx + 1)
        assert term is not None and entries, (node_id, idx)
        data = entries[0].data
        known = self.committed.get(idx)
        if known is None:
            self.committed[idx] = (term, data)
            self.commit_term[idx] = raft.term
            self.max_committed = max(self.max_committed, idx)
        elif known != (term, data):
            self.sim.fail(f"node {node_id} committed {idx}={(term, data)} but it was {known}")

    def _config_chain(self, node_id: int, raft: RaftNode) -> None:
        """Successive memberships in a log: every majority of one meets every majority of the
        next (else two leaders could be elected, or two values committed, by disjoint groups)."""
        prev = raft.log.snapshot.config
        for e in raft.log.config_entries:
            pair = (prev, e.data)
            prev = e.data
            if pair in self.checked_config_pairs:
                continue
            self.checked_config_pairs.add(pair)
            a = Membership.decode(pair[0]).voter_ids if pair[0] else frozenset(self.sim.voter_ids)
            b = Membership.decode(pair[1]).voter_ids
            need_a = max(0, len(a) // 2 + 1 - len(a - b))
            need_b = max(0, len(b) // 2 + 1 - len(b - a))
            if need_a + need_b <= len(a & b):
                self.sim.fail(
                    f"node {node_id} holds memberships with disjoint majorities: voters"
                    f" {sorted(a)} then {sorted(b)} (entry {e.index})"
                )

    def _committed_config(self, node_id: int, raft: RaftNode) -> None:
        """The leader's membership is committed: it must be the one committed at its index."""
        known = self.committed.get(raft.conf_index)
        if known is not None and known[1] != raft.config.encode():
            self.sim.fail(
                f"leader {node_id} runs membership {raft.config} from index {raft.conf_index},"
                f" but {known} was committed there"
            )

    def accepted_committed(self) -> None:
        for leader, term, idx, data in self.accepted:
            raft = self.sim.nodes[leader].raft
            if raft is None or raft.role is not Role.LEADER or raft.term != term:
                continue
            got = self.committed.get(idx)
            if idx <= raft.snapshot.index and got is None:
                continue
            if got != (term, data):
                self.sim.fail(
                    f"entry {idx} accepted by leader {leader} in term {term} not committed"
                )
