"""Reassignment plans (client/cli/reassign_plan.py): generation spreads replicas evenly over
the brokers given with few moves, keeps replication factors and racks apart, and the JSON
reader refuses malformed plans with a message naming the entry."""

from __future__ import annotations

import json
import os
import random

import pytest

from client.cli.reassign_plan import PlanError, from_json, generate, to_json


def _loads(assignment):
    out: dict[int, int] = {}
    for rs in assignment.values():
        for r in rs:
            out[r] = out.get(r, 0) + 1
    return out


def test_a_new_broker_gets_its_share_with_the_fewest_moves():
    current = {("t", p): [1 + (p + i) % 3 for i in range(3)] for p in range(8)}
    plan = generate(current, [1, 2, 3, 4])
    after = {**current, **plan}
    loads = _loads(after)
    assert loads == {1: 6, 2: 6, 3: 6, 4: 6}
    # only the replicas broker 4 takes move: 6 of them, one per changed partition
    moved = sum(len(set(rs) - set(current[tp])) for tp, rs in plan.items())
    assert moved == 6 and len(plan) == 6
    for tp, rs in after.items():
        assert len(rs) == 3 and len(set(rs)) == 3, (tp, rs)
    assert generate(after, [1, 2, 3, 4]) == {}  # balanced: nothing to do


def test_decommissioning_moves_everything_off_a_broker():
    current = {("t", p): [1 + (p + i) % 4 for i in range(2)] for p in range(10)}
    plan = generate(current, [1, 2, 3])
    after = {**current, **plan}
    assert all(4 not in rs for rs in after.values())
    loads = _loads(after)
    assert max(loads.values()) - min(loads.values()) <= 1
    # a kept preferred replica stays first
    for tp, rs in plan.items():
        if current[tp][0] != 4:
            assert rs[0] == current[tp][0]


def test_racks_are_spread_when_a_replica_is_placed():
    current = {("t", 0): [1, 2]}
    racks = {1: "a", 2: "a", 3: "a", 4: "b"}
    plan = generate(current, [1, 3, 4], racks)
    # 2 goes; of 3 (rack a, like 1) and 4 (rack b) the other rack wins
    assert plan == {("t", 0): [1, 4]}


def test_randomised_plans_keep_every_invariant():
    seed = int(os.environ.get("GREGOR_SEED", random.randrange(1 << 30)))
    print(f"seed={seed} (GREGOR_SEED={seed} to replay)")
    rng = random.Random(seed)
    for _ in range(200):
        n = rng.randint(1, 8)
        ids = rng.sample(range(1, 20), n)
        current = {}
        for p in range(rng.randint(0, 30)):
            rf = rng.randint(1, n)
            current[("t", p)] = rng.sample(ids, rf)
        target = rng.sample(
            range(1, 20),
            rng.randint(max(1, max((len(v) for v in current.values()), default=1)), 10),
        )
        plan = generate(current, target)
        after = {**current, **plan}
        for tp, rs in after.items():
            assert len(rs) == len(current[tp]) and len(set(rs)) == len(rs), (seed, tp)
            assert set(rs) <= set(target), (seed, tp, rs, target)
        loads = _loads(after)
        total = sum(len(v) for v in current.values())
        cap = -(-total // len(target))
        assert all(v <= cap for v in loads.values()), (seed, loads, cap)


def test_errors():
    with pytest.raises(PlanError, match="distinct"):
        generate({("t", 0): [1]}, [1, 1])
    with pytest.raises(PlanError, match="3 replicas but only 2 brokers"):
        generate({("t", 0): [1, 2, 3]}, [1, 2])


def test_json_round_trip_and_refusals():
    plan = {("a", 0): [4, 5, 6], ("b", 3): [7]}
    assert from_json(to_json(plan)) == plan
    assert json.loads(to_json(plan))["version"] == 1
    kafka = '{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}'
    assert from_json(kafka) == {("a", 0): [1, 2]}
    for text, why in (
        ("nope", "not JSON"),
        ("[]", "expected"),
        ('{"version": 2, "partitions": []}', "unsupported version"),
        ('{"partitions": [{"topic": "", "partition": 0, "replicas": [1]}]}', "topic"),
        ('{"partitions": [{"topic": "a", "partition": -1, "replicas": [1]}]}', "partition"),
        ('{"partitions": [{"topic": "a", "partition": 0, "replicas": []}]}', "non-empty"),
        ('{"partitions": [{"topic": "a", "partition": 0, "replicas": [1, 1]}]}', "duplicate"),
        (
            '{"partitions": [{"topic": "a", "partition": 0, "replicas": [1], "log_dirs": ["/d"]}]}',
            "log_dirs",
        ),
        (
            '{"partitions": [{"topic": "a", "partition": 0, "replicas": [1]},'
            ' {"topic": "a", "partition": 0, "replicas": [2]}]}',
            "twice",
        ),
    ):
        with pytest.raises(PlanError, match=why):
            from_json(text, "plan.json")
