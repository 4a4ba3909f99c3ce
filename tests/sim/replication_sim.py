"""Deterministic simulation of one replicated partition (after the Raft simulation next door,
Kafka's RaftEventSimulationTest and TigerBeetle's VOPR): 3-5 replicas each running the real
replication core (`broker.replica.state.PartitionState` and its truncation functions), a
controller stand-in, one event scheduler on a virtual clock, one seeded RNG for everything.

    replicas      in-memory logs of (leader epoch, record id), a flushed prefix that survives a
                  crash (the rest is lost), a HW checkpoint; the leader appends produces, flushes,
                  answers fetches (KIP-320 divergence, OFFSET_OUT_OF_RANGE, epoch fencing) and
                  proposes ISR changes; followers fetch one request at a time from their durable
                  end, append, flush before fetching again, and truncate where the core says
    controller    the one source of leader, leader epoch, partition epoch and ISR (a stand-in
                  for the Raft quorum, never crashed); it validates AlterPartition as Gregor's
                  controller does (epochs, eligible replicas), fences a broker not heard from for
                  a session timeout or that restarted (a new incarnation leaves every ISR and
                  leadership, as cluster_control.register_broker), elects from the ISR, uncleanly
                  when the seed allows it and no ISR member is left, and moves leadership now and
                  then; brokers learn its records in order, late
    network       drops, delays (so reorders), duplicates and partitions (per link, both ways)
    faults        crashes (unflushed records lost, in-memory state lost), restarts

Invariants (tests/sim/replication_checks.py), checked after every event: no acknowledged
acks=all record lost while one ISR member survives; the HW never goes back on a leader;
followers' logs are prefixes of the leader's up to the HW; epochs monotonic; truncation never
cuts below the HW of a clean leader. At the end, after healing: a leader exists and the ISR
holds every replica again. The controller stand-in: tests/sim/replication_controller.py.

`run_seed(seed, config)` raises `SimFailure` (message: seed, replay command, recent trace).
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from replication_checks import Checker
from replication_controller import CONTROLLER, Registration, SimController

from broker.replica.state import (
    PartitionState,
    diverging,
    out_of_range_truncation,
    truncation_target,
)

Entry = tuple[int, int]  # (leader epoch, record id)


class SimFailure(AssertionError):
    pass


@dataclass
class SimConfig:
    replicas: int = 3
    chaos_ms: int = 3000
    heal_ms: int = 5000
    unclean: bool = False
    min_insync: int = 1
    max_delay_ms: int = 8
    drop_p: float = 0.03
    dup_p: float = 0.02
    fault_every_ms: int = 120
    produce_every_ms: int = 6
    lag_ms: int = 150
    session_ms: int = 120
    heartbeat_ms: int = 20
    fetch_every_ms: int = 4
    fetch_timeout_ms: int = 40
    alter_timeout_ms: int = 60
    max_fetch_entries: int = 8
    restart_max_ms: int = 300


# -- storage ------------------------------------------------------------------------------------


@dataclass
class SimLog:
    """A replica's log: entries by offset (log start 0), the flushed prefix survives a crash."""

    entries: list[Entry] = field(default_factory=list)
    flushed: int = 0
    version: int = 0  # bumped by every truncation (what lies below the end changed)

    @property
    def end(self) -> int:
        return len(self.entries)

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """KIP-279 over the entries (what broker/log/epoch_cache.py answers)."""
        found = -1
        for off, (e, _) in enumerate(self.entries):
            if e > epoch:
                return (found, off) if found >= 0 else (-1, -1)
            found = e
        return (found, self.end) if found >= 0 else (-1, -1)

    def append(self, entries: list[Entry]) -> None:
        if entries and entries[0][0] < self.latest_epoch:
            raise SimFailure(f"epoch {entries[0][0]} appended after {self.latest_epoch}")
        if any(a[0] > b[0] for a, b in itertools.pairwise(entries)):
            raise SimFailure(f"epochs not monotonic in {entries}")
        self.entries.extend(entries)

    def truncate_to(self, offset: int) -> None:
        del self.entries[offset:]
        self.flushed = min(self.flushed, offset)
        self.version += 1

    def crash(self) -> None:
        del self.entries[self.flushed :]


# -- replicas -----------------------------------------------------------------------------------


@dataclass
class Produce:
    first: int
    required: int
    epoch: int
    records: list[int]


@dataclass
class Replica:
    id: int
    log: SimLog = field(default_factory=SimLog)
    state: PartitionState = field(init=False)
    alive: bool = True
    incarnation: int = 0
    registered: bool = True  # the controller has seen this incarnation
    applied: int = -1  # index of the last metadata record applied
    checkpoint_hw: int = 0
    fetch_id: int = 0  # the fetch in flight (0: none)
    fetch_sent_ms: int = 0
    alter_in_flight: tuple[int, ...] | None = None
    alter_sent_ms: int = 0
    produces: list[Produce] = field(default_factory=list)
    hw_epoch: int = -1  # the leader epoch under which its HW was last set

    def __post_init__(self) -> None:
        self.state = PartitionState(self.id)


# -- the simulation -----------------------------------------------------------------------------


class ReplicationSim:
    def __init__(self, seed: int, cfg: SimConfig) -> None:
        self.seed = seed
        self.cfg = cfg
        self.rng = random.Random(seed)
        self.now = 0
        self.n_events = 0
        self._queue: list[tuple[int, int, str, tuple[Any, ...]]] = []
        self._seq = 0
        self.trace: deque[str] = deque(maxlen=60)
        ids = list(range(1, cfg.replicas + 1))
        self.ids = ids
        self.nodes = {i: Replica(i) for i in ids}
        self.cut: set[frozenset[int]] = set()  # links down (pairs of node ids, 0 = controller)
        self.next_record = 1
        self.truncations = 0
        self.checker = Checker(self)
        self.controller = SimController(self)
        for i in ids:
            self._apply_metadata(self.nodes[i])

    # -- scheduler ------------------------------------------------------------------------------

    def at(self, delay: int, kind: str, *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (self.now + delay, self._seq, kind, args))

    def send(self, src: int, dst: int, kind: str, *args: Any) -> None:
        if frozenset((src, dst)) in self.cut or self.rng.random() < self.cfg.drop_p:
            return
        copies = 2 if self.rng.random() < self.cfg.dup_p else 1
        for _ in range(copies):
            self.at(self.rng.randint(1, self.cfg.max_delay_ms), "deliver", src, dst, kind, args)

    def fail(self, why: str) -> None:
        trace = "\n  ".join(self.trace)
        raise SimFailure(
            f"replication simulation seed {self.seed} failed at t={self.now}ms: {why}\n"
            f"replay: python -m tests.sim.run_replication --seed {self.seed}\n"
            f"recent events:\n  {trace}"
        )

    def note(self, text: str) -> None:
        self.trace.append(f"t={self.now} {text}")

    def run(self) -> ReplicationSim:
        cfg = self.cfg
        for i in self.ids:
            self.at(self.rng.randint(0, cfg.heartbeat_ms), "heartbeat", i)
            self.at(self.rng.randint(0, cfg.fetch_every_ms), "tick", i)
        self.at(1, "produce")
        self.at(cfg.fault_every_ms, "fault")
        self.at(5, "controller_tick")
        end = cfg.chaos_ms + cfg.heal_ms
        while self._queue and self._queue[0][0] <= end:
            t, _, kind, args = heapq.heappop(self._queue)
            self.now = t
            self.n_events += 1
            getattr(self, "_ev_" + kind)(*args)
            self.checker.check()
        self.checker.check_healed()
        return self

    @property
    def acked(self) -> dict[int, tuple[int, int]]:
        return self.checker.acked

    @property
    def metadata(self) -> list[Registration]:
        return self.controller.metadata

    @property
    def unclean_elections(self) -> int:
        return self.controller.unclean_elections

    # -- events ---------------------------------------------------------------------------------

    def _ev_deliver(self, src: int, dst: int, kind: str, args: tuple[Any, ...]) -> None:
        if dst != CONTROLLER and not self.nodes[dst].alive:
            return
        if frozenset((src, dst)) in self.cut:
            return
        getattr(self, "_msg_" + kind)(src, dst, *args)

    def _ev_produce(self) -> None:
        if self.now < self.cfg.chaos_ms:
            self.at(self.rng.randint(1, 2 * self.cfg.produce_every_ms), "produce")
        elif self.now < self.cfg.chaos_ms + self.cfg.heal_ms // 5:
            self.at(50, "produce")  # healing: a trickle, then quiet so the followers catch up
        leaders = [n for n in self.nodes.values() if n.alive and n.state.is_leader]
        if not leaders:
            return
        n = self.rng.choice(leaders)  # a stale leader may still take writes
        if len(n.state.isr) < self.cfg.min_insync:
            return  # NOT_ENOUGH_REPLICAS
        k = self.rng.randint(1, 3)
        records = list(range(self.next_record, self.next_record + k))
        self.next_record += k
        first = n.log.end
        n.log.append([(n.state.leader_epoch, r) for r in records])
        n.produces.append(Produce(first, first + k, n.state.leader_epoch, records))
        self.note(f"n{n.id} appended {records} at {first} (epoch {n.state.leader_epoch})")
        self.at(self.rng.randint(0, 4), "flush", n.id, n.incarnation)

    def _ev_flush(self, nid: int, incarnation: int) -> None:
        n = self.nodes[nid]
        if not n.alive or n.incarnation != incarnation:
            return
        n.log.flushed = n.log.end
        if n.state.advance_high_watermark(n.log.flushed):
            self._hw_moved(n)

    def _ev_tick(self, nid: int) -> None:
        """A replica's periodic work: a follower fetches, a leader checks its ISR."""
        n = self.nodes[nid]
        self.at(self.cfg.fetch_every_ms, "tick", nid)
        if not n.alive:
            return
        st = n.state
        if st.is_leader:
            if (
                n.alter_in_flight is not None
                and self.now - n.alter_sent_ms > self.cfg.alter_timeout_ms
            ):
                self._alter_failed(n, "timed out")
            if self.rng.random() < 0.25:
                self._propose(n, st.isr_to_shrink(self.now, self.cfg.lag_ms))
            return
        if st.leader_id < 0 or not n.registered:
            return
        if n.fetch_id and self.now - n.fetch_sent_ms < self.cfg.fetch_timeout_ms:
            return
        if n.log.flushed != n.log.end:
            return  # it fsyncs what it fetched before fetching again
        self._seq += 1
        n.fetch_id = self._seq
        n.fetch_sent_ms = self.now
        self.send(
            nid,
            st.leader_id,
            "fetch",
            n.fetch_id,
            st.leader_epoch,
            n.log.end,
            n.log.latest_epoch,
        )

    def _ev_heartbeat(self, nid: int) -> None:
        n = self.nodes[nid]
        self.at(self.cfg.heartbeat_ms, "heartbeat", nid)
        if n.alive:
            self.send(nid, CONTROLLER, "heartbeat", n.incarnation, n.registered)

    def _ev_controller_tick(self) -> None:
        self.at(10, "controller_tick")
        self.controller.tick()
        # push metadata: each broker learns the records in order, when reachable
        for i in self.ids:
            n = self.nodes[i]
            if (
                n.alive
                and n.registered
                and n.applied < len(self.controller.metadata) - 1
                and frozenset((i, CONTROLLER)) not in self.cut
                and self.rng.random() < 0.7
            ):
                self._apply_metadata(n)

    def _ev_fault(self) -> None:
        cfg = self.cfg
        if self.now >= cfg.chaos_ms:
            self._heal()
            return
        self.at(self.rng.randint(cfg.fault_every_ms // 2, cfg.fault_every_ms * 3 // 2), "fault")
        roll = self.rng.random()
        alive = [i for i in self.ids if self.nodes[i].alive]
        if roll < 0.3 and len(alive) > 1:
            victim = self.rng.choice(alive)
            if self.rng.random() < 0.5:  # the leader more often than chance
                leaders = [i for i in alive if self.nodes[i].state.is_leader]
                victim = leaders[0] if leaders else victim
            self._crash(victim)
            self.at(self.rng.randint(20, cfg.restart_max_ms), "restart", victim)
        elif roll < 0.55:
            a, b = self.rng.sample([CONTROLLER, *self.ids], 2)
            self.cut.add(frozenset((a, b)))
            self.note(f"link n{a}-n{b} cut")
        elif roll < 0.75 and self.cut:
            link = self.rng.choice(sorted(self.cut, key=sorted))
            self.cut.discard(link)
            self.note(f"link {sorted(link)} healed")
        elif roll < 0.85:
            self.controller.move_leadership()
        elif roll < 0.92:  # isolate one replica from everyone
            i = self.rng.choice(self.ids)
            for j in [CONTROLLER, *self.ids]:
                if j != i:
                    self.cut.add(frozenset((i, j)))
            self.note(f"n{i} isolated")

    def _ev_restart(self, nid: int) -> None:
        n = self.nodes[nid]
        if n.alive:
            return
        n.alive = True
        n.incarnation += 1
        n.registered = False  # until the controller has seen the new incarnation
        n.state = PartitionState(nid)
        n.applied = -1
        n.fetch_id = 0
        n.alter_in_flight = None
        self.checker.restarted(nid)
        n.hw_epoch = -1
        self.note(f"n{nid} restarted (log end {n.log.end}, checkpoint hw {n.checkpoint_hw})")

    def _crash(self, nid: int) -> None:
        n = self.nodes[nid]
        n.alive = False
        n.log.crash()
        n.produces = []
        self.note(f"n{nid} crashed (durable end {n.log.end})")

    def _heal(self) -> None:
        self.cut.clear()
        self.note("healed")
        for i in self.ids:
            if not self.nodes[i].alive:
                self.at(1, "restart", i)

    # -- messages -------------------------------------------------------------------------------

    def _msg_heartbeat(self, src: int, dst: int, incarnation: int, registered: bool) -> None:
        self.controller.on_heartbeat(src, incarnation, registered)

    def _msg_registered(self, src: int, dst: int, incarnation: int) -> None:
        n = self.nodes[dst]
        if n.incarnation == incarnation and not n.registered:
            n.registered = True

    def _msg_fetch(
        self, src: int, dst: int, fid: int, epoch: int, offset: int, last_epoch: int
    ) -> None:
        leader = self.nodes[dst]
        st = leader.state
        if not st.is_leader or epoch != st.leader_epoch:
            self.send(dst, src, "fetch_error", fid, "NOT_LEADER_OR_FENCED")
            return
        log = leader.log
        div = diverging(offset, last_epoch, log.end_offset_for_epoch, 0)
        if div is not None:
            self.send(dst, src, "fetch_answer", fid, epoch, offset, [], st.high_watermark, div)
            return
        if offset > log.end:
            self.send(dst, src, "out_of_range", fid, epoch, log.end)
            return
        if st.on_follower_fetch(src, offset, self.now, log.end, log.flushed):
            self._hw_moved(leader)
        self._propose(leader, st.isr_to_expand(src, self.now))
        records = log.entries[offset : offset + self.cfg.max_fetch_entries]
        self.send(dst, src, "fetch_answer", fid, epoch, offset, records, st.high_watermark, None)

    def _msg_fetch_error(self, src: int, dst: int, fid: int, why: str) -> None:
        n = self.nodes[dst]
        if n.fetch_id == fid:
            n.fetch_id = 0

    def _msg_out_of_range(self, src: int, dst: int, fid: int, epoch: int, leader_end: int) -> None:
        n = self.nodes[dst]
        if n.fetch_id != fid or n.state.leader_epoch != epoch:
            return
        n.fetch_id = 0
        action = out_of_range_truncation(n.log.end, 0, leader_end)
        if action is not None:
            self._truncate(n, action[1], src)

    def _msg_fetch_answer(
        self,
        src: int,
        dst: int,
        fid: int,
        epoch: int,
        offset: int,
        records: list[Entry],
        hw: int,
        div: tuple[int, int] | None,
    ) -> None:
        n = self.nodes[dst]
        if n.fetch_id != fid or n.state.leader_epoch != epoch or n.state.is_leader:
            return  # asked under another epoch, or a late duplicate
        n.fetch_id = 0
        log = n.log
        if div is not None:
            target = truncation_target(div[0], div[1], log.end_offset_for_epoch, 0, log.end)
            self._truncate(n, target, src)
            n.state.on_fetch_response(n.state.high_watermark, log.end)
            return
        if offset != log.end:
            return  # the log moved under it (a truncation): fetch again
        if records:
            log.append(records)
            self.at(self.rng.randint(0, 3), "flush", n.id, n.incarnation)
        n.state.on_fetch_response(hw, log.end)
        n.hw_epoch = epoch

    def _msg_alter(
        self, src: int, dst: int, leader_epoch: int, partition_epoch: int, new_isr: tuple[int, ...]
    ) -> None:
        code = self.controller.on_alter(src, leader_epoch, partition_epoch, new_isr)
        self.send(CONTROLLER, src, "alter_answer", new_isr, code)

    def _msg_alter_answer(self, src: int, dst: int, new_isr: tuple[int, ...], code: str) -> None:
        n = self.nodes[dst]
        if n.alter_in_flight != new_isr:
            return
        if code:
            self._alter_failed(n, code)
        else:
            n.alter_in_flight = None

    # -- replica actions ------------------------------------------------------------------------

    def _propose(self, n: Replica, new_isr: tuple[int, ...] | None) -> None:
        if new_isr is None:
            return
        st = n.state
        n.alter_in_flight = new_isr
        n.alter_sent_ms = self.now
        self.note(
            f"n{n.id} proposes ISR {list(new_isr)} (epochs {st.leader_epoch}/{st.partition_epoch})"
        )
        self.send(n.id, CONTROLLER, "alter", st.leader_epoch, st.partition_epoch, new_isr)

    def _alter_failed(self, n: Replica, why: str) -> None:
        """As IsrProposer: only INELIGIBLE_REPLICA proves the change was not made."""
        n.alter_in_flight = None
        self.note(f"n{n.id} ISR change failed: {why}")
        if why != "INELIGIBLE_REPLICA":
            n.state.isr_change_unsettled(self.now)
        elif n.state.isr_change_failed(self.now, n.log.flushed):
            self._hw_moved(n)

    def _hw_moved(self, n: Replica) -> None:
        """The purgatory: complete the produces the core says are done."""
        waiting = []
        for p in n.produces:
            code = n.state.produce_outcome(
                p.epoch, p.required, -1, n.log.flushed, False, lambda: self.cfg.min_insync
            )
            if code is None:
                waiting.append(p)
            elif code == 0:
                self.checker.produce_acked(p)
                self.note(f"n{n.id} acked {p.records} (hw {n.state.high_watermark})")
        n.produces = waiting
        if self.rng.random() < 0.2:
            n.checkpoint_hw = n.state.high_watermark

    def _truncate(self, n: Replica, target: int, leader_id: int) -> None:
        if target >= n.log.end:
            return
        self.truncations += 1
        self.note(f"n{n.id} truncates {n.log.end} -> {target} (leader n{leader_id})")
        self.checker.truncating(n, target, leader_id)
        n.log.truncate_to(target)

    def _apply_metadata(self, n: Replica) -> None:
        """The broker's metadata publisher: the next records, in order (a restarted broker
        starts from the latest)."""
        metadata = self.controller.metadata
        latest = len(metadata) - 1
        first = latest if n.applied < 0 else n.applied + 1
        upto = latest if n.applied < 0 else self.rng.randint(first, latest)
        for idx in range(first, upto + 1):
            reg = metadata[idx]
            st = n.state
            if reg.leader == n.id:
                st.become_leader(
                    self.now,
                    reg.leader_epoch,
                    reg.partition_epoch,
                    tuple(self.ids),
                    reg.isr,
                    n.checkpoint_hw,
                    n.log.end,
                    n.log.flushed,
                )
                if n.alter_in_flight is not None and reg.isr == n.alter_in_flight:
                    n.alter_in_flight = None
                self._hw_moved(n)
            else:
                st.become_follower(
                    reg.leader, reg.leader_epoch, reg.partition_epoch, tuple(self.ids), reg.isr
                )
                n.produces = []  # NOT_LEADER_OR_FOLLOWER
                n.alter_in_flight = None
                n.fetch_id = 0
            n.applied = idx


def run_seed(seed: int, cfg: SimConfig) -> ReplicationSim:
    return ReplicationSim(seed, cfg).run()
