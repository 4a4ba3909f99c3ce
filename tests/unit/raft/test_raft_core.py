"""Unit tests of the pure Raft core through the synchronous test cluster (raft_harness)."""

from __future__ import annotations

import random

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from raft_harness import Cluster

from controller.raft.core import RaftNode
from controller.raft.errors import LogCompacted, NotLeader, ProposalDropped
from controller.raft.messages import (
    MESSAGE_TYPES,
    AppendEntries,
    AppendResponse,
    Entry,
    EntryKind,
    Heartbeat,
    InstallSnapshot,
    Snapshot,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
    message_from_dict,
)
from controller.raft.state import Role


def test_single_voter_commits_alone() -> None:
    c = Cluster([1])
    c.elect(1)
    idx = c.propose(1, b"x", b"y")
    assert idx == 3  # 1 is the leader's NOOP
    assert c.nodes[1].commit_index == 3
    assert c.applied[1] == [b"x", b"y"]


def test_three_voters_elect_replicate_and_observer_follows() -> None:
    c = Cluster([1, 2, 3], [4])
    c.elect(1)
    assert [c.nodes[i].leader_id for i in (2, 3, 4)] == [1, 1, 1]
    assert c.nodes[4].role is Role.OBSERVER
    c.propose(1, *[f"r{i}".encode() for i in range(50)])
    c.stabilize()
    for i in (1, 2, 3, 4):
        assert c.applied[i] == [f"r{i}".encode() for i in range(50)]
        assert c.nodes[i].commit_index == 51
    q = c.nodes[1].describe_quorum()
    assert q.leader_id == 1 and q.high_watermark == 51
    assert [(r.node_id, r.match_index) for r in q.voters] == [(1, 51), (2, 51), (3, 51)]
    assert [(r.node_id, r.match_index) for r in q.observers] == [(4, 51)]


def test_follower_refuses_proposals_with_leader_hint() -> None:
    c = Cluster([1, 2, 3])
    c.elect(2)
    with pytest.raises(NotLeader) as info:
        c.nodes[1].propose([b"x"])
    assert info.value.leader_id == 2


def test_observer_never_campaigns() -> None:
    c = Cluster([1, 2, 3], [4])
    c.tick(4, 100)
    assert c.nodes[4].role is Role.OBSERVER and not c.queue


def test_pipelining_is_bounded_by_max_inflight() -> None:
    c = Cluster([1, 2, 3], max_entries_per_msg=2, max_inflight=3)
    c.elect(1)
    c.nodes[1].propose([b"e"] * 20)
    c.process(1)
    to_2 = [m for m in c.queue if isinstance(m, AppendEntries) and m.to == 2]
    assert len(to_2) == 3 and all(len(m.entries) <= 2 for m in to_2)
    c.stabilize()
    assert c.nodes[2].commit_index == 21


def test_follower_restart_keeps_its_log_and_catches_up() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    c.propose(1, b"a")
    c.stabilize()
    c.isolate(3)
    c.propose(1, b"b", b"c")
    c.stabilize()
    c.restart(3)
    assert c.nodes[3].last_index == 2 and c.nodes[3].term == 1
    c.heal()
    c.run(3)
    assert c.applied[3] == [b"a", b"b", b"c"]


def test_compact_and_snapshot_install_for_lagging_follower() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    c.isolate(3)
    c.propose(1, *[f"r{i}".encode() for i in range(10)])
    c.stabilize()
    c.nodes[1].compact(8, b"state-at-8")
    c.process(1)
    assert c.stores[1].snapshot.index == 8 and c.stores[1].entries[0].index == 9
    with pytest.raises(LogCompacted):
        c.nodes[1].committed_entries_from(5, 10)
    assert [e.index for e in c.nodes[1].committed_entries_from(9, 10)] == [9, 10, 11]
    c.heal()
    c.run(3)
    assert c.installed[3] == [Snapshot(8, 1, b"state-at-8")]
    assert c.applied[3] == [b"state-at-8", b"r7", b"r8", b"r9"]
    assert c.nodes[3].commit_index == 11


def test_compact_beyond_applied_is_refused() -> None:
    c = Cluster([1])
    c.elect(1)
    with pytest.raises(ValueError):
        c.nodes[1].compact(5, b"")


def test_leadership_transfer() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    c.propose(1, b"a")
    c.nodes[1].transfer_leadership(3)
    with pytest.raises(ProposalDropped):
        c.nodes[1].propose([b"refused during transfer"])
    c.process(1)
    c.stabilize()
    assert c.nodes[3].role is Role.LEADER and c.nodes[1].role is Role.FOLLOWER
    assert c.nodes[3].term == 2 and c.nodes[1].leader_id == 3


def test_transfer_to_lagging_node_catches_it_up_first() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    c.isolate(3)
    c.propose(1, b"a", b"b")
    c.stabilize()
    c.heal()
    c.nodes[1].transfer_leadership(3)
    c.process(1)
    c.stabilize()
    assert c.nodes[3].role is Role.LEADER
    assert c.applied[3][:2] == [b"a", b"b"]


def test_uncommitted_limit() -> None:
    c = Cluster([1, 2, 3], max_uncommitted_entries=5)
    c.elect(1)
    c.isolate(1)
    c.propose(1, b"1", b"2", b"3", b"4")
    with pytest.raises(ProposalDropped):
        c.nodes[1].propose([b"5", b"6"])


def test_calls_between_ready_and_advance_are_refused() -> None:
    c = Cluster([1])
    c.nodes[1].tick()
    rd = c.nodes[1].ready()
    with pytest.raises(RuntimeError):
        c.nodes[1].tick()
    c.nodes[1].advance(rd)
    with pytest.raises(RuntimeError):
        c.nodes[1].advance(rd)


def test_stale_leader_gets_told_the_new_term() -> None:
    node = RaftNode(2, [1, 2, 3], rng=random.Random(1))
    node.step(Heartbeat(2, 3, 5, commit=0))
    assert node.term == 5 and node.leader_id == 3
    node.advance(node.ready())
    node.step(AppendEntries(2, 1, 4, prev_index=0, prev_term=0, entries=(), commit=0))
    rd = node.ready()
    assert rd.messages == [AppendResponse(1, 2, 5, success=False)]


def test_vote_is_refused_inside_the_leader_lease() -> None:
    node = RaftNode(2, [1, 2, 3], rng=random.Random(1))
    node.step(Heartbeat(2, 1, 1, commit=0))
    node.advance(node.ready())
    node.step(VoteRequest(2, 3, 2, last_log_index=9, last_log_term=1))
    assert node.term == 1 and not node.has_ready()
    # ... unless the campaign is a leadership transfer
    node.step(VoteRequest(2, 3, 2, last_log_index=9, last_log_term=1, transfer=True))
    assert node.term == 2 and node.vote == 3


def test_messages_round_trip_through_dicts() -> None:
    e = (Entry(3, 2, b"d"), Entry(4, 2, b"", EntryKind.NOOP))
    msgs = [
        VoteRequest(1, 2, 3, last_log_index=4, last_log_term=2, pre_vote=True),
        VoteResponse(1, 2, 3, granted=True, pre_vote=True),
        AppendEntries(1, 2, 3, prev_index=2, prev_term=1, entries=e, commit=2),
        AppendResponse(1, 2, 3, success=False, rejected_index=4, hint_index=1),
        Heartbeat(1, 2, 3, commit=7),
        InstallSnapshot(1, 2, 3, snapshot=Snapshot(9, 2, b"snap")),
        TimeoutNow(1, 2, 3),
    ]
    for m in msgs:
        assert message_from_dict(m.to_dict()) == m
    with pytest.raises(ValueError):
        message_from_dict({"type": "nope", "to": 1, "from": 2, "term": 3})
    with pytest.raises(ValueError):
        message_from_dict({"type": "heartbeat", "to": 1})


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.binary(max_size=8),
    st.text(max_size=5),
)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(sorted(MESSAGE_TYPES)),
    st.dictionaries(
        st.sampled_from(
            ["to", "from", "term", "entries", "snapshot", "commit", "granted", "prev_index"]
        ),
        st.one_of(_scalars, st.lists(st.dictionaries(st.text(max_size=5), _scalars), max_size=2)),
    ),
)
def test_garbage_message_dicts_raise_value_error_only(kind: str, d: dict) -> None:
    d = {**d, "type": kind}
    try:
        m = message_from_dict(d)
    except ValueError:
        return
    assert message_from_dict(m.to_dict()) == m


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 2**40), st.integers(0, 2**40), st.binary(max_size=20)),
        max_size=4,
    ),
    st.integers(0, 2**40),
)
def test_append_entries_survive_msgpack(items: list, commit: int) -> None:
    entries = tuple(Entry(i, t, d) for i, t, d in items)
    m = AppendEntries(1, 2, 3, prev_index=4, prev_term=2, entries=entries, commit=commit)
    wire = msgpack.packb(m.to_dict(), use_bin_type=True)
    assert message_from_dict(msgpack.unpackb(wire, raw=False)) == m
