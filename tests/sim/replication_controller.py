"""The controller stand-in of the replication simulation (tests/sim/replication_sim.py): the one
source of leader, leader epoch, partition epoch and ISR for the simulated partition, as
controller/quorum does it, without the Raft quorum (never crashed; its records reach each
broker in order, late, through `ReplicationSim`).

  * AlterPartition: checked against the current leader and epochs and the eligible (unfenced)
    replicas (controller/quorum/replication.py `check_isr_change`), committed as a new
    partition epoch
  * fencing: a broker not heard from for a session timeout, or that restarted (a new
    incarnation leaves every ISR and leadership, as cluster_control.register_broker), leaves
    the ISR (never emptied) and leadership; it is unfenced at its next heartbeat once registered
  * elections: from the ISR's live members; uncleanly from any live replica when the seed allows
    it and no ISR member is live; otherwise the partition waits leaderless
  * now and then, leadership moves to another live ISR member
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from replication_sim import ReplicationSim

CONTROLLER = 0


@dataclass(frozen=True)
class Registration:
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    unclean: bool = False


class SimController:
    def __init__(self, sim: ReplicationSim) -> None:
        self.sim = sim
        ids = sim.ids
        self.metadata: list[Registration] = [Registration(ids[0], 0, 0, tuple(ids))]
        self.fenced: set[int] = set()
        self.heard_ms = dict.fromkeys(ids, 0)
        self.incarnations = dict.fromkeys(ids, 0)
        self.unclean_epoch = -1  # leader epoch of the last unclean election
        self.unclean_elections = 0

    @property
    def current(self) -> Registration:
        return self.metadata[-1]

    def tick(self) -> None:
        """Fence the brokers whose session expired."""
        sim = self.sim
        for i in sim.ids:
            if i not in self.fenced and sim.now - self.heard_ms[i] > sim.cfg.session_ms:
                sim.note(f"controller: n{i} missed its session: fenced")
                self.fence(i)

    def on_heartbeat(self, src: int, incarnation: int, registered: bool) -> None:
        sim = self.sim
        if incarnation < self.incarnations[src]:
            return  # a late heartbeat of an earlier incarnation
        self.heard_ms[src] = sim.now
        if incarnation != self.incarnations[src]:
            # a new incarnation leaves every ISR and leadership (register_broker's removals)
            self.incarnations[src] = incarnation
            sim.note(f"controller: n{src} registered incarnation {incarnation}")
            self.fence(src)
        if not registered:
            sim.send(CONTROLLER, src, "registered", incarnation)
        elif src in self.fenced:
            self.fenced.discard(src)
            sim.note(f"controller: n{src} unfenced")
            if self.current.leader < 0:
                self.elect(self.current.isr)

    def on_alter(
        self, src: int, leader_epoch: int, partition_epoch: int, new_isr: tuple[int, ...]
    ) -> str:
        """AlterPartition from `src`: "" when committed, else the error code's name."""
        reg = self.current
        if reg.leader != src or reg.leader_epoch != leader_epoch:
            return "FENCED_LEADER_EPOCH"
        if reg.partition_epoch != partition_epoch:
            return "INVALID_UPDATE_VERSION"
        if src not in new_isr:
            return "INVALID_REQUEST"
        if any(r in self.fenced for r in new_isr if r not in reg.isr):
            return "INELIGIBLE_REPLICA"
        self.publish(Registration(src, leader_epoch, partition_epoch + 1, new_isr))
        return ""

    def publish(self, reg: Registration) -> None:
        self.sim.checker.isr_joined(set(reg.isr) - set(self.current.isr))
        self.metadata.append(reg)
        self.sim.note(
            f"controller: leader n{reg.leader} epoch {reg.leader_epoch}/{reg.partition_epoch}"
            f" isr {list(reg.isr)}{' (unclean)' if reg.unclean else ''}"
        )

    def fence(self, nid: int) -> None:
        self.fenced.add(nid)
        reg = self.current
        isr = tuple(r for r in reg.isr if r != nid) or reg.isr  # never empty
        if reg.leader == nid:
            self.elect(isr)
        elif isr != reg.isr:
            self.publish(Registration(reg.leader, reg.leader_epoch, reg.partition_epoch + 1, isr))

    def elect(self, isr: tuple[int, ...]) -> None:
        """Elect from the ISR's live members (controller/quorum/replication.py), else uncleanly
        from any live replica when allowed, else leave it leaderless."""
        sim = self.sim
        reg = self.current
        epoch, pe = reg.leader_epoch + 1, reg.partition_epoch + 1
        live = [i for i in sim.ids if i not in self.fenced]
        clean = [r for r in isr if r in live]
        if clean:
            self.publish(Registration(clean[0], epoch, pe, isr))
        elif sim.cfg.unclean and live:
            leader = sim.rng.choice(live)
            self.unclean_elections += 1
            self.unclean_epoch = epoch
            self.publish(Registration(leader, epoch, pe, (leader,), unclean=True))
        elif reg.leader >= 0:
            self.publish(Registration(-1, epoch, pe, isr))

    def move_leadership(self) -> None:
        reg = self.current
        others = [r for r in reg.isr if r != reg.leader and r not in self.fenced]
        if reg.leader < 0 or not others:
            return
        to = self.sim.rng.choice(others)
        self.publish(Registration(to, reg.leader_epoch + 1, reg.partition_epoch + 1, reg.isr))
