"""`Campaign`: what a `RaftNode` holds while it campaigns for one term: whether it is a
pre-vote (PreVote: would the voters elect it in the next term? no term changes) or an
election, and the votes of the voters so far (its own first). `answer` is the other side:
how a node answers another's VoteRequest.

The node makes a `Campaign` when it becomes a pre-candidate or candidate, and drops it on any
other role change, so no vote outlives its campaign. The campaign asks the voters and counts
their answers against the voters in force; the node decides the role changes from `outcome`
(after etcd-io/raft's `poll`/`campaign`).

Pure: no I/O. Called only from the thread that owns the node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from controller.raft.messages import Message, VoteRequest, VoteResponse

if TYPE_CHECKING:
    from controller.raft.log import RaftLog


class Campaign:
    def __init__(self, node_id: int, pre_vote: bool) -> None:
        self.node_id = node_id
        self.pre_vote = pre_vote
        self.votes: dict[int, bool] = {node_id: True}  # voter -> granted (its first answer)

    def ask(
        self,
        send: Callable[[Message], None],
        voters: frozenset[int],
        term: int,
        last_log_index: int,
        last_log_term: int,
        transfer: bool,
    ) -> None:
        """A VoteRequest for `term` to every other voter, in id order."""
        for v in sorted(voters - {self.node_id}):
            send(
                VoteRequest(
                    v,
                    self.node_id,
                    term,
                    last_log_index=last_log_index,
                    last_log_term=last_log_term,
                    pre_vote=self.pre_vote,
                    transfer=transfer,
                )
            )

    def record(self, voter: int, granted: bool) -> None:
        """A voter's answer; a repeated answer (a duplicate message) counts once, as first."""
        self.votes.setdefault(voter, granted)

    def outcome(self, voters: frozenset[int]) -> bool | None:
        """True once a majority of `voters` granted, False once a majority refused, else None
        (votes of nodes that are not voters do not count)."""
        quorum = len(voters) // 2 + 1
        granted = sum(1 for v, g in self.votes.items() if g and v in voters)
        if granted >= quorum:
            return True
        denied = sum(1 for v, g in self.votes.items() if not g and v in voters)
        if denied >= quorum:
            return False
        return None


def answer(
    m: VoteRequest, node_id: int, term: int, vote: int | None, leader_id: int | None, log: RaftLog
) -> VoteResponse:
    """The answer of a node in `term` (its vote `vote`, the leader it knows `leader_id`) to `m`:
    granted if it may vote for the sender (it voted for it already, or for nobody and knows no
    leader, or it is a pre-vote for a later term) and the sender's log is at least as up to
    date as `log`; a refusal carries the node's term. Granting a real vote is the node's to
    record (its vote is durable state)."""
    may_vote = (
        vote == m.from_ or (vote is None and leader_id is None) or (m.pre_vote and m.term > term)
    )
    if may_vote and log.is_up_to_date(m.last_log_index, m.last_log_term):
        return VoteResponse(m.from_, node_id, m.term, True, pre_vote=m.pre_vote)
    return VoteResponse(m.from_, node_id, term, False, pre_vote=m.pre_vote)
