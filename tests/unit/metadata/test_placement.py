"""Rack-aware round-robin placement (Kafka's assignReplicasToBrokers)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from client.errors import InvalidReplicationFactorError
from controller.metadata.placement import assign_replicas, rack_alternated


def test_rack_alternated_order():
    brokers = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    # Kafka's documented example: 0, 3, 1, 5, 4, 2
    assert rack_alternated(brokers) == [0, 3, 1, 5, 4, 2]


def test_kafka_reference_rack_unaware():
    # AdminUtils doc example: 5 brokers, 10 partitions, rf 3, start 0 / shift 0
    got = assign_replicas(10, 3, dict.fromkeys(range(5)), random.Random(0), fixed_start=0)
    assert got[0] == [0, 1, 2] and got[1] == [1, 2, 3] and got[4] == [4, 0, 1]
    assert got[5] == [0, 2, 3] and got[9] == [4, 1, 2]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("nbrokers,nparts,rf", [(3, 30, 3), (5, 50, 2), (6, 60, 3)])
def test_balance(seed, nbrokers, nparts, rf):
    brokers = dict.fromkeys(range(1, nbrokers + 1))
    got = assign_replicas(nparts, rf, brokers, random.Random(seed))
    assert sorted(got) == list(range(nparts))
    leaders = Counter(r[0] for r in got.values())
    replicas = Counter(b for r in got.values() for b in r)
    assert all(len(set(r)) == rf for r in got.values()), "replicas are distinct brokers"
    assert max(leaders.values()) - min(leaders.values()) <= 1
    assert max(replicas.values()) - min(replicas.values()) <= 1
    print("seed", seed)


@pytest.mark.parametrize("seed", [1, 7])
def test_rack_spread(seed):
    brokers = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    got = assign_replicas(24, 3, brokers, random.Random(seed))
    for r in got.values():
        assert len({brokers[b] for b in r}) == 3, f"replicas {r} must span 3 racks (seed {seed})"
    leaders = Counter(r[0] for r in got.values())
    assert max(leaders.values()) - min(leaders.values()) <= 1
    got2 = assign_replicas(12, 2, {1: "a", 2: "a", 3: "b"}, random.Random(seed))
    for r in got2.values():
        assert {"a", "b"} == {({1: "a", 2: "a", 3: "b"})[b] for b in r}


def test_seeded_rng_is_deterministic_and_start_partition():
    b = {1: None, 2: None, 3: None}
    assert assign_replicas(6, 2, b, random.Random(1)) == assign_replicas(6, 2, b, random.Random(1))
    more = assign_replicas(3, 2, b, random.Random(1), start_partition=6)
    assert sorted(more) == [6, 7, 8]


@pytest.mark.parametrize("rf", [0, 4])
def test_invalid_replication_factor(rf):
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(3, rf, {1: None, 2: None, 3: None}, random.Random(1))
