"""Offset JSON, data-loss checks, maxOffsetsPerTrigger split, minPartitions split (pure)."""

from __future__ import annotations

import itertools
import json
import logging
import random

import pytest

from client.spark.offsets import (
    DataLossError,
    OffsetRange,
    PartitionState,
    data_loss_reason,
    from_json,
    plan_ranges,
    rate_limit,
    reconcile,
    to_json,
)


def test_json_round_trip_with_string_partition_keys() -> None:
    offs = {("b", 1): 7, ("a", 10): 3, ("a", 2): 0}
    j = to_json(offs)
    assert j == {"a": {"10": 3, "2": 0}, "b": {"1": 7}}
    back = from_json(json.loads(json.dumps(j)))  # as Spark hands it back
    assert back == offs
    assert from_json({"a": {0: 5}}) == {("a", 0): 5}
    assert from_json(None) == {}


def test_data_loss_reasons() -> None:
    tp = ("t", 0)
    assert data_loss_reason(tp, 5, PartitionState(0, 10)) is None
    assert data_loss_reason(tp, 10, PartitionState(0, 10)) is None
    assert "retention" in data_loss_reason(tp, 2, PartitionState(5, 10))
    assert "deleted" in data_loss_reason(tp, 2, None)
    assert "truncated" in data_loss_reason(tp, 12, PartitionState(0, 10))


def test_reconcile_fail_raises_with_reason() -> None:
    with pytest.raises(DataLossError, match="retention.*failOnDataLoss"):
        reconcile({("t", 0): 1}, {("t", 0): PartitionState(4, 9)}, fail=True)
    with pytest.raises(DataLossError, match="deleted"):
        reconcile({("t", 0): 1}, {}, fail=True)


def test_reconcile_skip_logs_and_clamps(caplog: pytest.LogCaptureFixture) -> None:
    cur = {
        ("t", 0): PartitionState(4, 9),  # retention moved past 1
        ("t", 1): PartitionState(0, 3),  # truncated below 8
        ("t", 2): PartitionState(0, 5),  # fine
        ("n", 0): PartitionState(2, 6),  # new partition: from its log start
    }
    with caplog.at_level(logging.WARNING, logger="client.spark.offsets"):
        out = reconcile({("t", 0): 1, ("t", 1): 8, ("t", 2): 2, ("gone", 0): 3}, cur, fail=False)
    assert out == {("t", 0): 4, ("t", 1): 3, ("t", 2): 2, ("n", 0): 2}
    text = caplog.text
    assert "retention" in text and "truncated" in text and "deleted" in text


def test_rate_limit_proportional_exact() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 100}
    end = {("t", 0): 300, ("t", 1): 100, ("t", 2): 100}
    got = rate_limit(start, end, 100)
    assert got == {("t", 0): 75, ("t", 1): 25, ("t", 2): 100}
    assert rate_limit(start, end, 1000) == end


def test_rate_limit_random_invariants() -> None:
    seed = random.randrange(1 << 30)
    print("seed", seed)
    rng = random.Random(seed)
    for _ in range(300):
        n = rng.randint(1, 8)
        start = {("t", i): rng.randint(0, 50) for i in range(n)}
        end = {tp: s + rng.choice([0, 1, 2, rng.randint(0, 1000)]) for tp, s in start.items()}
        limit = rng.randint(1, 500)
        got = rate_limit(start, end, limit)
        total = sum(end[tp] - start[tp] for tp in end)
        assert sum(got[tp] - start[tp] for tp in end) == min(limit, total)
        assert all(start[tp] <= got[tp] <= end[tp] for tp in end)


def test_rate_limit_equal_partitions_batches() -> None:
    """1000 records over 4 partitions, limit 100 -> exactly 10 batches of 100."""
    pos = {("t", p): 0 for p in range(4)}
    end = {("t", p): 250 for p in range(4)}
    batches = 0
    while pos != end:
        nxt = rate_limit(pos, end, 100)
        assert sum(nxt[tp] - pos[tp] for tp in pos) <= 100
        pos = nxt
        batches += 1
    assert batches == 10


def test_plan_ranges_one_per_partition_and_empty_skipped() -> None:
    start = {("t", 0): 0, ("t", 1): 5, ("t", 2): 9}
    end = {("t", 0): 10, ("t", 1): 5, ("t", 2): 12}
    assert plan_ranges(start, end) == [OffsetRange("t", 0, 0, 10), OffsetRange("t", 2, 9, 12)]
    assert plan_ranges(start, end, min_partitions=2) == plan_ranges(start, end)


def test_plan_ranges_min_partitions_split() -> None:
    start = {("t", 0): 0, ("t", 1): 0}
    end = {("t", 0): 900, ("t", 1): 100}
    got = plan_ranges(start, end, min_partitions=10)
    assert [r for r in got if r.partition == 1] == [OffsetRange("t", 1, 0, 100)]
    p0 = [r for r in got if r.partition == 0]
    assert len(p0) == 9 and all(r.size == 100 for r in p0)
    # contiguous and complete cover
    assert p0[0].start == 0 and p0[-1].end == 900
    assert all(a.end == b.start for a, b in itertools.pairwise(p0))


def test_plan_ranges_split_random_cover() -> None:
    seed = random.randrange(1 << 30)
    print("seed", seed)
    rng = random.Random(seed)
    for _ in range(200):
        n = rng.randint(1, 5)
        start = {("t", i): rng.randint(0, 100) for i in range(n)}
        end = {tp: s + rng.randint(0, 500) for tp, s in start.items()}
        got = plan_ranges(start, end, min_partitions=rng.randint(1, 20))
        for tp in end:
            rs = [r for r in got if (r.topic, r.partition) == tp]
            covered = sum(r.size for r in rs)
            assert covered == end[tp] - start[tp]
            assert all(r.size > 0 for r in rs)
            assert all(a.end == b.start for a, b in itertools.pairwise(rs))
