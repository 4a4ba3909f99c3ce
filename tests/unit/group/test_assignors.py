"""The server-side assignors (broker/group/assignors.py): balance, stickiness, range layout."""

from __future__ import annotations

import pytest

from broker.group.assignors import assign, range_assign, uniform_assign


def _counts(a: dict) -> list[int]:
    return sorted(len(v) for v in a.values())


def _all(a: dict) -> list:
    return sorted(tp for v in a.values() for tp in v)


@pytest.mark.parametrize(
    "members,partitions", [(1, 6), (2, 6), (3, 6), (4, 6), (3, 7), (5, 12), (7, 3)]
)
def test_uniform_gives_every_partition_once_and_balances(members, partitions) -> None:
    ms = {f"m{i}": ("t",) for i in range(members)}
    a = uniform_assign(ms, {"t": partitions}, {})
    assert _all(a) == [("t", p) for p in range(partitions)]
    counts = _counts(a)
    assert counts[-1] - counts[0] <= 1


def test_uniform_is_sticky_when_a_member_joins_and_leaves() -> None:
    two = uniform_assign({"a": ("t",), "b": ("t",)}, {"t": 7}, {})
    three = uniform_assign({"a": ("t",), "b": ("t",), "c": ("t",)}, {"t": 7}, two)
    assert _counts(three) == [2, 2, 3]
    moved = [tp for m in ("a", "b") for tp in two[m] if tp not in three[m]]
    assert len(moved) == len(three["c"])  # only what the newcomer needs moves
    back = uniform_assign({"a": ("t",), "b": ("t",)}, {"t": 7}, three)
    assert three["a"] <= back["a"] and three["b"] <= back["b"]


def test_uniform_with_different_subscriptions() -> None:
    ms = {"a": ("x",), "b": ("x", "y"), "c": ("y",)}
    a = uniform_assign(ms, {"x": 4, "y": 4}, {})
    assert all(tp[0] == "x" for tp in a["a"]) and all(tp[0] == "y" for tp in a["c"])
    assert _all(a) == [("x", p) for p in range(4)] + [("y", p) for p in range(4)]
    assert _counts(a) == [2, 3, 3]


def test_unknown_topics_are_left_out() -> None:
    assert uniform_assign({"a": ("nope",)}, {}, {}) == {"a": frozenset()}


def test_range_gives_contiguous_ranges_first_members_one_more() -> None:
    a = range_assign({"b": ("t",), "a": ("t",), "c": ("t",)}, {"t": 7})
    assert sorted(a["a"]) == [("t", 0), ("t", 1), ("t", 2)]
    assert sorted(a["b"]) == [("t", 3), ("t", 4)]
    assert sorted(a["c"]) == [("t", 5), ("t", 6)]


def test_unknown_assignor_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown assignor"):
        assign("sticky", {}, {}, {})
