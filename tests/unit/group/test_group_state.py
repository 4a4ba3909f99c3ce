"""The pure group state machine (broker/group/state.py): joins, incremental hand-over, fencing,
expiry, commit fencing; and a seeded random simulation checking that no partition is ever
owned by two members and that the group converges once the members stop changing."""

from __future__ import annotations

import os
import random

import pytest

from broker.group.state import ConsumerGroup, GroupError
from client.errors import ErrorCode

COUNTS = {"t": 6}


def hb(g: ConsumerGroup, mid: str, epoch: int, owned=None, now: int = 0, topics=("t",)):
    return g.heartbeat(
        mid, epoch, now_ms=now, subscribed=list(topics) if topics else None,
        owned=None if owned is None else frozenset(owned), assignor=None,
        session_timeout_ms=1000, rebalance_timeout_ms=5000,
        partition_counts=lambda ts: {t: COUNTS[t] for t in ts if t in COUNTS},
    )  # fmt: skip


def test_first_member_gets_everything() -> None:
    g = ConsumerGroup("g")
    r = hb(g, "a", 0)
    assert r.member_epoch == g.group_epoch >= 1
    assert r.assignment == {("t", p) for p in range(6)}
    assert g.state == "stable"


def test_partition_moves_only_after_the_old_owner_revoked_it() -> None:
    g = ConsumerGroup("g")
    a = hb(g, "a", 0)
    b = hb(g, "b", 0)
    assert b.assignment == frozenset()  # everything still owned by a
    a2 = hb(g, "a", a.member_epoch, owned=a.assignment)
    assert len(a2.assignment) == 3 and a2.member_epoch == a.member_epoch  # revoking: same epoch
    b2 = hb(g, "b", b.member_epoch, owned=())
    assert b2.assignment == frozenset()  # a has not confirmed yet
    a3 = hb(g, "a", a2.member_epoch, owned=a2.assignment)  # revoked
    assert a3.member_epoch == g.assignment_epoch
    b3 = hb(g, "b", b2.member_epoch, owned=())
    assert len(b3.assignment) == 3 and not (b3.assignment & a3.assignment)
    assert g.state == "stable"


def test_stale_epoch_is_fenced_and_unknown_member_refused() -> None:
    g = ConsumerGroup("g")
    r = hb(g, "a", 0)
    with pytest.raises(GroupError) as e:
        hb(g, "a", r.member_epoch + 5, owned=r.assignment)
    assert e.value.code == ErrorCode.FENCED_MEMBER_EPOCH
    assert "a" not in g.members
    with pytest.raises(GroupError) as e:
        hb(g, "a", 3, owned=())
    assert e.value.code == ErrorCode.UNKNOWN_MEMBER_ID


def test_commit_fencing() -> None:
    g = ConsumerGroup("g")
    r = hb(g, "a", 0)
    g.check_commit("a", r.member_epoch)
    for mid, epoch, code in [
        ("a", r.member_epoch - 1, ErrorCode.STALE_MEMBER_EPOCH),
        ("x", 1, ErrorCode.UNKNOWN_MEMBER_ID),
        ("", -1, ErrorCode.UNKNOWN_MEMBER_ID),  # the group has members
    ]:
        with pytest.raises(GroupError) as e:
            g.check_commit(mid, epoch)
        assert e.value.code == code
    hb(g, "a", -1)
    g.check_commit("", -1)  # empty group: tools may commit


def test_session_expiry_frees_partitions() -> None:
    g = ConsumerGroup("g")
    a = hb(g, "a", 0, now=0)
    b = hb(g, "b", 0, now=900)
    expired = g.expired(1000)
    assert [m.member_id for m, _ in expired] == ["a"]
    g.remove("a")
    b2 = hb(g, "b", b.member_epoch, owned=(), now=950)
    assert b2.assignment == a.assignment


def test_random_membership_never_double_owns() -> None:
    seed = int(os.environ.get("GREGOR_TEST_SEED", random.randrange(2**32)))
    print(f"seed {seed} (GREGOR_TEST_SEED replays)")
    rng = random.Random(seed)
    g = ConsumerGroup("g", assignor=rng.choice(["uniform", "range"]))
    clients: dict[str, tuple[int, frozenset]] = {}  # member -> (epoch, owned per the client)
    next_id = 0
    for step in range(2000):
        action = rng.random()
        if action < 0.05 or not clients:
            mid = f"m{next_id}"
            next_id += 1
            r = hb(g, mid, 0, now=step)
            clients[mid] = (r.member_epoch, frozenset())
        elif action < 0.08:
            mid = rng.choice(sorted(clients))
            hb(g, mid, -1, now=step)
            del clients[mid]
        else:
            mid = rng.choice(sorted(clients))
            epoch, owned = clients[mid]
            r = hb(g, mid, epoch, owned=owned, now=step)
            # The client applies the answer: revokes at once, takes what it is given.
            clients[mid] = (r.member_epoch, r.assignment)
        owners: dict = {}
        for m in g.members.values():
            for tp in m.assigned:
                assert tp not in owners, (
                    f"step {step}: {tp} owned by {owners[tp]} and {m.member_id}"
                )
                owners[tp] = m.member_id
        for mid, (_e, owned) in clients.items():
            assert owned <= g.members[mid].assigned, f"step {step}: {mid} owns {owned}"
    # Quiet: heartbeats only; the group becomes stable and every partition is owned once.
    for _ in range(10):
        for mid in sorted(clients):
            epoch, owned = clients[mid]
            r = hb(g, mid, epoch, owned=owned, now=5000)
            clients[mid] = (r.member_epoch, r.assignment)
    if clients:
        assert g.state == "stable"
        assert sorted(tp for _e, o in clients.values() for tp in o) == [("t", p) for p in range(6)]


def test_regex_subscription_follows_the_topics() -> None:
    import re

    topics = ["orders-eu", "orders-us-x", "billing"]
    counts = {"orders-eu": 2, "orders-us-x": 1, "billing": 3, "orders-us": 1}

    def beat(mid: str, epoch: int, owned=None, regex=None):
        return g.heartbeat(
            mid, epoch, now_ms=0, subscribed=None, owned=owned, assignor=None, regex=regex,
            resolve=lambda rx: tuple(t for t in topics if re.fullmatch(rx, t)),
            session_timeout_ms=1000, rebalance_timeout_ms=5000,
            partition_counts=lambda ts: {t: counts[t] for t in ts},
        )  # fmt: skip

    g = ConsumerGroup("g")
    r = beat("a", 0, regex=r"orders-[a-z]{2}")
    assert r.assignment == {("orders-eu", 0), ("orders-eu", 1)}
    epoch = g.group_epoch
    topics.append("orders-us")  # created later: the next heartbeat picks it up
    r = beat("a", r.member_epoch, owned=r.assignment)
    assert g.group_epoch > epoch
    assert r.assignment == {("orders-eu", 0), ("orders-eu", 1), ("orders-us", 0)}
    assert g.members["a"].subscribed == ("orders-eu", "orders-us")


def test_static_member_restart_keeps_its_partitions_without_a_rebalance() -> None:
    def beat(mid: str, epoch: int, owned=None, instance=None, now: int = 0):
        return g.heartbeat(
            mid, epoch, now_ms=now, subscribed=["t"] if epoch == 0 else None,
            owned=None if owned is None else frozenset(owned), assignor=None,
            session_timeout_ms=1000, rebalance_timeout_ms=5000, instance_id=instance,
            partition_counts=lambda ts: {t: COUNTS[t] for t in ts if t in COUNTS},
        )  # fmt: skip

    g = ConsumerGroup("g")
    a = beat("a1", 0, instance="A")
    b = beat("b", 0)
    a = beat("a1", a.member_epoch, owned=a.assignment)  # revokes half for b
    a = beat("a1", a.member_epoch, owned=a.assignment)
    b = beat("b", b.member_epoch, owned=())
    assert len(a.assignment) == 3 and len(b.assignment) == 3 and g.state == "stable"
    epoch = g.group_epoch
    with pytest.raises(GroupError) as e:  # another process cannot take the id while a1 is in
        beat("a9", 0, instance="A", now=5)
    assert e.value.code == ErrorCode.UNRELEASED_INSTANCE_ID
    beat("a1", -2, instance="A", now=10)  # leaves for a restart
    assert g.group_epoch == epoch
    b2 = beat("b", b.member_epoch, owned=b.assignment, now=20)
    assert b2.assignment == b.assignment  # b does not get a's partitions
    a2 = beat("a2", 0, instance="A", now=40)  # the restarted instance
    assert a2.assignment == a.assignment and g.group_epoch == epoch  # no rebalance
    assert "a1" not in g.members
    # Not back within the session timeout: the departed member is removed like any other.
    beat("a2", -2, instance="A", now=50)
    beat("b", b2.member_epoch, owned=b2.assignment, now=900)
    assert [m.member_id for m, _why in g.expired(50 + 1000)] == ["a2"]
