"""`RaftNode`: the pure Raft consensus state machine (after etcd-io/raft's raft.go + rawnode.go).

Inputs: `step(message)`, `tick()`, `propose(records)`, `compact(index, data)`,
`transfer_leadership(to)`. Output: `ready()` — messages to send, entries and hard state to
persist, committed entries to apply — acknowledged with `advance(ready)`. The node performs no
I/O, reads no clock and draws randomness only from the `rng` it is given, so a driver (asyncio
transport + file storage in production, a virtual-time scheduler in tests/sim) owns all effects.

Features: PreVote, CheckQuorum with a leader lease, batched and pipelined replication
(`max_entries_per_msg`, `max_inflight`), commit by majority of current-term entries only (a new
leader appends a NOOP entry), snapshots and InstallSnapshot, leadership transfer (TimeoutNow),
observers (non-voting members that receive the log; they never campaign or vote), and
membership changes one server at a time (membership.py): `add_voter` adds a learner, lets it
catch up, then promotes it; `remove_voter` demotes a voter to learner; `remove_learner` drops
one. The constructor's voters are the bootstrap membership, in force until the log (or the
snapshot) holds a CONFIG entry. Observers given to the constructor or `add_observer` are local
to this node (not replicated); learners are part of the replicated membership.

Threading: a RaftNode is not thread-safe. One thread (the driver's) makes every call.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from controller.raft import campaign
from controller.raft.campaign import Campaign
from controller.raft.errors import LogCompacted, NotLeader, ProposalDropped
from controller.raft.leader import Leader
from controller.raft.log import RaftLog
from controller.raft.members import Members
from controller.raft.membership import Membership
from controller.raft.messages import (
    AppendEntries,
    AppendResponse,
    Entry,
    EntryKind,
    HardState,
    Heartbeat,
    HeartbeatResponse,
    InstallSnapshot,
    Message,
    Snapshot,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from controller.raft.outbox import Outbox
from controller.raft.progress import Progress
from controller.raft.state import (
    QuorumState,
    Ready,
    Rng,
    Role,
    SoftState,
    StorageState,
)

_log = logging.getLogger(__name__)

_FROM_LEADER = (AppendEntries, Heartbeat, InstallSnapshot)


class RaftNode:
    def __init__(
        self,
        node_id: int,
        voters: Iterable[int],
        *,
        endpoints: Mapping[int, str] | None = None,
        observers: Iterable[int] = (),
        storage_state: StorageState | None = None,
        rng: Rng,
        election_timeout_ticks: int = 10,
        heartbeat_ticks: int = 1,
        pre_vote: bool = True,
        check_quorum: bool = True,
        max_entries_per_msg: int = 64,
        max_inflight: int = 16,
        max_uncommitted_entries: int = 10_000,
        max_committed_per_ready: int = 1024,
    ) -> None:
        if heartbeat_ticks < 1 or election_timeout_ticks <= heartbeat_ticks:
            raise ValueError("need 1 <= heartbeat_ticks < election_timeout_ticks")
        if max_entries_per_msg < 1 or max_inflight < 1 or max_committed_per_ready < 1:
            raise ValueError("max_entries_per_msg, max_inflight, max_committed_per_ready >= 1")
        self.id = node_id
        self.members = Members(node_id, voters, endpoints, observers, f"[raft node={node_id}]")
        self.rng = rng
        self.election_timeout = election_timeout_ticks
        self.heartbeat_timeout = heartbeat_ticks
        self.pre_vote = pre_vote
        self.check_quorum = check_quorum
        self.max_entries_per_msg = max_entries_per_msg
        self.max_inflight = max_inflight
        self.max_uncommitted = max_uncommitted_entries
        self.max_committed_per_ready = max_committed_per_ready
        self.prefix = f"[raft node={node_id}]"

        st = storage_state or StorageState()
        self.term = st.hard_state.term
        self.vote = st.hard_state.vote
        self.log = RaftLog(st.snapshot, list(st.entries), st.hard_state.commit)
        self.role = Role.OBSERVER
        self._lead: Leader | None = None  # while leading: its progress, heartbeats, transfer
        self._on_log_changed()
        self.role = Role.FOLLOWER if self.is_voter else Role.OBSERVER
        self.leader_id: int | None = None
        self.ticks = 0
        self.election_elapsed = 0
        self.randomized_timeout = self.election_timeout
        self._ballot: Campaign | None = None  # while (pre-)campaigning: its votes

        self._out = Outbox(self.prefix, self.hard_state(), self.soft_state())
        self._reset_election_timeout()

    # ------------------------------------------------------------------ public: inputs
    def tick(self) -> None:
        """Advance logical time by one tick (the driver calls it every tick interval)."""
        self._check_idle()
        self.ticks += 1
        if self._lead is not None:
            self._tick_leader(self._lead)
        else:
            self._tick_election()

    def step(self, m: Message) -> None:
        """Feed one message received from the network (duplicates/reordering are tolerated)."""
        self._check_idle()
        if m.to != self.id:
            raise ValueError(f"{self.prefix} message for node {m.to}: {m!r:.200}")
        if m.term > self.term:
            if isinstance(m, VoteRequest) and not m.transfer and self._in_lease():
                _log.debug("%s ignore %s from %s: leader lease", self.prefix, m.TYPE, m.from_)
                return
            if isinstance(m, VoteRequest) and m.pre_vote:
                pass  # a pre-vote never changes our term
            elif isinstance(m, VoteResponse) and m.pre_vote and m.granted:
                pass  # granted pre-votes carry the term we asked about
            else:
                leader = m.from_ if isinstance(m, _FROM_LEADER) else None
                self._become_follower(m.term, leader)
        elif m.term < self.term:
            if isinstance(m, (AppendEntries, Heartbeat)) and (self.check_quorum or self.pre_vote):
                # Tell a deposed leader (maybe partitioned away while we elected) our term.
                self._send(AppendResponse(m.from_, self.id, self.term, success=False))
            elif isinstance(m, VoteRequest) and m.pre_vote:
                self._send(VoteResponse(m.from_, self.id, self.term, False, pre_vote=True))
            return

        if isinstance(m, VoteRequest):
            self._handle_vote_request(m)
        elif isinstance(m, VoteResponse):
            self._handle_vote_response(m)
        elif isinstance(m, _FROM_LEADER):
            if self.role is Role.LEADER:
                raise AssertionError(f"{self.prefix} two leaders in term {self.term}: {m!r:.200}")
            if self.role in (Role.CANDIDATE, Role.PRE_CANDIDATE):
                self._become_follower(m.term, m.from_)
            self.leader_id = m.from_
            self.election_elapsed = 0
            if isinstance(m, AppendEntries):
                self._handle_append(m)
            elif isinstance(m, Heartbeat):
                self.log.commit_to(m.commit)
                self._send(HeartbeatResponse(m.from_, self.id, self.term))
            else:
                self._handle_snapshot(m)
        elif isinstance(m, AppendResponse):
            if self._lead is not None:
                self._lead.handle_append_response(m)
                self._maybe_step_down_removed()
        elif isinstance(m, HeartbeatResponse):
            if self._lead is not None:
                self._lead.handle_heartbeat_response(m)
        elif isinstance(m, TimeoutNow):
            if self.is_voter and self.role is not Role.LEADER:
                _log.info("%s TimeoutNow from %s: campaigning", self.prefix, m.from_)
                self._campaign(transfer=True)
        else:
            raise TypeError(f"unknown message type {type(m).__name__}")

    def propose(self, records: list[bytes]) -> int:
        """Append `records` (one entry each) on the leader. Returns the index of the last one
        (the first is `last - len(records) + 1`). Raises NotLeader or ProposalDropped."""
        lead = self._leading()
        if lead.transferee is not None:
            raise ProposalDropped(f"leadership transfer to {lead.transferee} in progress")
        if not records:
            return self.log.last_index
        if self.log.last_index - self.log.committed + len(records) > self.max_uncommitted:
            raise ProposalDropped(f"more than {self.max_uncommitted} uncommitted entries")
        lead.append([(bytes(r), EntryKind.NORMAL) for r in records])
        return self.log.last_index

    def compact(self, index: int, snapshot_data: bytes) -> None:
        """The state machine's owner took a snapshot of its state after applying `index`:
        keep it and drop the log up to `index`. `index` must be applied already."""
        self._check_idle()
        if index <= self.log.snapshot.index:
            return
        if index > self.log.applied:
            raise ValueError(f"cannot compact to {index}: only {self.log.applied} applied")
        term = self.log.term(index)
        assert term is not None
        snap = Snapshot(index, term, bytes(snapshot_data), self.log.config_at(index))
        self.log.compact(snap)
        self._out.compact = snap
        _log.debug("%s compacted log to %d", self.prefix, index)

    def transfer_leadership(self, to: int) -> None:
        """Hand leadership to voter `to`: bring it up to date, then send it TimeoutNow.
        Proposals are dropped until the transfer ends (success, or one election timeout)."""
        lead = self._leading()
        if to not in self.voters:
            raise ValueError(f"node {to} is not a voter")
        if to == self.id:
            return
        _log.info("%s transferring leadership to %s", self.prefix, to)
        self.election_elapsed = 0
        lead.transfer(to)

    def add_observer(self, node_id: int) -> None:
        """Start replicating to a non-voting observer (call on every node, or at least the
        leader; a new leader learns observers from its constructor/calls only)."""
        self._check_idle()
        was_voter = self.members.is_voter
        self.members.add_observer(node_id)
        self._use_config(was_voter)

    def remove_observer(self, node_id: int) -> None:
        self._check_idle()
        was_voter = self.members.is_voter
        self.members.remove_observer(node_id)
        self._use_config(was_voter)

    # ------------------------------------------------------------------ membership changes
    # (the three steps are the Leader's: see there; NotLeader on any other node)
    def add_voter(self, node_id: int, endpoint: str) -> bool:
        return self._leading().add_voter(node_id, endpoint)

    def remove_voter(self, node_id: int) -> bool:
        return self._leading().remove_voter(node_id)

    def remove_learner(self, node_id: int) -> bool:
        return self._leading().remove_learner(node_id)

    def membership_blocked(self) -> str | None:
        """Why the leader may not start a membership change now (None: it may)."""
        return self.members.blocked(self.log, self.term, self.lead_transferee)

    def learner_caught_up(self, node_id: int) -> bool:
        """Leader: learner `node_id` is close enough to the commit index to be promoted
        (`Leader.learner_caught_up`); False on any other node."""
        return self._lead is not None and self._lead.learner_caught_up(node_id)

    @property
    def progress(self) -> Mapping[int, Progress]:
        """The leader's view of every other member (empty unless leading)."""
        return self._lead.progress if self._lead is not None else {}

    @property
    def lead_transferee(self) -> int | None:
        """The voter leadership is being handed to (None: no transfer in flight)."""
        return self._lead.transferee if self._lead is not None else None

    def _leading(self) -> Leader:
        """The leader state, for a call only a leader may make; NotLeader otherwise."""
        self._check_idle()
        if self._lead is None:
            raise NotLeader(self.leader_id, self.term)
        assert self.role is Role.LEADER, self
        return self._lead

    def _maybe_step_down_removed(self) -> None:
        """A leader that is no voter of the committed membership hands over (by stepping down:
        the remaining voters elect one of themselves)."""
        m = self.members
        if self._lead is not None and not m.is_voter and m.committed(self.log):
            _log.info("%s no longer a voter: stepping down", self.prefix)
            self._become_follower(self.term, None)

    # ------------------------------------------------------------------ membership in force
    @property
    def config(self) -> Membership:
        """The membership in force (`Members.config`)."""
        return self.members.config

    @property
    def conf_index(self) -> int:
        return self.members.conf_index

    @property
    def voters(self) -> frozenset[int]:
        return self.members.voters

    @property
    def observers(self) -> set[int]:
        return self.members.observers

    @property
    def is_voter(self) -> bool:
        return self.members.is_voter

    def _on_log_changed(self) -> None:
        """The log's tail or snapshot changed: put its latest membership in force."""
        was_voter = self.members.is_voter
        if self.members.follow(self.log):
            self._use_config(was_voter)

    def _use_config(self, was_voter: bool) -> None:
        """Act on the membership in force: a leader tracks the progress of exactly its members;
        a node that became, or stopped being, a voter changes role."""
        m = self.members
        if self._lead is not None:
            self._lead.track(m.voters, m.voters | m.observers)
        elif m.is_voter != was_voter or (not m.is_voter and self.role is not Role.OBSERVER):
            if m.is_voter:
                self.role = Role.FOLLOWER
            else:
                self.role = Role.OBSERVER
                self._ballot = None

    # ------------------------------------------------------------------ public: outputs
    def soft_state(self) -> SoftState:
        return SoftState(self.role, self.leader_id, self.term)

    def hard_state(self) -> HardState:
        return HardState(self.term, self.vote, self.log.committed)

    def has_ready(self) -> bool:
        return self._out.has_ready(self.log, self.hard_state(), self.soft_state())

    def ready(self) -> Ready:
        """Collect pending work. Must be followed by `advance(ready)` before any other call."""
        hs, ss = self.hard_state(), self.soft_state()
        return self._out.ready(self.log, hs, ss, self.max_committed_per_ready)

    def advance(self, rd: Ready) -> None:
        """The driver persisted, sent and applied `rd`."""
        self._out.advance(rd, self.log)

    # ------------------------------------------------------------------ public: reading
    @property
    def commit_index(self) -> int:
        return self.log.committed

    @property
    def applied_index(self) -> int:
        return self.log.applied

    @property
    def last_index(self) -> int:
        return self.log.last_index

    @property
    def snapshot(self) -> Snapshot:
        """The latest snapshot (index 0 when none), e.g. to serve a fetch below the log start."""
        return self.log.snapshot

    def committed_entries_from(self, index: int, max_entries: int) -> list[Entry]:
        """Committed entries starting at `index` (for observers fetching the log). Raises
        LogCompacted when `index` is at or below the snapshot: serve `snapshot` first."""
        if index <= self.log.snapshot.index:
            raise LogCompacted(self.log.snapshot.index)
        return self.log.slice(index, self.log.committed + 1, max_entries)

    def entry_term(self, index: int) -> int | None:
        return self.log.term(index)

    def describe_quorum(self) -> QuorumState:
        voters, observers = self._lead.replica_states() if self._lead is not None else ((), ())
        return QuorumState(
            node_id=self.id,
            role=self.role,
            leader_id=self.leader_id,
            term=self.term,
            commit_index=self.log.committed,
            high_watermark=self.log.committed,
            now_tick=self.ticks,
            voters=voters,
            observers=observers,
        )

    def __repr__(self) -> str:
        return (
            f"RaftNode({self.id} {self.role.value} term={self.term} vote={self.vote}"
            f" leader={self.leader_id} last={self.log.last_index} commit={self.log.committed}"
            f" applied={self.log.applied})"
        )

    # ------------------------------------------------------------------ roles
    def _become_follower(self, term: int, leader: int | None) -> None:
        if term != self.term:
            self.term = term
            self.vote = None
        old = self.role
        self.role = Role.FOLLOWER if self.is_voter else Role.OBSERVER
        self.leader_id = leader
        self._reset()
        if old is Role.LEADER:
            self._use_config(self.members.is_voter)  # (progress was dropped)
            _log.info("%s stepped down in term %d (leader=%s)", self.prefix, term, leader)

    def _become_pre_candidate(self) -> None:
        self.role = Role.PRE_CANDIDATE
        self.leader_id = None
        self._ballot = None
        self._lead = None

    def _become_candidate(self) -> None:
        self.term += 1
        self.vote = self.id
        self.role = Role.CANDIDATE
        self.leader_id = None
        self._reset()

    def _become_leader(self) -> None:
        self.role = Role.LEADER
        self.leader_id = self.id
        self._reset()
        self._lead = lead = Leader(self, self._out.send, self._on_log_changed)
        _log.info("%s became leader in term %d", self.prefix, self.term)
        lead.append([(b"", EntryKind.NOOP)])

    def _reset(self) -> None:
        self.election_elapsed = 0
        self._reset_election_timeout()
        self._ballot = None
        self._lead = None

    def _reset_election_timeout(self) -> None:
        self.randomized_timeout = self.election_timeout + self.rng.randint(
            0, self.election_timeout - 1
        )

    def _in_lease(self) -> bool:
        return (
            self.check_quorum
            and self.leader_id is not None
            and self.election_elapsed < self.election_timeout
        )

    # ------------------------------------------------------------------ ticks
    def _tick_leader(self, lead: Leader) -> None:
        self._maybe_step_down_removed()
        if self._lead is None:
            return
        self.election_elapsed += 1
        if self.election_elapsed >= self.election_timeout:
            self.election_elapsed = 0
            if self.check_quorum and not lead.quorum_active():
                _log.info("%s lost contact with a quorum: stepping down", self.prefix)
                self._become_follower(self.term, None)
                return
            lead.end_transfer()
        lead.tick_heartbeat()

    def _tick_election(self) -> None:
        self.election_elapsed += 1
        if self.election_elapsed >= self.randomized_timeout and self.members.may_campaign(self.log):
            self.election_elapsed = 0
            self._campaign(transfer=False)

    # ------------------------------------------------------------------ elections
    def quorum(self) -> int:
        """Votes (or acknowledgements) that decide: a majority of the voters."""
        return len(self.voters) // 2 + 1

    def _campaign(self, transfer: bool) -> None:
        if self.pre_vote and not transfer:
            self._become_pre_candidate()
            self._request_votes(self.term + 1, pre_vote=True, transfer=False)
        else:
            self._become_candidate()
            self._request_votes(self.term, pre_vote=False, transfer=transfer)

    def _request_votes(self, term: int, pre_vote: bool, transfer: bool) -> None:
        """Vote for ourselves, then ask every other voter (unless that vote decides it)."""
        self._ballot = c = Campaign(self.id, pre_vote)
        if self._tally(c):
            return
        c.ask(self._send, self.voters, term, self.log.last_index, self.log.last_term, transfer)

    def _tally(self, c: Campaign) -> bool:
        """Act on the campaign's outcome, if decided (True then)."""
        won = c.outcome(self.voters)
        if won is None:
            return False
        if not won:
            self._become_follower(self.term, None)
        elif self.role is Role.PRE_CANDIDATE:
            self._become_candidate()
            self._request_votes(self.term, pre_vote=False, transfer=False)
        else:
            self._become_leader()
        return True

    def _handle_vote_request(self, m: VoteRequest) -> None:
        got = campaign.answer(m, self.id, self.term, self.vote, self.leader_id, self.log)
        if got.granted and not m.pre_vote:
            self.vote = m.from_
            self.election_elapsed = 0
        self._send(got)

    def _handle_vote_response(self, m: VoteResponse) -> None:
        if m.pre_vote:
            if self.role is not Role.PRE_CANDIDATE:
                return
            if m.granted and m.term != self.term + 1:
                return  # from an older pre-campaign
        elif self.role is not Role.CANDIDATE:
            return
        c = self._ballot
        assert c is not None and c.pre_vote == m.pre_vote, self  # (the role's campaign)
        c.record(m.from_, m.granted)
        self._tally(c)

    # ------------------------------------------------------------------ follower side
    def _handle_append(self, m: AppendEntries) -> None:
        if m.prev_index < self.log.committed:
            self._send(AppendResponse(m.from_, self.id, self.term, match_index=self.log.committed))
            return
        if self.log.match_term(m.prev_index, m.prev_term):
            last_new = self.log.maybe_append(m.prev_index, m.entries)
            self._on_log_changed()
            self.log.commit_to(min(m.commit, last_new))
            self._send(AppendResponse(m.from_, self.id, self.term, match_index=last_new))
            return
        hint = self.log.conflict_hint(m.prev_index)
        self._send(
            AppendResponse(
                m.from_,
                self.id,
                self.term,
                success=False,
                rejected_index=m.prev_index,
                hint_index=hint,
            )
        )

    def _handle_snapshot(self, m: InstallSnapshot) -> None:
        s = m.snapshot
        if s.index <= self.log.committed:
            pass
        elif self.log.match_term(s.index, s.term):
            self.log.commit_to(s.index)
        else:
            _log.info("%s installing snapshot at %d (term %d)", self.prefix, s.index, s.term)
            self.log.restore(s)
            self._on_log_changed()
            self._out.install = s
            self._out.compact = None
        self._send(AppendResponse(m.from_, self.id, self.term, match_index=self.log.committed))

    # ------------------------------------------------------------------ plumbing
    def _send(self, m: Message) -> None:
        self._out.send(m)

    def _check_idle(self) -> None:
        self._out.check_idle()
