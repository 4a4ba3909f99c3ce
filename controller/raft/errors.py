"""Exceptions raised by the Raft core to its driver. Any thread that owns the node may see them."""

from __future__ import annotations


class RaftError(Exception):
    """Base of the Raft core's exceptions."""


class NotLeader(RaftError):
    """`propose`/`transfer_leadership` on a node that is not the leader. `leader_id` is the
    leader this node knows of (None when unknown), for a redirect."""

    def __init__(self, leader_id: int | None, term: int) -> None:
        super().__init__(f"not the leader (leader={leader_id}, term={term})")
        self.leader_id = leader_id
        self.term = term


class ProposalDropped(RaftError):
    """The leader refuses new entries for now: a leadership transfer is in progress, or
    `max_uncommitted_entries` are already waiting to commit. Retry later (or elsewhere)."""


class LogCompacted(RaftError):
    """The requested entries were compacted into the snapshot ending at `snapshot_index`."""

    def __init__(self, snapshot_index: int) -> None:
        super().__init__(f"entries up to {snapshot_index} are compacted; read the snapshot")
        self.snapshot_index = snapshot_index
