"""Replica placement: rack-aware round-robin, as Kafka's AdminUtils.assignReplicasToBrokers.

Brokers are arranged in a list that alternates racks (rack-sorted, ids sorted within a rack).
Partition p's leader is arranged[(p + start) % n]; followers follow at a shift that grows by one
every n partitions (so the first follower of successive rounds moves by one, the second by two ...),
skipping brokers whose rack already holds a replica until every rack does. `start` and the initial
shift come from the seeded rng (or `fixed_start`). Pure: any thread may call.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from client.errors import InvalidReplicationFactorError


def rack_alternated(brokers: Mapping[int, str | None]) -> list[int]:
    """Broker ids ordered so that consecutive ids sit on different racks where possible."""
    by_rack: dict[str, list[int]] = {}
    for bid, rack in brokers.items():
        by_rack.setdefault(rack or "", []).append(bid)
    racks = sorted(by_rack)
    iters = {r: iter(sorted(by_rack[r])) for r in racks}
    out: list[int] = []
    i = 0
    while len(out) < len(brokers):
        nxt = next(iters[racks[i]], None)
        if nxt is not None:
            out.append(nxt)
        i = (i + 1) % len(racks)
    return out


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas(
    num_partitions: int,
    replication_factor: int,
    brokers: Mapping[int, str | None],
    rng: random.Random,
    start_partition: int = 0,
    fixed_start: int = -1,
) -> dict[int, list[int]]:
    """partition id -> replica list (leader first) for partitions start_partition.. .

    `brokers` maps live broker id -> rack (None when unknown). Raises
    InvalidReplicationFactorError when replication_factor < 1 or exceeds the broker count.
    """
    n = len(brokers)
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("replication factor must be larger than 0")
    if replication_factor > n:
        raise InvalidReplicationFactorError(
            f"replication factor: {replication_factor} larger than available brokers: {n}"
        )
    if num_partitions <= 0:
        return {}
    rack_aware = any(r is not None for r in brokers.values())
    arranged = rack_alternated(brokers) if rack_aware else sorted(brokers)
    rack_of = {b: (brokers[b] or "") for b in brokers}
    num_racks = len(set(rack_of.values())) if rack_aware else 1
    start = fixed_start if fixed_start >= 0 else rng.randrange(n)
    shift = fixed_start if fixed_start >= 0 else rng.randrange(n)
    out: dict[int, list[int]] = {}
    pid = max(0, start_partition)
    for _ in range(num_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        leader = arranged[first]
        replicas = [leader]
        if not rack_aware:
            replicas += [
                arranged[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
            ]
        else:
            racks_used = {rack_of[leader]}
            used = {leader}
            k = 0
            while len(replicas) < replication_factor:
                b = arranged[_replica_index(first, shift * num_racks, k, n)]
                if (rack_of[b] not in racks_used or len(racks_used) == num_racks) and (
                    b not in used or len(used) == n
                ):
                    replicas.append(b)
                    racks_used.add(rack_of[b])
                    used.add(b)
                k += 1
        out[pid] = replicas
        pid += 1
    return out
