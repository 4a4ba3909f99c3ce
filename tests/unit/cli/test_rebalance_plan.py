"""The plan of `gregor cluster rebalance` (client/cli/rebalance_plan.py): replicas and preferred
leaders even across the live brokers, racks spread, the fewest replica moves; seeded
property-style runs over random placements (the seed is printed; GREGOR_SEED replays it)."""

from __future__ import annotations

import os
import random

import pytest

from client.cli.reassign_plan import PlanError
from client.cli.rebalance_plan import plan


def _counts(assignment):
    replicas: dict[int, int] = {}
    leaders: dict[int, int] = {}
    for rs in assignment.values():
        for r in rs:
            replicas[r] = replicas.get(r, 0) + 1
        leaders[rs[0]] = leaders.get(rs[0], 0) + 1
    return replicas, leaders


def _least_moves(current, ids) -> int:
    """The fewest replicas that must change broker to bring every count within one of even:
    the surplus over the targets (the larger shares to the most loaded brokers)."""
    loads = sorted((_counts(current)[0].get(b, 0) for b in ids), reverse=True)
    q, r = divmod(sum(loads), len(ids))
    targets = [q + 1] * r + [q] * (len(ids) - r)
    return sum(max(0, load - t) for load, t in zip(loads, targets, strict=True))


def _spread(rs, racks) -> int:
    return len({racks[b] if racks[b] is not None else ("no rack", b) for b in rs})


def _random_case(rng: random.Random, with_racks: bool, one_rf: bool = False):
    n = rng.randint(2, 8)
    ids = rng.sample(range(1, 20), n)
    if with_racks:
        names = [f"r{i}" for i in range(rng.randint(1, 4))]
        racks = {b: rng.choice(names) for b in ids}
    else:
        racks = dict.fromkeys(ids)
    # skewed: new brokers (a random subset) hold nothing yet
    old = rng.sample(ids, rng.randint(1, n))
    current = {}
    rf = rng.randint(1, len(old))
    for t in range(rng.randint(1, 3)):
        rf = rf if one_rf else rng.randint(1, len(old))
        for p in range(rng.randint(1, 12)):
            current[(f"t{t}", p)] = rng.sample(old, rf)
    return current, racks


def _check(current, racks, seed) -> object:
    pl = plan(current, racks)
    after = {**current, **pl.assignment}
    ids = sorted(racks)
    all_racks = len({racks[b] if racks[b] is not None else ("no rack", b) for b in ids})
    for tp, rs in after.items():
        # never two replicas of a partition on one broker; the replication factor kept; only
        # the brokers given
        assert len(rs) == len(current[tp]) and len(set(rs)) == len(rs), (seed, tp, rs)
        assert set(rs) <= set(ids), (seed, tp, rs)
        # racks spread as far as the replication factor and the racks allow
        assert _spread(rs, racks) == min(len(rs), all_racks), (seed, tp, rs, racks)
    for tp, rs in pl.reorders.items():
        assert set(rs) == set(current[tp]) and rs != list(current[tp]), (seed, tp)
    for tp, rs in pl.moves.items():
        assert set(rs) != set(current[tp]), (seed, tp)
    replicas, leaders = _counts(after)
    assert pl.replicas_after == {b: replicas.get(b, 0) for b in ids}, seed
    assert pl.leaders_after == {b: leaders.get(b, 0) for b in ids}, seed
    moved = sum(len(set(after[tp]) - set(current[tp])) for tp in current)
    assert pl.replicas_moved == moved, seed
    # applying the plan and planning again: nothing to do
    again = plan(after, racks)
    assert not again.moves and not again.reorders, (seed, again)
    return pl


def test_randomised_placements_without_racks_even_out_with_the_fewest_moves():
    seed = int(os.environ.get("GREGOR_SEED", random.randrange(1 << 30)))
    print(f"seed={seed} (GREGOR_SEED={seed} to replay)")
    rng = random.Random(seed)
    for i in range(200):
        one_rf = i % 2 == 0
        current, racks = _random_case(rng, with_racks=False, one_rf=one_rf)
        pl = _check(current, racks, seed)
        r = pl.replicas_after
        assert max(r.values()) - min(r.values()) <= 1, (seed, current, r)
        assert pl.replicas_moved == _least_moves(current, sorted(racks)), (seed, current)
        lead, before = pl.leaders_after, pl.leaders_before
        gap = max(lead.values()) - min(lead.values())
        if one_rf:  # one replication factor: leaders even out too
            assert gap <= 1, (seed, current, lead)
        else:  # mixed (RF 1 partitions lead where they are): never worse than before
            assert gap <= max(1, max(before.values()) - min(before.values())), (seed, lead)


def test_randomised_placements_with_racks_keep_every_invariant():
    seed = int(os.environ.get("GREGOR_SEED", random.randrange(1 << 30)))
    print(f"seed={seed} (GREGOR_SEED={seed} to replay)")
    rng = random.Random(seed)
    for _ in range(150):
        current, racks = _random_case(rng, with_racks=True)
        pl = _check(current, racks, seed)
        # racks come first: counts even out as far as spreading racks allows, i.e. no
        # replica can move from a broker to one holding two fewer without its partition
        # losing a rack
        after = {**current, **pl.assignment}
        r = pl.replicas_after
        for hi in r:
            for lo in r:
                if r[hi] - r[lo] < 2:
                    continue
                for tp, rs in after.items():
                    if hi in rs and lo not in rs:
                        moved = [lo if b == hi else b for b in rs]
                        assert _spread(moved, racks) < _spread(rs, racks), (seed, tp, hi, lo)


def test_three_skewed_brokers_and_a_new_one():
    # 6 partitions, RF 2, all on brokers 1 and 2; 3 holds nothing, 4 just joined
    current = {("t", p): [1, 2] if p % 2 else [2, 1] for p in range(6)}
    pl = plan(current, {1: None, 2: None, 3: None, 4: None})
    assert pl.replicas_after == {1: 3, 2: 3, 3: 3, 4: 3}
    assert pl.replicas_moved == 6  # 1 and 2 each give 3: no fewer can do it
    assert sorted(pl.leaders_after.values()) == [1, 1, 2, 2]
    assert pl.replicas_before == {1: 6, 2: 6, 3: 0, 4: 0}


def test_racks_are_spread_before_counts_are_evened():
    # brokers 1, 2 on rack a; 3 on rack b: a partition on [1, 2] gets one replica on b
    current = {("t", 0): [1, 2], ("t", 1): [3, 1]}
    pl = plan(current, {1: "a", 2: "a", 3: "b"})
    after = {**current, **pl.assignment}
    assert 3 in after[("t", 0)] and after[("t", 0)][0] in (1, 2, 3)
    assert all(_spread(rs, {1: "a", 2: "a", 3: "b"}) == 2 for rs in after.values())


def test_a_balanced_cluster_needs_nothing():
    current = {("t", p): [1 + (p + i) % 3 for i in range(3)] for p in range(6)}
    pl = plan(current, {1: None, 2: None, 3: None})
    assert pl.assignment == {} and pl.replicas_moved == 0


def test_leaders_even_out_by_reordering_alone():
    current = {("t", p): [1, 2, 3] for p in range(6)}  # all led by 1, replicas even already
    pl = plan(current, {1: None, 2: None, 3: None})
    assert pl.moves == {} and pl.replicas_moved == 0
    assert pl.leaders_after == {1: 2, 2: 2, 3: 2}


def test_replicas_on_brokers_not_live_are_refused():
    with pytest.raises(PlanError, match=r"t-0 has replicas on brokers \[9\] that are not live"):
        plan({("t", 0): [1, 9]}, {1: None, 2: None})
    with pytest.raises(PlanError, match="no live broker"):
        plan({("t", 0): [1]}, {})
