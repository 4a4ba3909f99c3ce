"""Automatic balancing's placement (`auto.balance.mode`, Redpanda's partition autobalancing):
which replicas move where. A pure function of the partitions' placement; the
AutoBalanceControlManager (auto_balance_control.py) starts what it returns as partition
reassignments.

Two kinds of move, at most `limit` in all:

- **drain** (`continuous` mode): every replica on an `unavailable` broker (fenced for longer
  than auto.balance.unavailable.timeout.ms) is replaced, in place (the same position in the
  replica list), by a receiving broker the partition does not hold: a rack the partition's
  other replicas do not use first, then the fewest replicas, then the fewest leaders, then the
  lowest id. This restores the replication factor on the brokers that are left.
- **fill** (`node-add` and `continuous`): each `new` broker (registered for the first time)
  takes replicas from the most loaded brokers, one at a time, until it holds its share (the
  receivers' replicas divided evenly, rounded down) or the most loaded broker holds at most one
  more than it. A partition its donor does not lead goes first (no leadership moves), then
  the most loaded donor's; never one where the move would put two replicas on one rack that were apart. The new broker
  takes the donor's position in the replica list, so it becomes preferred leader of the
  partitions whose first replica it takes: leaders spread with the preferred-leader rebalance.

Partitions not `movable` (a reassignment in flight whose target is still reachable, or
offline: nobody to copy from) do not
move, but their replicas (their targets) count in the brokers' loads. Deterministic: the same
input gives the same moves.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Placement:
    """A partition as the planner sees it: its replicas (a move's target when one is in
    flight), its leader, and whether it may move now."""

    replicas: tuple[int, ...]
    leader: int
    movable: bool = True


@dataclass(frozen=True)
class Move:
    tp: TopicPartition
    replicas: tuple[int, ...]  # before
    target: tuple[int, ...]
    reason: str


@dataclass
class Plan:
    moves: list[Move] = field(default_factory=list)
    # new brokers that hold their share (with the moves planned): nothing more to fill
    settled: set[int] = field(default_factory=set)
    # partitions with a replica on an unavailable broker and no receiver to take it
    stuck: list[TopicPartition] = field(default_factory=list)


def plan(
    partitions: Mapping[TopicPartition, Placement],
    receivers: Mapping[int, str | None],
    *,
    new: Collection[int] = (),
    unavailable: Collection[int] = (),
    limit: int,
) -> Plan:
    """The moves (at most `limit`): drains of the `unavailable` brokers first, then fills of
    the `new` ones. `receivers`: the brokers that may take replicas ({id: rack or None}),
    live ones; a `new` broker that is not among them is neither filled nor settled."""
    out = Plan()
    racks = dict(receivers)
    load = dict.fromkeys(receivers, 0)
    leads = dict.fromkeys(receivers, 0)
    for pl in partitions.values():
        for r in pl.replicas:
            if r in load:
                load[r] += 1
        if pl.leader in leads:
            leads[pl.leader] += 1
    after = {tp: list(pl.replicas) for tp, pl in partitions.items()}
    moved: set[TopicPartition] = set()

    def add(tp: TopicPartition, reason: str) -> None:
        out.moves.append(Move(tp, partitions[tp].replicas, tuple(after[tp]), reason))
        moved.add(tp)

    gone = set(unavailable) - set(receivers)
    for tp in sorted(partitions):
        if len(out.moves) >= limit:
            break
        pl = partitions[tp]
        dead = [r for r in pl.replicas if r in gone]
        if not dead or not pl.movable:
            continue
        rs = after[tp]
        for d in dead:
            used = {racks.get(r) for r in rs if r != d and r not in gone} - {None}
            free = [b for b in receivers if b not in rs]
            if not free:
                break
            b = min(free, key=lambda b: (racks.get(b) in used, load[b], leads[b], b))
            rs[rs.index(d)] = b
            load[b] += 1
        if any(r in gone for r in rs):
            after[tp] = list(pl.replicas)  # too few receivers: leave it as it is
            out.stuck.append(tp)
            continue
        add(tp, "broker " + ",".join(map(str, dead)) + " unavailable: replication factor restored")

    for n in sorted(new):
        if n not in receivers:
            continue
        while True:
            share = sum(load.values()) // len(load)
            if load[n] >= share:
                out.settled.add(n)
                break
            if len(out.moves) >= limit:
                break
            donors = {d for d in receivers if d != n and load[d] - load[n] > 1}
            # a partition the donor does not lead first, then the most loaded donor (the
            # most leaders), then the lowest ids
            picked = None
            best: tuple[bool, int, int, int, tuple[str, int]] | tuple[()] = ()
            for tp, rs in after.items():
                if tp in moved or not partitions[tp].movable or n in rs:
                    continue
                for d in rs:
                    if d not in donors:
                        continue
                    used = {racks.get(r) for r in rs if r != d} - {None}
                    if racks.get(n) in used and racks.get(d) not in used:
                        continue  # would put two replicas on one rack that were apart
                    k = (partitions[tp].leader == d, -load[d], -leads[d], d, tp)
                    if picked is None or k < best:
                        picked, best = (d, tp), k
            if picked is None:
                out.settled.add(n)  # nothing more it can take
                break
            d, tp = picked
            after[tp][after[tp].index(d)] = n
            load[d] -= 1
            load[n] += 1
            if partitions[tp].leader == d:
                leads[d] -= 1  # the move elects another in-sync replica of the target
            add(tp, f"broker {n} joined: it takes its share (from broker {d})")
    return out
