"""The automatic balancing planner (controller/quorum/auto_balance.py): a new broker takes its
share from the most loaded brokers (non-led partitions first, racks kept apart), an
unavailable broker's replicas are re-created on the others (a rack not used first, then the
least loaded), the move limit holds, and partitions in flight or offline stay. A randomised
test checks the invariants on many placements (it prints its seed)."""

from __future__ import annotations

import os
import random
from collections import Counter

from controller.metadata.records import NO_LEADER
from controller.quorum.auto_balance import Placement, plan


def _parts(rows, leaders=None):
    return {
        ("t", i): Placement(tuple(rs), (leaders or {}).get(i, rs[0])) for i, rs in enumerate(rows)
    }


def _apply(parts, result):
    after = {tp: list(pl.replicas) for tp, pl in parts.items()}
    for m in result.moves:
        after[m.tp] = list(m.target)
    return after


def _load(after, brokers):
    c = Counter(r for rs in after.values() for r in rs)
    return {b: c[b] for b in brokers}


def test_a_new_broker_takes_its_share_and_is_settled():
    # 12 partitions, RF 3 over brokers 1-3: 12 replicas each; broker 4 joins
    parts = _parts([[1 + (i + j) % 3 for j in range(3)] for i in range(12)])
    receivers = {1: None, 2: None, 3: None, 4: None}
    result = plan(parts, receivers, new=[4], limit=100)
    assert result.settled == {4}
    load = _load(_apply(parts, result), receivers)
    assert load == {1: 9, 2: 9, 3: 9, 4: 9}
    for m in result.moves:
        assert len(m.target) == 3 and len(set(m.target)) == 3
        assert 4 in m.target and 4 not in m.replicas
        # one replica changes, in place
        assert sum(a != b for a, b in zip(m.replicas, m.target, strict=True)) == 1
        assert "broker 4 joined" in m.reason
    # no donor gives a partition it leads while it has others to give
    assert not any(parts[m.tp].leader in set(m.replicas) - set(m.target) for m in result.moves)


def test_the_limit_bounds_the_moves_and_the_broker_is_not_settled():
    parts = _parts([[1 + (i + j) % 3 for j in range(3)] for i in range(12)])
    result = plan(parts, {1: None, 2: None, 3: None, 4: None}, new=[4], limit=2)
    assert len(result.moves) == 2 and result.settled == set()
    assert plan(parts, {1: None, 2: None, 3: None, 4: None}, new=[4], limit=0).moves == []


def test_a_new_broker_that_is_not_a_receiver_is_left_waiting():
    parts = _parts([[1, 2], [2, 3]])
    result = plan(parts, {1: None, 2: None, 3: None}, new=[4], limit=10)
    assert result.moves == [] and result.settled == set()


def test_partitions_in_flight_or_offline_stay_but_count():
    parts = {
        ("t", 0): Placement((1, 2), 1, movable=False),
        ("t", 1): Placement((1, 2), NO_LEADER, movable=False),
        ("t", 2): Placement((1, 2), 1),
    }
    result = plan(parts, {1: None, 2: None, 3: None}, new=[3], limit=10)
    # share: 6 replicas over 3 brokers = 2; only t-2 can move
    assert [m.tp for m in result.moves] == [("t", 2)]
    assert result.moves[0].target == (1, 3)  # broker 2 gives it: it does not lead it
    assert result.settled == {3}


def test_fill_keeps_replicas_on_different_racks():
    # racks a, b; every partition has one replica on each; broker 4 on rack a may take
    # only replicas from rack a
    racks = {1: "a", 2: "b", 3: "b", 4: "a"}
    parts = _parts([[1, 2], [1, 3], [1, 2], [1, 3], [1, 2], [1, 3]])
    result = plan(parts, racks, new=[4], limit=100)
    after = _apply(parts, result)
    for rs in after.values():
        assert len({racks[r] for r in rs}) == 2
    assert _load(after, racks)[4] == 3 and _load(after, racks)[1] == 3


def test_drain_recreates_the_replicas_of_an_unavailable_broker_rack_first():
    racks = {1: "a", 2: "b", 4: "c", 5: "a"}  # broker 3 (rack c) is gone
    parts = _parts([[1, 2, 3], [3, 1, 2], [2, 3, 1]], leaders={1: 1})
    result = plan(parts, racks, unavailable=[3], limit=10)
    assert len(result.moves) == 3
    for m in result.moves:
        assert 3 not in m.target and len(set(m.target)) == 3
        assert m.target[m.replicas.index(3)] == 4  # rack c again, in place
        assert "broker 3 unavailable" in m.reason
    assert result.stuck == []


def test_drain_without_enough_receivers_is_stuck():
    parts = _parts([[1, 2, 3]])
    result = plan(parts, {1: None, 2: None}, unavailable=[3], limit=10)
    assert result.moves == [] and result.stuck == [("t", 0)]


def test_drain_goes_first_and_both_share_the_limit():
    parts = _parts([[1, 3], [2, 3], [1, 2], [1, 2]])
    result = plan(parts, {1: None, 2: None, 4: None}, new=[4], unavailable=[3], limit=2)
    assert [m.tp for m in result.moves] == [("t", 0), ("t", 1)]
    assert all(m.target[1] == 4 for m in result.moves)


def test_randomised_invariants():
    seed = int(os.environ.get("GREGOR_TEST_SEED", random.randrange(2**32)))
    print(f"seed={seed}")
    rng = random.Random(seed)
    for _ in range(200):
        n = rng.randint(2, 7)
        brokers = list(range(1, n + 1))
        racked = rng.random() < 0.5
        racks = {b: rng.choice(["a", "b", "c"]) if racked else None for b in brokers}
        rf = rng.randint(1, min(3, n - 1))
        old = brokers[:-1]  # the last broker is new
        parts = {}
        for i in range(rng.randint(0, 40)):
            rs = tuple(rng.sample(old, rf))
            parts[("t", i)] = Placement(rs, rng.choice(rs), rng.random() < 0.9)
        gone = [b for b in old if rng.random() < 0.2][: len(old) - rf]
        receivers = {b: racks[b] for b in brokers if b not in gone}
        limit = rng.randint(0, 30)
        result = plan(parts, receivers, new=[brokers[-1]], unavailable=gone, limit=limit)
        assert len(result.moves) <= limit, seed
        assert len({m.tp for m in result.moves}) == len(result.moves), seed
        for m in result.moves:
            pl = parts[m.tp]
            assert pl.movable, seed
            assert len(m.target) == len(pl.replicas) == len(set(m.target)), seed
            assert all(b in receivers for b in set(m.target) - set(pl.replicas)), seed
            assert not any(b in gone for b in m.target), seed
            # the racks a partition's live replicas use never become fewer
            live_racks = {racks[r] for r in pl.replicas if r not in gone}
            assert len({racks[r] for r in m.target}) >= len(live_racks), (seed, m)
        if brokers[-1] in result.settled and limit >= 30 and not gone and not racked:
            load = _load(_apply(parts, result), receivers)
            fixed = sum(len(pl.replicas) for pl in parts.values() if not pl.movable)
            if fixed == 0:
                share = sum(load.values()) // len(load)
                hi = max(load.values())
                # it holds its share, or no donor has more than one replica above it
                assert load[brokers[-1]] >= share or hi - load[brokers[-1]] <= 1, (seed, load)
