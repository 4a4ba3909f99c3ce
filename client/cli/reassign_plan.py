"""Reassignment plans: the JSON of `gregor partitions reassign`, as `kafka-reassign-partitions`
writes and reads it, and the generation of one. Pure functions; any thread.

    {"version": 1,
     "partitions": [{"topic": "orders", "partition": 0, "replicas": [4, 5, 6]}, ...]}

(Kafka's optional `log_dirs` list is accepted when every entry is "any"; Gregor has one log
directory per broker for placement purposes.)

`generate` moves few replicas: a replica on a broker not given is replaced, in place, by a
given broker (a rack the partition does not use yet first, then the least loaded, then the
lowest id); then the most loaded broker hands one replica at a time to the least loaded until
their counts differ by at most one (never putting two replicas of a partition on one rack
that were apart; a partition it does not lead first). Replication factors are kept; a
preferred (first) replica that stays, stays first. Partitions whose replicas do not change
are left out of the plan.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

Assignment = dict[tuple[str, int], list[int]]


class PlanError(ValueError):
    """A plan that cannot be read or generated; the message says why."""


def generate(
    current: Mapping[tuple[str, int], Sequence[int]],
    brokers: Sequence[int],
    racks: Mapping[int, str | None] | None = None,
    *,
    balance: bool = True,
) -> Assignment:
    """The moves that spread `current` ({(topic, partition): replicas}) over `brokers`, each
    partition keeping its replication factor; only changed partitions are returned.
    `balance=False`: only the replicas on brokers not given move (a decommission)."""
    if not brokers or len(set(brokers)) != len(brokers):
        raise PlanError(f"--brokers must list distinct broker ids, not {list(brokers)}")
    racks = racks or {}
    for tp, replicas in sorted(current.items()):
        if len(replicas) > len(brokers):
            raise PlanError(
                f"{tp[0]}-{tp[1]} has {len(replicas)} replicas but only {len(brokers)} brokers"
                " were given"
            )
    after: Assignment = {tp: list(rs) for tp, rs in current.items()}
    load = dict.fromkeys(brokers, 0)
    for rs in after.values():
        for r in rs:
            if r in load:
                load[r] += 1

    def pick(rs: list[int], leaving: int, candidates: Sequence[int]) -> int | None:
        """The broker to take `leaving`'s place in `rs`: not in it, another rack than the rest
        of it first, then the least loaded, then the lowest id."""
        used = {racks.get(r) for r in rs if r != leaving} - {None}
        free = [b for b in candidates if b not in rs]
        if not free:
            return None
        return min(free, key=lambda b: (racks.get(b) in used, load[b], b))

    # replicas on brokers not given move first, in place (the same position in the list)
    for tp in sorted(after):
        rs = after[tp]
        for i, r in enumerate(rs):
            if r not in load:
                b = pick(rs, r, brokers)
                assert b is not None  # len(rs) <= len(brokers)
                rs[i] = b
                load[b] += 1
    # then the most loaded broker gives a replica to the least loaded until they differ by at
    # most one (each move lowers the sum of squared loads: it ends); a partition where the
    # giver is not the preferred replica first, the last partitions first
    order = sorted(after, reverse=True)
    while balance:
        hi = max(brokers, key=lambda b: (load[b], -b))
        moved = False
        for lo in sorted(brokers, key=lambda b: (load[b], b)):
            if load[hi] - load[lo] <= 1:
                break
            tps = [tp for tp in order if hi in after[tp] and lo not in after[tp]]
            tps.sort(key=lambda tp: after[tp][0] == hi)
            for tp in tps:
                rs = after[tp]
                used = {racks.get(r) for r in rs if r != hi} - {None}
                if racks.get(lo) in used and racks.get(hi) not in used:
                    continue  # would put two replicas on one rack that were apart
                rs[rs.index(hi)] = lo
                load[hi] -= 1
                load[lo] += 1
                moved = True
                break
            if moved:
                break
        if not moved:
            break
    return {tp: rs for tp, rs in sorted(after.items()) if list(current[tp]) != rs}


def to_json(assignment: Mapping[tuple[str, int], Sequence[int]]) -> str:
    parts = [
        {"topic": t, "partition": p, "replicas": list(rs)}
        for (t, p), rs in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": parts}, indent=2)


def from_json(text: str, source: str = "the plan") -> Assignment:
    """A plan's {(topic, partition): replicas}; PlanError naming what is wrong."""
    try:
        obj: Any = json.loads(text)
    except json.JSONDecodeError as e:
        raise PlanError(f"{source} is not JSON: {e}") from e
    if not isinstance(obj, dict) or not isinstance(obj.get("partitions"), list):
        raise PlanError(f'{source}: expected {{"version": 1, "partitions": [...]}}')
    if obj.get("version", 1) != 1:
        raise PlanError(f"{source}: unsupported version {obj.get('version')!r} (1 is)")
    out: Assignment = {}
    for i, entry in enumerate(obj["partitions"]):
        where = f"{source}: partitions[{i}]"
        if not isinstance(entry, dict):
            raise PlanError(f"{where} is not an object")
        topic, p, rs = entry.get("topic"), entry.get("partition"), entry.get("replicas")
        if not isinstance(topic, str) or not topic:
            raise PlanError(f"{where}: topic must be a non-empty string")
        if not isinstance(p, int) or isinstance(p, bool) or p < 0:
            raise PlanError(f"{where}: partition must be an integer >= 0")
        if (
            not isinstance(rs, list)
            or not rs
            or not all(isinstance(r, int) and not isinstance(r, bool) for r in rs)
        ):
            raise PlanError(f"{where}: replicas must be a non-empty list of broker ids")
        if len(set(rs)) != len(rs):
            raise PlanError(f"{where}: duplicate broker ids in {rs}")
        dirs = entry.get("log_dirs")
        if dirs is not None and (
            not isinstance(dirs, list) or len(dirs) != len(rs) or any(d != "any" for d in dirs)
        ):
            raise PlanError(
                f'{where}: log_dirs other than "any" are not supported (one log directory'
                " per broker)"
            )
        if (topic, p) in out:
            raise PlanError(f"{where}: {topic}-{p} is listed twice")
        out[(topic, p)] = list(rs)
    return out
