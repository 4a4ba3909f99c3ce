"""Membership changes of the pure Raft core: one server at a time, learners catching up before
promotion, demotion (the leader's own included), memberships in snapshots and storage."""

from __future__ import annotations

import random

import pytest
from raft_harness import Cluster, MemStore

from controller.raft.core import RaftNode
from controller.raft.errors import NotLeader
from controller.raft.membership import Membership, MembershipError, check_single_change
from controller.raft.messages import EntryKind, Snapshot
from controller.raft.state import Role
from controller.raft.storage import RaftStorage


def add_node(c: Cluster, i: int) -> RaftNode:
    """A node outside the bootstrap membership (a new controller): it starts as an observer."""
    c.stores[i] = MemStore()
    c.applied[i] = []
    c.installed[i] = []
    c.nodes[i] = c._make(i)
    return c.nodes[i]


def drive(c: Cluster, step, ticks: int = 200) -> None:  # type: ignore[no-untyped-def]
    """Call `step()` (a membership call on the leader) each round until it returns True."""
    for _ in range(ticks):
        if step():
            return
        c.run(1)
    raise AssertionError("membership change did not complete")


def test_membership_encoding_round_trips_and_refuses_garbage() -> None:
    m = Membership({1: "h:1", 2: "h:2"}, {3: "h:3"})
    assert Membership.decode(m.encode()) == m
    assert m.encode() == Membership({2: "h:2", 1: "h:1"}, {3: "h:3"}).encode()
    with pytest.raises(ValueError, match="malformed membership"):
        Membership.decode(b"\xff{")
    with pytest.raises(ValueError, match="malformed membership"):
        Membership.decode(b'{"voters": {"1": 5}}')
    with pytest.raises(MembershipError, match="both voter and learner"):
        Membership({1: ""}, {1: ""})


def test_single_change_rule() -> None:
    old = Membership.of([1, 2, 3])
    check_single_change(old, old.add_learner(4, "h:4"))
    check_single_change(old.add_learner(4, "h:4"), old.add_learner(4, "h:4").promote(4))
    check_single_change(old, old.demote(2))
    with pytest.raises(MembershipError, match="change 2 servers at once"):
        check_single_change(old, Membership.of([1, 2, 3, 4, 5]))
    with pytest.raises(MembershipError, match="change 2 servers at once"):
        check_single_change(old, Membership.of([2, 3, 4]))
    with pytest.raises(MembershipError, match="only voter"):
        Membership.of([1]).demote(1)
    with pytest.raises(MembershipError, match="already a member"):
        old.add_learner(2, "x")


def test_add_voter_joins_as_learner_catches_up_then_is_promoted() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    c.propose(1, *[b"r%d" % i for i in range(20)])
    c.stabilize()
    new = add_node(c, 4)
    assert new.role is Role.OBSERVER and not new.is_voter
    leader = c.nodes[1]
    assert leader.add_voter(4, "127.0.0.1:9196") is False
    assert 4 in leader.config.learners and 4 not in leader.voters  # step 1: a learner
    drive(c, lambda: leader.add_voter(4, "127.0.0.1:9196"))
    assert leader.voters == {1, 2, 3, 4}
    assert leader.config.voters[4] == "127.0.0.1:9196"
    for i in (1, 2, 3, 4):
        assert c.nodes[i].voters == {1, 2, 3, 4}, i
    assert new.role is Role.FOLLOWER and new.is_voter
    assert c.applied[4] == c.applied[1]
    # four voters: a commit now needs three of them
    c.isolate(2)
    c.isolate(3)
    idx = c.propose(1, b"needs-three")
    c.run(3)
    assert leader.commit_index < idx
    c.heal()
    c.run(3)
    assert leader.commit_index >= idx


def test_a_change_waits_for_the_previous_one_and_for_a_commit_in_the_leaders_term() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    c.stabilize()
    add_node(c, 4)
    add_node(c, 5)
    leader = c.nodes[1]
    c.isolate(2)
    c.isolate(3)  # nothing can commit
    leader.add_voter(4, "h:4")
    c.process(1)
    assert 4 in leader.config.learners
    assert "not committed yet" in (leader.membership_blocked() or "")
    before = leader.config
    assert leader.add_voter(5, "h:5") is False
    assert leader.config == before  # no second uncommitted change
    c.heal()
    c.run(3)
    assert leader.membership_blocked() is None
    drive(c, lambda: leader.add_voter(5, "h:5"))
    assert leader.config.learner_ids == {4} and 5 in leader.voters


def test_new_leader_must_commit_in_its_term_before_a_change() -> None:
    c = Cluster([1, 2, 3])
    add_node(c, 4)
    c.campaign(1)
    while c.nodes[1].role is not Role.LEADER:
        c.deliver_one()
    c.drop_queued()  # its NOOP is appended, not committed
    leader = c.nodes[1]
    assert "not committed an entry of term 1" in (leader.membership_blocked() or "")
    assert leader.add_voter(4, "h:4") is False
    assert leader.config == Membership.of([1, 2, 3])
    c.run(3)
    assert leader.membership_blocked() is None
    drive(c, lambda: leader.add_voter(4, "h:4"))


def test_remove_voter_demotes_to_learner_and_the_rest_commit() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    c.stabilize()
    leader = c.nodes[1]
    drive(c, lambda: leader.remove_voter(3))
    assert leader.voters == {1, 2} and 3 in leader.config.learners
    assert c.nodes[3].role is Role.OBSERVER and not c.nodes[3].is_voter
    # the learner still receives the log; the two voters commit without it
    c.isolate(3)
    idx = c.propose(1, b"two-voters")
    c.run(2)
    assert leader.commit_index >= idx
    c.heal()
    c.run(2)
    assert c.applied[3][-1] == b"two-voters"
    # and removing the learner stops its replication
    drive(c, lambda: leader.remove_learner(3))
    assert 3 not in leader.progress
    with pytest.raises(MembershipError, match="is a voter"):
        leader.remove_learner(2)


def test_leader_removing_itself_steps_down_after_the_commit() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    c.stabilize()
    leader = c.nodes[1]
    assert leader.remove_voter(1) is False
    assert leader.voters == {2, 3} and leader.role is Role.LEADER  # leads until it commits
    c.run(3)
    assert leader.role is Role.OBSERVER and leader.commit_index >= leader.conf_index
    for _ in range(100):
        c.run(1)
        new = c.leader()
        if new is not None and new.id in (2, 3):
            break
    new = c.leader()
    assert new is not None and new.id in (2, 3) and new.voters == {2, 3}
    idx = c.propose(new.id, b"after")
    c.run(3)
    assert new.commit_index >= idx
    assert c.applied[1][-1] == b"after"  # the old leader follows as a learner
    with pytest.raises(NotLeader):
        leader.add_voter(1, "x")


def test_a_truncated_membership_entry_takes_the_previous_membership_back() -> None:
    c = Cluster([1, 2, 3, 4, 5])
    c.elect(1)
    c.stabilize()
    add_node(c, 6)
    leader = c.nodes[1]
    c.isolate(1)
    c.cut -= {(1, 3)}  # the change reaches 3 only, and does not commit
    leader.add_voter(6, "h:6")
    c.process(1)
    c.stabilize()
    assert 6 in c.nodes[3].config.learners
    c.heal()
    c.isolate(1)
    c.isolate(3)
    c.cut -= {(2, 4), (4, 2), (2, 5), (5, 2), (4, 5), (5, 4)}
    c.run(60)  # 2, 4, 5 (they never saw the change) elect one of them
    new = c.leader()
    assert new is not None and new.id in (2, 4, 5), new
    c.propose(new.id, b"x")
    c.stabilize()
    c.heal()
    c.isolate(1)
    c.run(3)
    assert c.nodes[3].leader_id == new.id
    assert c.nodes[3].config == Membership.of([1, 2, 3, 4, 5])  # the entry was truncated
    assert c.nodes[3].conf_index == 0


def test_snapshot_carries_the_membership_to_a_new_node_and_through_storage(tmp_path) -> None:  # type: ignore[no-untyped-def]
    c = Cluster([1, 2, 3])
    c.elect(1)
    c.stabilize()
    leader = c.nodes[1]
    drive(c, lambda: leader.remove_voter(3))
    c.propose(1, b"a", b"b")
    c.stabilize()
    leader.compact(leader.applied_index, b"state")
    c.process(1)
    assert Membership.decode(leader.snapshot.config).voter_ids == {1, 2}
    assert not [e for e in leader.log.entries if e.kind is EntryKind.CONFIG]
    new = add_node(c, 5)
    drive(c, lambda: leader.add_voter(5, "h:5"))
    assert c.installed[5] and new.voters == {1, 2, 5}
    # storage keeps the membership with the snapshot
    st = RaftStorage(tmp_path)
    st.load()
    snap = Snapshot(7, 2, b"data", Membership.of([1, 2], {1: "a:1", 2: "b:2"}).encode())
    from controller.raft.state import Ready

    st.persist(Ready(None, None, snap, None, [], [], []))
    st.close()
    again = RaftStorage(tmp_path).load()
    assert again.snapshot == snap
    node = RaftNode(2, [1, 2, 3], storage_state=again, rng=random.Random(1))
    assert node.voters == {1, 2}


def test_a_snapshot_file_of_the_older_format_still_loads(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import struct

    from client.records.crc import crc32c

    data = b"image"
    header = struct.pack(">4sQQIQ", b"GRSN", 9, 3, crc32c(data), len(data))
    (tmp_path / f"snapshot-{9:020d}.snap").write_bytes(header + data)
    st = RaftStorage(tmp_path).load()
    assert st.snapshot == Snapshot(9, 3, data, b"")
    (tmp_path / f"snapshot-{9:020d}.snap").write_bytes(header + data + b"junk")
    from client.errors import StorageError

    with pytest.raises(StorageError, match="corrupt"):
        RaftStorage(tmp_path).load()
