"""The invariants of the replication simulation (tests/sim/replication_sim.py), checked after
every event (`Checker.check`), at each truncation (`truncating`) and after healing
(`check_healed`); a violation calls `sim.fail` (SimFailure naming the seed).

  * no acknowledged acks=all record is lost while one ISR member survives: every record acked
    in a leader epoch at or after the last unclean election is in the durable log of every
    member of the controller's ISR. The durable logs change below their ends only by
    truncation, the ISR by a publication, the acked set by an ack: each of those marks what to
    look at again after the event, and every 500th event looks at everything
  * the HW never goes back on a leader (within its term), nor passes its durable end
  * followers' logs are prefixes of the leader's up to the HW: ISR members up to the leader's
    HW; every replica up to its own HW, unless that HW predates an unclean election
  * epochs are monotonic: each replica's (leader epoch, partition epoch), never beyond the
    controller's; within each log (SimLog.append)
  * truncation never cuts below the HW of a clean leader: a follower does not truncate entries
    it shares with a cleanly elected leader below that leader's HW; a leader never truncates
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from replication_sim import Entry, Produce, Replica, ReplicationSim


class Checker:
    def __init__(self, sim: ReplicationSim) -> None:
        self.sim = sim
        self.acked: dict[int, tuple[int, int]] = {}  # record id -> (offset, acked in epoch)
        self.hw_of_term: dict[tuple[int, int], int] = {}
        self.epoch_seen = dict.fromkeys(sim.ids, (-1, -1))  # (leader epoch, partition epoch)
        self._recheck: set[int] = set()  # replicas whose durable log or ISR membership changed
        self._new_acks: list[int] = []
        self._prefix_seen: dict[int, tuple[int, ...]] = {}

    # -- what the simulation reports ------------------------------------------------------------

    def produce_acked(self, p: Produce) -> None:
        for i, r in enumerate(p.records):
            self.acked[r] = (p.first + i, p.epoch)
        self._new_acks.extend(p.records)

    def isr_joined(self, members: set[int]) -> None:
        self._recheck.update(members)

    def restarted(self, nid: int) -> None:
        self.epoch_seen[nid] = (-1, -1)

    def truncating(self, n: Replica, target: int, leader_id: int) -> None:
        """`n` is about to truncate to `target` on `leader_id`'s answer."""
        sim = self.sim
        if n.state.is_leader:
            sim.fail(f"leader n{n.id} truncates")
        leader = sim.nodes[leader_id]
        reg = sim.controller.current
        if leader.state.is_leader and not reg.unclean and reg.leader == leader_id:
            shared = _common_prefix(n.log.entries, leader.log.entries)
            floor = min(shared, leader.state.high_watermark)
            if target < floor:
                sim.fail(
                    f"n{n.id} truncates to {target} below {floor}: entries it shares with clean"
                    f" leader n{leader_id} under that leader's HW {leader.state.high_watermark}"
                )
        self._recheck.add(n.id)

    # -- after every event ----------------------------------------------------------------------

    def check(self) -> None:
        sim = self.sim
        reg = sim.controller.current
        for i, n in sim.nodes.items():
            st = n.state
            seen = (st.leader_epoch, st.partition_epoch)
            if seen < self.epoch_seen[i]:
                sim.fail(f"n{i}'s epochs went back: {self.epoch_seen[i]} -> {seen}")
            self.epoch_seen[i] = seen
            if st.leader_epoch > reg.leader_epoch:
                sim.fail(f"n{i} at leader epoch {st.leader_epoch} beyond the controller's")
            if n.alive and st.is_leader:  # the HW never goes back on a leader
                term = (i, st.leader_epoch * 1000 + n.incarnation)
                before = self.hw_of_term.get(term, -1)
                if st.high_watermark < before:
                    sim.fail(f"leader n{i}'s HW went back: {before} -> {st.high_watermark}")
                self.hw_of_term[term] = st.high_watermark
                if st.high_watermark > n.log.flushed:
                    sim.fail(f"leader n{i}'s HW {st.high_watermark} beyond its durable end")
        if sim.n_events % 500 == 0:
            self._recheck = set(sim.ids)
        if self._recheck or self._new_acks:
            self.check_acked()
        self._check_prefixes()

    def _check_prefixes(self) -> None:
        sim = self.sim
        reg = sim.controller.current
        if reg.leader < 0:
            return
        leader = sim.nodes[reg.leader]
        lst = leader.state
        if not (leader.alive and lst.is_leader and lst.leader_epoch == reg.leader_epoch):
            return
        hw = lst.high_watermark
        unclean_epoch = sim.controller.unclean_epoch
        for i, n in sim.nodes.items():
            if i == reg.leader:
                continue
            own = n.state.high_watermark
            key = (
                *(reg.leader, leader.log.version, leader.log.end, hw),
                *(n.log.version, n.log.end, own, n.hw_epoch, unclean_epoch),
                *lst.isr,
                -1,
                *reg.isr,
            )
            if self._prefix_seen.get(i) == key:
                continue  # nothing it depends on changed
            self._prefix_seen[i] = key
            if i in lst.isr and i in reg.isr and n.log.entries[:hw] != leader.log.entries[:hw]:
                sim.fail(f"ISR member n{i}'s log differs from leader n{reg.leader}'s below HW {hw}")
            if (
                n.alive
                and n.hw_epoch >= unclean_epoch
                and n.log.entries[:own] != leader.log.entries[:own]
            ):
                sim.fail(f"n{i}'s log below its HW {own} is not a prefix of leader n{reg.leader}'s")

    def check_acked(self, everything: bool = False) -> None:
        if everything:
            self._recheck = set(self.sim.ids)
        isr = self.sim.controller.current.isr
        members = [r for r in isr if r in self._recheck]
        if members:
            self._check_records(members, list(self.acked.items()))
        others = [r for r in isr if r not in self._recheck]
        if others and self._new_acks:
            self._check_records(others, [(r, self.acked[r]) for r in self._new_acks])
        self._recheck = set()
        self._new_acks = []

    def _check_records(
        self, members: list[int], records: list[tuple[int, tuple[int, int]]]
    ) -> None:
        sim = self.sim
        unclean_epoch = sim.controller.unclean_epoch
        for rid, (off, epoch) in records:
            if epoch < unclean_epoch:
                continue  # an unclean election may lose what was acked before it
            for r in members:
                log = sim.nodes[r].log
                if off >= log.flushed or log.entries[off][1] != rid:
                    sim.fail(
                        f"acked record {rid} (offset {off}, epoch {epoch}) missing from ISR"
                        f" member n{r} (isr {list(sim.controller.current.isr)})"
                    )

    # -- at the end -----------------------------------------------------------------------------

    def check_healed(self) -> None:
        sim = self.sim
        self.check_acked(everything=True)
        reg = sim.controller.current
        if reg.leader < 0:
            sim.fail("no leader after healing")
        if sorted(reg.isr) != sim.ids:
            sim.fail(f"ISR {list(reg.isr)} not back to every replica after healing")
        if not self.acked:
            sim.fail("nothing was ever acknowledged")


def _common_prefix(a: list[Entry], b: list[Entry]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
