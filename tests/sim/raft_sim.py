"""Deterministic simulation of a Raft group (after Kafka's RaftEventSimulationTest and TigerBeetle's
VOPR): real `RaftNode`s, one event scheduler on a virtual clock, one seeded RNG for everything.

    chaos phase   the network drops, delays (so reorders), duplicates and partitions (symmetric and
                  one-way) messages; nodes crash (losing unsynced writes: a random prefix of the
                  current Ready's writes survives) and restart; nodes snapshot and compact; clients
                  propose; leaders transfer leadership; with `membership`, the leader adds voters
                  (spare nodes join as learners, catch up, are promoted) and removes voters
                  (demoted to learners; the leader itself included), one server at a time
    heal phase    no more faults, every node up: a leader must appear within a bound, and entries
                  proposed to it must commit and be applied everywhere (observer included)

Invariants, checked after every event: one leader per term; per node, term and commit index never
decrease (and the durable term never decreases across crashes); committed entries never change;
every node's applied sequence agrees (a digest per applied index); a leader holds every committed
entry (leader completeness). CONFIG entries are log entries like any other, so "committed
prefixes agree" holds across membership changes; each membership that commits must also have
been in force on the leader that committed it, and any two successive memberships in any log
must have intersecting majorities (what the one-server-at-a-time rule buys). The heal phase counts the members of the healed
leader's membership (and the fixed observers). At the end: every proposal accepted by a leader that is still leader
of that term is committed.

`run_seed(seed, config)` raises `SimFailure` (message: seed, replay command, recent trace).
"""

from __future__ import annotations

import heapq
import random
import zlib
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from raft_checks import RaftChecks

from controller.raft.core import RaftNode
from controller.raft.errors import NotLeader, ProposalDropped
from controller.raft.messages import Entry, EntryKind, HardState, Message, Snapshot
from controller.raft.state import Ready, Role, StorageState

TICK_MS = 10
INBOX_MAX = 512


class SimFailure(AssertionError):
    pass


@dataclass
class SimConfig:
    voters: int = 3
    observers: int = 1
    chaos_ms: int = 1500
    heal_bound_ms: int = 3000
    election_timeout_ticks: int = 10
    heartbeat_ticks: int = 2
    max_delay_ms: int = 12
    drop_p: float = 0.05
    dup_p: float = 0.03
    fault_every_ms: int = 150
    propose_every_ms: int = 25
    max_entries_per_msg: int = 4
    max_inflight: int = 4
    pre_vote: bool = True
    check_quorum: bool = True
    new_leader_crash_p: float = 0.2
    restart_max_ms: int = 400
    spares: int = 0
    """Nodes outside the bootstrap membership, for `membership` changes to add."""
    membership: bool = False
    """Faults include membership changes (add a voter, remove a voter)."""


@dataclass
class SimStore:
    """Durable state of one node, plus the writes of the Ready in flight (not yet synced)."""

    hard_state: HardState = field(default_factory=HardState)
    snapshot: Snapshot = field(default_factory=Snapshot)
    entries: list[Entry] = field(default_factory=list)
    pending: list[tuple[str, Any]] = field(default_factory=list)

    def begin(self, rd: Ready) -> None:
        ops: list[tuple[str, Any]] = []
        if rd.snapshot_to_install is not None:
            ops.append(("install", rd.snapshot_to_install))
        if rd.snapshot_to_persist is not None:
            ops.append(("compact", rd.snapshot_to_persist))
        ops.extend(("entry", e) for e in rd.entries_to_persist)
        if rd.hard_state is not None:
            ops.append(("hard", rd.hard_state))
        self.pending = ops

    def sync(self, upto: int | None = None) -> None:
        ops = self.pending if upto is None else self.pending[:upto]
        truncated = False
        for kind, v in ops:
            if kind == "install":
                self.snapshot = v
                self.entries = []
            elif kind == "compact":
                self.snapshot = v
                self.entries = [e for e in self.entries if e.index > v.index]
            elif kind == "entry":
                if not truncated:
                    self.entries = [e for e in self.entries if e.index < v.index]
                    truncated = True
                self.entries.append(v)
            else:
                if v.term < self.hard_state.term:
                    raise SimFailure(f"durable term went back {self.hard_state} -> {v}")
                self.hard_state = v
        self.pending = []

    def state(self) -> StorageState:
        return StorageState(self.hard_state, self.snapshot, tuple(self.entries))


def _digest(prev: int, data: bytes) -> int:
    return zlib.crc32(data, prev)


def _snap_data(index: int, digest: int) -> bytes:
    return f"{index}:{digest}".encode()


class SimNode:
    def __init__(self, node_id: int) -> None:
        self.id = node_id
        self.store = SimStore()
        self.raft: RaftNode | None = None
        self.incarnation = 0
        self.busy = False
        self.inbox: deque[Message] = deque()
        self.sm_index = 0  # state machine: applied index and running digest
        self.sm_digest = 0
        self.max_term = 0
        self.max_commit = 0


class Simulation:
    def __init__(self, seed: int, cfg: SimConfig) -> None:
        self.seed = seed
        self.cfg = cfg
        self.rng = random.Random(seed)
        self.now = 0
        self._seq = 0
        self.events: list[tuple[int, int, str, tuple[Any, ...]]] = []
        self.voter_ids = list(range(1, cfg.voters + 1))
        self.observer_ids = list(range(cfg.voters + 1, cfg.voters + cfg.observers + 1))
        first_spare = cfg.voters + cfg.observers + 1
        self.spare_ids = list(range(first_spare, first_spare + cfg.spares))
        self.nodes = {i: SimNode(i) for i in self.voter_ids + self.observer_ids + self.spare_ids}
        self.member_ops: list[tuple[str, int]] = []  # membership changes under way (op, node)
        self.n_member_changes = 0
        self.cut: set[tuple[int, int]] = set()
        self.faults_on = True
        self.trace: deque[str] = deque(maxlen=60)
        self.checks = RaftChecks(self)  # global knowledge for the invariants
        self.digest_at: dict[int, int] = {0: 0}
        self.n_proposed = 0
        self.n_events = 0
        for i in self.nodes:
            self._start(i)

    # ------------------------------------------------------------------ scheduling
    def at(self, t: int, kind: str, *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self.events, (t, self._seq, kind, args))

    def fail(self, msg: str) -> None:
        trace = "\n    ".join(self.trace)
        raise SimFailure(
            f"raft simulation seed={self.seed} failed at t={self.now}ms: {msg}\n"
            f"  replay: pytest tests/sim --seed {self.seed}   (or: python -m tests.sim.run "
            f"--seed {self.seed} --voters {self.cfg.voters})\n  last events:\n    {trace}"
        )

    def run(self) -> None:
        cfg = self.cfg
        self.at(TICK_MS, "tick")
        self.at(self.rng.randint(1, cfg.fault_every_ms), "fault")
        self.at(self.rng.randint(1, cfg.propose_every_ms), "propose")
        self.at(cfg.chaos_ms, "heal")
        self._loop(until=cfg.chaos_ms)
        # Heal phase: a leader within the bound, then entries proposed to it commit everywhere.
        # If leadership moves meanwhile (a TimeoutNow still in flight, say) the entries may be
        # lost legitimately: try again with the new leader, within the same overall bound.
        deadline = self.now + cfg.heal_bound_ms
        while True:
            leader = self._loop(until=deadline, stop=self._stable_leader)
            if leader is None:
                self.fail(f"no stable leader within {cfg.heal_bound_ms}ms after healing")
            raft = self.nodes[leader].raft
            assert raft is not None
            term = raft.term
            last = 0
            for k in range(3):
                data = f"final-{term}-{k}".encode()
                try:
                    last = raft.propose([data])
                except (NotLeader, ProposalDropped) as e:
                    self.fail(f"healed leader {leader} refused a proposal: {e}")
                self.checks.accepted.append((leader, term, last, data))
            self._kick(leader)

            def done(leader: int = leader, term: int = term, last: int = last) -> str | None:
                r = self.nodes[leader].raft
                if r is None or r.role is not Role.LEADER or r.term != term:
                    return "leader changed"
                if all(n.raft is not None and n.sm_index >= last for n in self._members(r)):
                    return "applied"
                return None

            outcome = self._loop(until=deadline, stop=done)
            if outcome == "applied":
                break
            if outcome is None:
                states = ", ".join(repr(n.raft) for n in self.nodes.values())
                self.fail(f"entries up to {last} of leader {leader} not applied: {states}")
        self.checks.accepted_committed()

    def _members(self, leader: RaftNode) -> list[SimNode]:
        """The nodes the healed leader must reach: its voters and learners, the fixed observers."""
        ids = leader.voters | leader.config.learner_ids | set(self.observer_ids)
        return [self.nodes[i] for i in sorted(ids)]

    def _loop(self, until: int, stop: Any = None) -> Any:
        while self.events and self.events[0][0] <= until:
            t, _, kind, args = heapq.heappop(self.events)
            self.now = t
            self.n_events += 1
            getattr(self, "_ev_" + kind)(*args)
            if stop is not None and kind == "tick":
                result = stop()
                if result:
                    return result
        self.now = until
        return None

    # ------------------------------------------------------------------ node driver
    def _start(self, i: int) -> None:
        n = self.nodes[i]
        st = n.store.state()
        n.raft = RaftNode(
            i,
            self.voter_ids,
            observers=self.observer_ids,
            storage_state=st,
            rng=random.Random(self.rng.random()),
            election_timeout_ticks=self.cfg.election_timeout_ticks,
            heartbeat_ticks=self.cfg.heartbeat_ticks,
            max_entries_per_msg=self.cfg.max_entries_per_msg,
            max_inflight=self.cfg.max_inflight,
            pre_vote=self.cfg.pre_vote,
            check_quorum=self.cfg.check_quorum,
        )
        n.busy = False
        n.inbox.clear()
        n.max_term = st.hard_state.term  # unsynced term changes are legitimately lost
        n.max_commit = n.raft.commit_index
        self._load_snapshot(n, st.snapshot)

    def _load_snapshot(self, n: SimNode, snap: Snapshot) -> None:
        if snap.index == 0:
            n.sm_index, n.sm_digest = 0, 0
            return
        idx_s, dig_s = snap.data.decode().split(":")
        n.sm_index, n.sm_digest = int(idx_s), int(dig_s)
        if n.sm_index != snap.index:
            self.fail(f"node {n.id}: snapshot data {snap.data!r} for index {snap.index}")
        self._check_digest(n)

    def _check_digest(self, n: SimNode) -> None:
        known = self.digest_at.get(n.sm_index)
        if known is None:
            self.digest_at[n.sm_index] = n.sm_digest
        elif known != n.sm_digest:
            self.fail(f"node {n.id}: applied state at {n.sm_index} differs from another node's")

    def _kick(self, i: int) -> None:
        """Run the driver loop for node i: take a Ready, write it, sync after a disk delay."""
        n = self.nodes[i]
        raft = n.raft
        if raft is None or n.busy:
            return
        if (
            self.checks.node(n)
            and self.faults_on
            and self.rng.random() < self.cfg.new_leader_crash_p
        ):
            # crash a new leader before (or while) its first entries replicate
            self.at(self.now + self.rng.randint(0, 2 * self.cfg.max_delay_ms), "crash", n.id)
        if not raft.has_ready():
            return
        rd = raft.ready()
        n.busy = True
        n.store.begin(rd)
        if rd.must_sync():
            self.at(self.now + self.rng.randint(0, 3), "synced", i, n.incarnation, rd)
        else:
            self._ev_synced(i, n.incarnation, rd)

    def _ev_synced(self, i: int, incarnation: int, rd: Ready) -> None:
        n = self.nodes[i]
        if n.incarnation != incarnation or n.raft is None:
            return
        n.store.sync()
        for m in rd.messages:
            self._send(m)
        if rd.snapshot_to_install is not None:
            self._load_snapshot(n, rd.snapshot_to_install)
        for e in rd.committed_entries:
            if e.index != n.sm_index + 1:
                self.fail(f"node {i} applied {e.index} after {n.sm_index}")
            n.sm_index = e.index
            if e.kind is EntryKind.NORMAL:
                n.sm_digest = _digest(n.sm_digest, e.data)
            self._check_digest(n)
        n.raft.advance(rd)
        n.busy = False
        while n.inbox:
            n.raft.step(n.inbox.popleft())
        self._kick(i)

    # ------------------------------------------------------------------ events
    def _ev_tick(self) -> None:
        for i in self.rng.sample(list(self.nodes), len(self.nodes)):
            n = self.nodes[i]
            if n.raft is not None and not n.busy:
                n.raft.tick()
                self._kick(i)
        if self.member_ops:
            self._step_member_ops()
        self.at(self.now + TICK_MS, "tick")

    def _step_member_ops(self) -> None:
        """Drive the membership changes under way on the current leader (as an operator's tool
        retries AddRaftVoter / RemoveRaftVoter until it answers)."""
        leaders = [n for n in self.nodes.values() if n.raft and n.raft.role is Role.LEADER]
        if not leaders:
            return
        n = max(leaders, key=lambda x: x.raft.term if x.raft else 0)
        if n.busy or n.raft is None:
            return
        op, node = self.member_ops[0]
        if op == "add":
            done = n.raft.add_voter(node, f"sim:{node}")
        else:
            done = n.raft.remove_voter(node)
        self._kick(n.id)
        if done:
            self.trace.append(
                f"t={self.now} MEMBER {op} {node} done (voters {sorted(n.raft.voters)})"
            )
            self.member_ops.pop(0)
            self.n_member_changes += 1

    def _send(self, m: Message) -> None:
        if (m.from_, m.to) in self.cut:
            return
        if self.faults_on and self.rng.random() < self.cfg.drop_p:
            return
        self.at(self.now + self.rng.randint(1, self.cfg.max_delay_ms), "deliver", m)
        if self.faults_on and self.rng.random() < self.cfg.dup_p:
            self.at(self.now + self.rng.randint(1, 4 * self.cfg.max_delay_ms), "deliver", m)

    def _ev_deliver(self, m: Message) -> None:
        if (m.from_, m.to) in self.cut:
            return
        n = self.nodes[m.to]
        if n.raft is None:
            return
        if n.busy:
            if len(n.inbox) < INBOX_MAX:
                n.inbox.append(m)
            return
        self.trace.append(f"t={self.now} {m.from_}->{m.to} {m!r:.160}")
        n.raft.step(m)
        self._kick(m.to)

    def _ev_propose(self) -> None:
        if not self.faults_on:
            return  # the heal phase proposes its own entries
        up = [n for n in self.nodes.values() if n.raft is not None and not n.busy]
        leaders = [n for n in up if n.raft is not None and n.raft.role is Role.LEADER]
        target = self.rng.choice(leaders or up) if (leaders or up) else None
        if target is not None and target.raft is not None:
            self.n_proposed += 1
            data = f"s{self.seed}-p{self.n_proposed}".encode()
            try:
                idx = target.raft.propose([data])
                self.checks.accepted.append((target.id, target.raft.term, idx, data))
                self._kick(target.id)
            except (NotLeader, ProposalDropped):
                pass
        if self.faults_on:
            self.at(self.now + self.rng.randint(1, self.cfg.propose_every_ms), "propose")

    def _ev_fault(self) -> None:
        if not self.faults_on:
            return
        r = self.rng
        ids = list(self.nodes)
        kind = r.choice(
            ["crash", "crash_leader", "isolate", "isolate_leader", "oneway", "split", "heal"]
            + ["snapshot", "snapshot", "transfer"]
            + (["member"] * 4 if self.cfg.membership else [])
        )
        self.trace.append(f"t={self.now} FAULT {kind}")
        target: int | None = None
        if kind.endswith("_leader"):
            # Faults aimed at the leader reach the rare interleavings (VOPR-style targeting).
            leaders = [n.id for n in self.nodes.values() if n.raft and n.raft.role is Role.LEADER]
            kind = kind.split("_")[0] if leaders else "none"
            target = r.choice(leaders) if leaders else None
        if kind == "crash":
            self._ev_crash(target if target is not None else r.choice(ids))
        elif kind == "isolate":
            i = target if target is not None else r.choice(ids)
            self.cut |= {(i, j) for j in ids if j != i} | {(j, i) for j in ids if j != i}
        elif kind == "oneway":
            a, b = r.sample(ids, 2)
            self.cut.add((a, b))
        elif kind == "split":
            r.shuffle(ids)
            k = r.randint(1, len(ids) - 1)
            side_a, side_b = ids[:k], ids[k:]
            self.cut |= {(a, b) for a in side_a for b in side_b}
            self.cut |= {(b, a) for a in side_a for b in side_b}
        elif kind == "heal":
            self.cut.clear()
        elif kind == "snapshot":
            i = r.choice(ids)
            n = self.nodes[i]
            if n.raft is not None and not n.busy and n.sm_index > n.raft.snapshot.index:
                n.raft.compact(n.sm_index, _snap_data(n.sm_index, n.sm_digest))
                self._kick(i)
        elif kind == "transfer":
            for n in self.nodes.values():
                if n.raft is not None and n.raft.role is Role.LEADER and not n.busy:
                    n.raft.transfer_leadership(r.choice(sorted(n.raft.voters)))
                    self._kick(n.id)
                    break
        elif kind == "member":
            self._new_member_op()
        self.at(self.now + r.randint(1, 2 * self.cfg.fault_every_ms), "fault")

    def _new_member_op(self) -> None:
        """Queue one membership change against the latest membership any leader holds: add a
        node that is no voter (spares first), or remove a voter (keeping two at least)."""
        if len(self.member_ops) >= 2:
            return
        leaders = [n.raft for n in self.nodes.values() if n.raft and n.raft.role is Role.LEADER]
        if not leaders:
            return
        raft = max(leaders, key=lambda x: x.term)
        voters = sorted(raft.voters)
        candidates = [i for i in self.voter_ids + self.spare_ids if i not in raft.voters]
        if candidates and (len(voters) <= 2 or self.rng.random() < 0.5) and len(voters) < 5:
            self.member_ops.append(("add", self.rng.choice(candidates)))
        elif len(voters) > 2:
            self.member_ops.append(("remove", self.rng.choice(voters)))
        self.trace.append(f"t={self.now} MEMBER queued {self.member_ops[-1:]}")

    def _ev_crash(self, i: int) -> None:
        """Crash node i: it loses its in-memory state and all but a random prefix of the
        writes not yet synced; it restarts 5 to `restart_max_ms` ms later."""
        n = self.nodes[i]
        if n.raft is None or not self.faults_on:
            return
        n.raft = None
        n.incarnation += 1
        n.store.sync(self.rng.randint(0, len(n.store.pending)))
        n.busy = False
        n.inbox.clear()
        self.trace.append(f"t={self.now} crash {i}")
        self.at(self.now + self.rng.randint(5, self.cfg.restart_max_ms), "restart", i)

    def _ev_restart(self, i: int) -> None:
        if self.nodes[i].raft is None:
            self.trace.append(f"t={self.now} restart {i}")
            self._start(i)
            self._kick(i)

    def _ev_heal(self) -> None:
        self.trace.append(f"t={self.now} HEAL")
        self.faults_on = False
        self.member_ops.clear()
        self.cut.clear()
        for i, n in self.nodes.items():
            if n.raft is None:
                self._start(i)
                self._kick(i)

    # ------------------------------------------------------------------ invariants
    def _stable_leader(self) -> int | None:
        leaders = [n for n in self.nodes.values() if n.raft and n.raft.role is Role.LEADER]
        if len(leaders) != 1:
            return None
        lead = leaders[0].raft
        assert lead is not None
        if leaders[0].busy or lead.lead_transferee is not None:
            return None
        if lead.membership_blocked() is not None and lead.conf_index > lead.commit_index:
            return None  # a membership change is still settling
        for n in self._members(lead):
            if n.raft is None or n.raft.leader_id != lead.id or n.raft.term != lead.term:
                return None
        return lead.id


def run_seed(seed: int, cfg: SimConfig | None = None) -> Simulation:
    sim = Simulation(seed, cfg or SimConfig())
    sim.run()
    return sim
