"""Server-side assignors (KIP-848): the coordinator computes each member's target assignment.

    assign(name, members, partition_counts, current) -> {member_id: frozenset[(topic, p)]}

`members` maps member id -> subscribed topic names; `partition_counts` topic -> partitions
(topics that do not exist are left out); `current` member id -> the partitions it has now
(the stickiness input). Pure functions: no clock, no I/O; any thread may call.

- `uniform` (the default, Kafka's UniformAssignor): every partition of a topic goes to one of
  its subscribers; counts differ by at most one between members with the same subscription;
  a partition stays with its current owner whenever that keeps the balance, so a member
  joining or leaving moves as few partitions as possible.
- `range` (Kafka's RangeAssignor for the new protocol): per topic, the subscribers sorted by
  member id get contiguous ranges, the first `partitions % members` one more.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

TP = tuple[str, int]
Assignment = dict[str, frozenset[TP]]

ASSIGNORS = ("uniform", "range")


def assign(
    name: str,
    members: Mapping[str, tuple[str, ...]],
    partition_counts: Mapping[str, int],
    current: Mapping[str, frozenset[TP]],
) -> Assignment:
    if name == "range":
        return range_assign(members, partition_counts)
    if name == "uniform":
        return uniform_assign(members, partition_counts, current)
    raise ValueError(f"unknown assignor {name!r} (known: {', '.join(ASSIGNORS)})")


def range_assign(
    members: Mapping[str, tuple[str, ...]], partition_counts: Mapping[str, int]
) -> Assignment:
    out: dict[str, set[TP]] = {m: set() for m in members}
    topics = sorted({t for subs in members.values() for t in subs if t in partition_counts})
    for topic in topics:
        subs = sorted(m for m, ts in members.items() if topic in ts)
        n = partition_counts[topic]
        per, extra = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            size = per + (1 if i < extra else 0)
            out[m].update((topic, p) for p in range(start, start + size))
            start += size
    return {m: frozenset(tps) for m, tps in out.items()}


def uniform_assign(
    members: Mapping[str, tuple[str, ...]],
    partition_counts: Mapping[str, int],
    current: Mapping[str, frozenset[TP]],
) -> Assignment:
    """Balanced per subscription class, sticky. Members sharing one subscription form a class;
    the partitions of a class's topics that no other class subscribes to are split inside it;
    a partition shared between classes goes to the least loaded eligible member."""
    out: dict[str, set[TP]] = {m: set() for m in members}
    if not members:
        return {}
    eligible: dict[TP, list[str]] = {}
    for topic in sorted({t for subs in members.values() for t in subs}):
        n = partition_counts.get(topic)
        if n is None:
            continue
        subs = sorted(m for m, ts in members.items() if topic in ts)
        for p in range(n):
            eligible[(topic, p)] = subs
    # Quotas per member: the partitions it is eligible for, split evenly among their members.
    # With one subscription for all (the usual case) this is floor/ceil of partitions/members.
    groups: dict[tuple[str, ...], list[TP]] = {}
    for tp, subs in eligible.items():
        groups.setdefault(tuple(subs), []).append(tp)
    quota: dict[str, Fraction] = {m: Fraction(0) for m in members}
    for cls, tps in groups.items():
        for mid in cls:
            quota[mid] += Fraction(len(tps), len(cls))
    floor = {m: int(q) for m, q in quota.items()}
    # 1. Sticky: keep current partitions up to the floor quota.
    owner_of = {tp: m for m, tps in current.items() if m in members for tp in tps}
    free: list[TP] = []
    for tp in sorted(eligible):
        owner = owner_of.get(tp)
        if owner is not None and owner in eligible[tp] and len(out[owner]) < floor[owner]:
            out[owner].add(tp)
        else:
            free.append(tp)
    # 2. A current owner keeps one more where its quota has a fraction left (ceil), while the
    #    remainder lasts.
    extras = len(eligible) - sum(floor.values())
    still: list[TP] = []
    for tp in free:
        owner = owner_of.get(tp)
        if (
            extras > 0
            and owner is not None
            and owner in eligible[tp]
            and len(out[owner]) == floor[owner]
            and floor[owner] < quota[owner]
        ):
            out[owner].add(tp)
            extras -= 1
        else:
            still.append(tp)
    # 3. The rest, one by one, to the eligible member with the fewest (ties: member id).
    for tp in still:
        m = min(eligible[tp], key=lambda c: (len(out[c]), c))
        out[m].add(tp)
    return {m: frozenset(tps) for m, tps in out.items()}
