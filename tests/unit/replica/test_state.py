"""The replication core (broker/replica/state.py) driven directly: no log, no clock, no lock."""

from __future__ import annotations

from broker.replica.state import (
    PartitionState,
    diverging,
    out_of_range_truncation,
    truncation_target,
)
from client.errors import ErrorCode


def _lookup(entries: list[tuple[int, int]], end: int):
    """end_offset_for_epoch over (epoch, start offset) entries and a log end."""

    def lookup(epoch: int) -> tuple[int, int]:
        found = -1
        for e, start in entries:
            if e > epoch:
                return (found, start) if found >= 0 else (-1, -1)
            found = e
        return (found, end) if found >= 0 else (-1, -1)

    return lookup


def _leader(isr=(1, 2, 3), now=1000) -> PartitionState:
    """Leader of epoch 5 from offset 0; the tests then pass a log end and durable end of 10."""
    st = PartitionState(1)
    st.become_leader(now, 5, 9, (1, 2, 3), isr, 0, log_end=0, durable_end=0)
    return st


def test_hw_is_the_minimum_over_the_maximal_isr_and_never_goes_back():
    st = _leader()
    assert st.high_watermark == 0
    assert st.on_follower_fetch(2, 8, 1001, leader_end=10, durable_end=10) is False  # 3 unknown
    assert st.on_follower_fetch(3, 6, 1001, leader_end=10, durable_end=10) is True
    assert st.high_watermark == 6
    assert st.on_follower_fetch(3, 4, 1002, leader_end=10, durable_end=10) is False
    assert st.high_watermark == 6, "a lower fetch offset does not move the HW back"
    assert st.advance_high_watermark(durable_end=5) is False and st.high_watermark == 6


def test_a_pending_expansion_holds_the_hw_until_refused_and_an_unsettled_one_keeps_holding():
    st = _leader(isr=(1, 2))
    st.on_follower_fetch(3, 4, 1001, leader_end=10, durable_end=10)
    st.on_follower_fetch(2, 4, 1001, leader_end=10, durable_end=10)
    assert st.isr_to_expand(3, 1002) == (1, 2, 3)
    st.on_follower_fetch(2, 10, 1003, leader_end=10, durable_end=10)
    assert st.high_watermark == 4, "the proposed member counts (maximal ISR)"
    st.isr_change_unsettled(1004)
    st.on_follower_fetch(2, 10, 1005, leader_end=10, durable_end=10)
    assert st.high_watermark == 4, "fate unknown: it may be in the ISR already"
    assert st.isr_change_failed(1006, durable_end=10) is True and st.high_watermark == 10


def test_a_committed_isr_change_settles_the_proposal_and_a_new_term_resets_followers():
    st = _leader(isr=(1, 2))
    st.on_follower_fetch(3, 0, 1001, leader_end=10, durable_end=10)
    assert st.isr_to_expand(3, 1001) is not None
    change = st.become_leader(1002, 5, 10, (1, 2, 3), (1, 2, 3), 0, 10, 10)
    assert not change.new_term and st.pending_isr is None and st.followers[3].log_end_offset == 0
    assert st.leader_epoch_start_offset == 0
    change = st.become_leader(1003, 6, 11, (1, 2, 3), (1, 2, 3), 0, 12, 12)
    assert change.new_term and st.followers[3].log_end_offset == -1
    assert st.leader_epoch_start_offset == 12


def test_shrink_drops_followers_not_caught_up_for_the_lag_time():
    st = _leader(now=0)
    st.on_follower_fetch(2, 10, 100, leader_end=10, durable_end=10)  # 3 never fetches
    assert st.isr_to_shrink(now_ms=150, lag_ms=150) is None
    assert st.isr_to_shrink(now_ms=151, lag_ms=150) == (1, 2)
    assert st.pending_isr == ((1, 2), 151)


def test_produce_outcome():
    st = _leader(isr=(1,))
    assert st.advance_high_watermark(durable_end=10) is True
    one, two = (lambda: 1), (lambda: 2)
    assert st.produce_outcome(5, 10, -1, 10, False, one) == 0
    assert st.produce_outcome(5, 11, -1, 10, False, one) is None
    assert st.produce_outcome(5, 10, -1, 10, False, two) == int(
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    )
    assert st.produce_outcome(4, 10, -1, 10, False, one) == int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert st.produce_outcome(5, 10, -1, 10, True, one) == int(ErrorCode.KAFKA_STORAGE_ERROR)
    assert st.produce_outcome(5, 12, 1, 12, False, one) == 0, "acks=1: the leader's durable end"

    def never() -> int:
        raise AssertionError("min.insync.replicas looked up before the HW reached the produce")

    assert st.produce_outcome(5, 11, -1, 10, False, never) is None


def test_divergence_and_truncation_points():
    leader = _lookup([(1, 0), (3, 5)], end=9)  # epoch 1 at 0..4, epoch 3 at 5..8
    assert diverging(7, 3, leader, 0) is None
    assert diverging(7, 2, leader, 0) == (1, 5), "epoch 2 unknown here: epoch 1 ends at 5"
    assert diverging(6, 1, leader, 0) == (1, 5), "epoch 1 ends at 5, below its fetch offset"
    assert diverging(3, 0, leader, 0) == (-1, 0), "older than any epoch here"
    follower = _lookup([(1, 0), (2, 4)], end=8)  # epoch 1 at 0..3, epoch 2 at 4..7
    assert truncation_target(1, 5, follower, 0, 8) == 4, "the smaller of the two epoch ends"
    assert truncation_target(-1, 6, follower, 0, 8) == 6
    assert truncation_target(-1, -1, follower, 2, 8) == 2
    assert out_of_range_truncation(3, 5, 20) == ("restart", 5)
    assert out_of_range_truncation(30, 5, 20) == ("truncate", 20)
    assert out_of_range_truncation(10, 5, 20) is None


def test_follower_hw_is_capped_by_its_log_end():
    st = PartitionState(2)
    assert st.become_follower(1, 5, 9, (1, 2), (1, 2)) is True
    assert st.on_fetch_response(leader_hw=20, log_end=12) == 12
    assert st.become_follower(1, 5, 9, (1, 2), (1, 2)) is False
