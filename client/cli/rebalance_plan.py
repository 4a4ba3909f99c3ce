"""The plan of `gregor cluster rebalance`: replicas and preferred leaders spread evenly over the
live brokers, rack-aware. A pure function of the current placement; any thread.

Three steps, each changing as little as it can:

1. **racks**: a partition whose replicas use fewer racks than they could (min(replication
   factor, racks)) has a replica on a doubled rack replaced, in place, by a broker of a rack
   it does not use yet (the least loaded, then the lowest id). A broker without `broker.rack`
   counts as a rack of its own, so with no racks at all this step moves nothing.
2. **replicas**: while some broker holds two replicas more than another, one replica moves
   from the most loaded broker that can give one to the least loaded that can take it, in
   place; never to a broker the partition is on already, never lowering the number of racks
   the partition uses; a partition the giver is the preferred (first) replica of first when
   the giver is first in two partitions more than the taker (the leadership goes along),
   last otherwise.
   Each move goes from a broker above its share to one below it, so the count of moves is the
   least that evens the counts (unless racks forbid some).
3. **leaders**: the preferred leader is a partition's first replica. While some broker is
   first in two partitions more than another, a chain of swaps (a replica moved to the front
   of a partition's list: no data moves) hands one preferred leadership from the broker with
   the most to one with the fewest (a breadth-first search over "broker A is first in a
   partition that B also holds": the same augmenting-path idea as bipartite matching, so the
   counts even out whenever the placement allows).

The result separates `moves` (the replica set changes: data is copied) from `reorders` (only
the order changes: a reassignment that completes at once). Executing both, then a preferred
leader election, gives the counts the plan shows.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from client.cli.reassign_plan import Assignment, PlanError

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class RebalancePlan:
    moves: Assignment  # {tp: new replicas} whose replica set changes
    reorders: Assignment  # {tp: new replicas}: same set, another order (preferred leader)
    replicas_before: dict[int, int]
    replicas_after: dict[int, int]
    leaders_before: dict[int, int]  # preferred (first) replicas per broker
    leaders_after: dict[int, int]
    replicas_moved: int  # replicas that change broker (each a copy of the partition)

    @property
    def assignment(self) -> Assignment:
        return {**self.moves, **self.reorders}


def _counts(
    assignment: Mapping[TopicPartition, Sequence[int]], brokers: Sequence[int]
) -> tuple[dict[int, int], dict[int, int]]:
    replicas = dict.fromkeys(brokers, 0)
    leaders = dict.fromkeys(brokers, 0)
    for rs in assignment.values():
        for r in rs:
            replicas[r] += 1
        if rs:
            leaders[rs[0]] += 1
    return replicas, leaders


def plan(
    current: Mapping[TopicPartition, Sequence[int]], brokers: Mapping[int, str | None]
) -> RebalancePlan:
    """The plan spreading `current` ({(topic, partition): replicas}) over `brokers` ({id: rack
    or None}: the live brokers). PlanError when a replica is on a broker not given or a
    partition has more replicas than there are brokers."""
    ids = sorted(brokers)
    if not ids:
        raise PlanError("no live broker to place replicas on")
    for tp, rs in sorted(current.items()):
        off = [r for r in rs if r not in brokers]
        if off:
            raise PlanError(
                f"{tp[0]}-{tp[1]} has replicas on brokers {off} that are not live (live:"
                f" {ids}): start them, or move their replicas off (gregor broker decommission)"
            )
        if len(set(rs)) != len(rs):
            raise PlanError(f"{tp[0]}-{tp[1]} lists a broker twice: {list(rs)}")

    def rack(b: int) -> object:
        r = brokers[b]
        return ("no rack", b) if r is None else r

    all_racks = len({rack(b) for b in ids})
    after: dict[TopicPartition, list[int]] = {tp: list(rs) for tp, rs in current.items()}
    load, lead = _counts(after, ids)

    def spread(rs: Sequence[int]) -> int:
        return len({rack(b) for b in rs})

    # 1. racks
    for tp in sorted(after):
        rs = after[tp]
        while spread(rs) < min(len(rs), all_racks):
            used = {rack(b) for b in rs}
            doubled = [b for b in rs if sum(rack(x) == rack(b) for x in rs) > 1]
            # a doubled replica that is not first, the most loaded first
            give = max(doubled, key=lambda b: (rs.index(b) != 0, load[b], -b))
            take = min(
                (b for b in ids if rack(b) not in used), key=lambda b: (load[b], b), default=None
            )
            if take is None:
                break
            if rs[0] == give:
                lead[give] -= 1
                lead[take] += 1
            rs[rs.index(give)] = take
            load[give] -= 1
            load[take] += 1

    # 2. replica counts
    _even_replicas(after, ids, load, lead, spread)

    # 3. preferred leaders: augmenting chains of swaps
    _, leads = _counts(after, ids)
    # {broker: the partitions it is first in} (dicts as ordered sets: deterministic order)
    led: dict[int, dict[TopicPartition, None]] = {b: {} for b in ids}
    for tp in sorted(after):
        if after[tp]:
            led[after[tp][0]][tp] = None
    while True:
        path = _leader_path(after, leads, led)
        if path is None:
            break
        for tp, b in path:
            rs = after[tp]
            leads[rs[0]] -= 1
            del led[rs[0]][tp]
            rs.remove(b)
            rs.insert(0, b)
            leads[b] += 1
            led[b][tp] = None

    moves: Assignment = {}
    reorders: Assignment = {}
    moved_replicas = 0
    for tp, rs in sorted(after.items()):
        old = list(current[tp])
        if rs == old:
            continue
        if set(rs) == set(old):
            reorders[tp] = rs
        else:
            moves[tp] = rs
            moved_replicas += len(set(rs) - set(old))
    rb, lb = _counts(current, ids)
    ra, la = _counts(after, ids)
    return RebalancePlan(moves, reorders, rb, ra, lb, la, moved_replicas)


def _even_replicas(
    after: dict[TopicPartition, list[int]],
    ids: Sequence[int],
    load: dict[int, int],
    lead: dict[int, int],
    spread: Callable[[Sequence[int]], int],
) -> None:
    """Step 2, in place: moves from the most loaded broker that can give to the least loaded
    that can take, each from above its share to below it (so the fewest), several per pair
    at once (one sort of the candidates per batch)."""
    on: dict[int, set[TopicPartition]] = {b: set() for b in ids}
    for tp, rs in after.items():
        for r in rs:
            on[r].add(tp)
    q = sum(load.values()) // len(ids)  # every count ends q or q + 1 (when racks allow)
    while True:
        moved = False
        for hi in sorted(ids, key=lambda b: (-load[b], b)):
            for lo in sorted(ids, key=lambda b: (load[b], b)):
                if load[hi] - load[lo] < 2:
                    break
                cands = sorted(on[hi] - on[lo])
                batch = max(1, min(load[hi] - (q + 1), q - load[lo]))
                for _ in range(batch):
                    picked = _pick(cands, after, hi, lo, lead, spread)
                    if picked is None:
                        break
                    tp = picked
                    cands.remove(tp)
                    rs = after[tp]
                    if rs[0] == hi:
                        lead[hi] -= 1
                        lead[lo] += 1
                    rs[rs.index(hi)] = lo
                    on[hi].discard(tp)
                    on[lo].add(tp)
                    load[hi] -= 1
                    load[lo] += 1
                    moved = True
                if moved:
                    break
            if moved:
                break
        if not moved:
            return


def _pick(
    cands: list[TopicPartition],
    after: Mapping[TopicPartition, list[int]],
    hi: int,
    lo: int,
    lead: Mapping[int, int],
    spread: Callable[[Sequence[int]], int],
) -> TopicPartition | None:
    """The first of `cands` (partition order) whose move from hi to lo keeps its racks; one
    hi leads first when hi leads two more than lo (the leadership moves with it), last
    otherwise."""
    give_lead = lead[hi] - lead[lo] >= 2

    def keeps_racks(rs: list[int]) -> bool:
        return spread([lo if b == hi else b for b in rs]) >= spread(rs)

    fallback: TopicPartition | None = None
    for tp in cands:
        rs = after[tp]
        if (rs[0] == hi) == give_lead:
            if keeps_racks(rs):
                return tp
        elif fallback is None and keeps_racks(rs):
            fallback = tp
    return fallback


def _leader_path(
    after: Mapping[TopicPartition, list[int]],
    leads: Mapping[int, int],
    led: Mapping[int, Mapping[TopicPartition, None]],
) -> list[tuple[TopicPartition, int]] | None:
    """A chain of swaps [(tp, new first replica), ...] taking one preferred leadership from a
    broker with the most to one with at least two fewer; None when there is none. `led`:
    the partitions each broker is first in."""
    for src in sorted(leads, key=lambda b: (-leads[b], b)):
        if leads[src] - min(leads.values()) < 2:
            return None
        # breadth-first from src: reach a broker with leads <= leads[src] - 2
        prev: dict[int, tuple[int, TopicPartition] | None] = {src: None}
        queue = deque([src])
        found = None
        while queue and found is None:
            a = queue.popleft()
            for tp in led[a]:
                for b in after[tp][1:]:
                    if b in prev:
                        continue
                    prev[b] = (a, tp)
                    if leads[b] <= leads[src] - 2:
                        found = b
                        break
                    queue.append(b)
                if found is not None:
                    break
        if found is None:
            continue
        path: list[tuple[TopicPartition, int]] = []
        b = found
        while (step := prev[b]) is not None:
            a, tp = step
            path.append((tp, b))
            b = a
        return path[::-1]
    return None
