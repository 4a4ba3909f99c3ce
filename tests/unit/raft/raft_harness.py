"""A synchronous test cluster for the Raft core (the unit-test and transcript-test network).

Every node runs the full driver loop inline: ready → "persist" into an in-memory store → queue
messages → apply → advance. `stabilize()` delivers queued messages until none are left.
Links can be cut (one-way or both ways). Deterministic: the rng is seeded per node.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

from controller.raft.core import RaftNode
from controller.raft.messages import Entry, EntryKind, HardState, Message, Snapshot
from controller.raft.state import Ready, Role, StorageState


@dataclass
class MemStore:
    hard_state: HardState = field(default_factory=HardState)
    snapshot: Snapshot = field(default_factory=Snapshot)
    entries: list[Entry] = field(default_factory=list)

    def persist(self, rd: Ready) -> None:
        snap = rd.snapshot_to_install or rd.snapshot_to_persist
        if rd.snapshot_to_install is not None:
            self.entries = []
        if snap is not None:
            self.snapshot = snap
            self.entries = [e for e in self.entries if e.index > snap.index]
        if rd.entries_to_persist:
            first = rd.entries_to_persist[0].index
            self.entries = [e for e in self.entries if e.index < first]
            self.entries.extend(rd.entries_to_persist)
        if rd.hard_state is not None:
            self.hard_state = rd.hard_state

    def state(self) -> StorageState:
        return StorageState(self.hard_state, self.snapshot, tuple(self.entries))


class Cluster:
    def __init__(
        self,
        voters: list[int],
        observers: list[int] = (),  # type: ignore[assignment]
        seed: int = 1,
        **node_kwargs: object,
    ) -> None:
        self.voter_ids = list(voters)
        self.observer_ids = list(observers)
        self.seed = seed
        self.kwargs = {"election_timeout_ticks": 10, "heartbeat_ticks": 1, **node_kwargs}
        self.stores = {i: MemStore() for i in self.voter_ids + self.observer_ids}
        self.applied: dict[int, list[bytes]] = {i: [] for i in self.stores}
        self.installed: dict[int, list[Snapshot]] = {i: [] for i in self.stores}
        self.nodes: dict[int, RaftNode] = {}
        self.queue: deque[Message] = deque()
        self.cut: set[tuple[int, int]] = set()
        self.dropped = 0
        self.log: list[str] = []
        for i in self.stores:
            self.nodes[i] = self._make(i)

    def _make(self, i: int) -> RaftNode:
        return RaftNode(
            i,
            self.voter_ids,
            observers=self.observer_ids,
            storage_state=self.stores[i].state(),
            rng=random.Random(self.seed * 1000 + i),
            **self.kwargs,  # type: ignore[arg-type]
        )

    # -- driving ----------------------------------------------------------------------------
    def process(self, i: int) -> None:
        node = self.nodes[i]
        while node.has_ready():
            rd = node.ready()
            self.stores[i].persist(rd)
            self.queue.extend(rd.messages)
            if rd.snapshot_to_install is not None:
                self.installed[i].append(rd.snapshot_to_install)
                self.applied[i] = [rd.snapshot_to_install.data]
            for e in rd.committed_entries:
                if e.kind is EntryKind.NORMAL:
                    self.applied[i].append(e.data)
            node.advance(rd)

    def tick(self, i: int, n: int = 1) -> None:
        for _ in range(n):
            self.nodes[i].tick()
            self.process(i)

    def tick_all(self, n: int = 1) -> None:
        for _ in range(n):
            for i in self.nodes:
                self.tick(i)

    def run(self, ticks: int) -> None:
        """`ticks` rounds of: tick every node, then deliver everything."""
        for _ in range(ticks):
            self.tick_all()
            self.stabilize()

    def deliver_one(self) -> Message | None:
        m = self.queue.popleft()
        if (m.from_, m.to) in self.cut or m.to not in self.nodes:
            self.dropped += 1
            return None
        self.log.append(f"{m.from_}->{m.to} {m.TYPE} term={m.term}")
        self.nodes[m.to].step(m)
        self.process(m.to)
        return m

    def stabilize(self, limit: int = 100_000) -> int:
        n = 0
        while self.queue:
            self.deliver_one()
            n += 1
            assert n < limit, "cluster did not stabilize"
        return n

    def drop_queued(self) -> None:
        self.dropped += len(self.queue)
        self.queue.clear()

    def campaign(self, i: int) -> None:
        """Time node i out (ticking it alone) until it starts a campaign."""
        node = self.nodes[i]
        for _ in range(3 * node.election_timeout):
            before = node.role
            self.tick(i)
            if node.role is not before and node.role is not Role.FOLLOWER:
                return
            if node.role is Role.LEADER:
                return
        raise AssertionError(f"node {i} never campaigned")

    def elect(self, i: int) -> None:
        self.campaign(i)
        self.stabilize()
        assert self.nodes[i].role is Role.LEADER, self.nodes[i]

    def propose(self, i: int, *records: bytes) -> int:
        idx = self.nodes[i].propose(list(records))
        self.process(i)
        return idx

    # -- faults -----------------------------------------------------------------------------
    def isolate(self, i: int) -> None:
        for j in self.nodes:
            if j != i:
                self.cut.add((i, j))
                self.cut.add((j, i))

    def partition(self, *groups: list[int]) -> None:
        for a in groups:
            for b in groups:
                if a is not b:
                    for i in a:
                        for j in b:
                            self.cut.add((i, j))

    def heal(self) -> None:
        self.cut.clear()

    def restart(self, i: int) -> None:
        """Crash and restart node i from its store (everything persisted survives)."""
        self.queue = deque(m for m in self.queue if m.to != i and m.from_ != i)
        self.nodes[i] = self._make(i)
        snap = self.stores[i].snapshot
        self.applied[i] = [snap.data] if snap.index else []

    def leader(self) -> RaftNode | None:
        leaders = [n for n in self.nodes.values() if n.role is Role.LEADER]
        if not leaders:
            return None
        return max(leaders, key=lambda n: n.term)
