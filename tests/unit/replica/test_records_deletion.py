"""DeleteRecords on real Logs, purgatories and flushers (no network): the leader moves its log
start offset at once and answers when every ISR member reported a log start at least as high
(Kafka's DelayedDeleteRecords); errors per partition; a follower moves its log start up to
the leader's from a Fetch answer, never past its own end."""

from __future__ import annotations

import dataclasses
import threading

import pytest
from helpers import wait_until
from test_replica_manager import TID, Harness

from broker.replica import FetchParams, FetchPartitionSpec
from broker.replica.follower import apply_fetched
from broker.replica.partition import _now_ms
from client.errors import ErrorCode
from client.records import build_batch
from controller.metadata.records import Partition as PartitionRecord
from controller.metadata.records import PartitionChange, Topic

MiB = 1 << 20


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    harness.replay(
        Topic("t", TID),
        PartitionRecord(TID, 0, (1, 2, 3), (1, 2, 3), 1, 0, 0),  # led here, 2 followers
        PartitionRecord(TID, 1, (1,), (1,), 1, 0, 0),  # led here alone
        PartitionRecord(TID, 2, (2, 1), (2, 1), 2, 0, 0),  # followed here
    )
    yield harness
    harness.close()


def _fill(h, partition: int, n: int, followers: tuple[int, ...] = ()) -> None:
    """Append n records as leader and bring the HW to n (the followers fetch up to it)."""
    part = h.rm.get_partition("t", partition)
    part.log.append_as_leader(build_batch([(None, b"x")] * n), part.leader_epoch)
    h.lm.request_flush_many([part.log])
    wait_until(lambda: part.log.flushed_offset >= n, 5, "the leader's fsync")
    for r in followers:
        _follower_fetch(h, r, n, part.log.log_start_offset, partition)
    wait_until(lambda: part.high_watermark == n, 5, "the high watermark")


def _follower_fetch(h, replica: int, offset: int, log_start: int, partition: int = 0) -> dict:
    spec = FetchPartitionSpec("t", partition, offset, MiB, -1, -1, log_start)
    out = h.rm.fetch_records(FetchParams(replica, 0, 1, MiB), [spec], lambda _: None)
    assert out is not None
    return out[0]


def _delete(h, offsets: dict, timeout_ms: int = 5000):
    done = threading.Event()
    box: dict = {}

    def cb(statuses):
        box.update(statuses)
        done.set()

    res = h.rm.records_deletion.delete_records(timeout_ms, offsets, cb)
    if res is not None:
        box.update(res)
        done.set()
    return done, box


def test_a_lone_leader_answers_at_once_with_its_new_log_start(h):
    _fill(h, 1, 10)
    done, box = _delete(h, {("t", 1): 4})
    assert done.is_set()
    assert box[("t", 1)].error_code == 0 and box[("t", 1)].low_watermark == 4
    log = h.rm.get_partition("t", 1).log
    assert log.log_start_offset == 4
    earliest = h.rm.offsets.list_offsets(-1, [("t", 1, -2, -1)])[0]
    assert earliest["offset"] == 4
    # a consumer below the new start is out of range
    spec = FetchPartitionSpec("t", 1, 0, MiB)
    out = h.rm.fetch_records(FetchParams(-1, 0, 1, MiB), [spec], lambda _: None)
    assert out[0]["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
    # an offset below the current start changes nothing and answers the start
    done, box = _delete(h, {("t", 1): 2})
    assert box[("t", 1)].error_code == 0 and box[("t", 1)].low_watermark == 4


def test_minus_one_means_the_high_watermark(h):
    _fill(h, 1, 7)
    done, box = _delete(h, {("t", 1): -1})
    assert done.is_set() and box[("t", 1)].low_watermark == 7
    assert h.rm.get_partition("t", 1).log.log_start_offset == 7


def test_the_answer_waits_for_every_isr_member_to_report_its_log_start(h):
    _fill(h, 0, 10, followers=(2, 3))
    done, box = _delete(h, {("t", 0): 6})
    part = h.rm.get_partition("t", 0)
    assert part.log.log_start_offset == 6  # the leader moved at once
    assert not done.is_set()  # parked: followers 2 and 3 still start at 0
    answer = _follower_fetch(h, 2, 10, 0)
    assert answer["log_start_offset"] == 6  # what the follower applies
    _follower_fetch(h, 2, 10, 6)
    assert part.low_watermark() == 0 and not done.is_set()  # follower 3 still at 0
    _follower_fetch(h, 3, 10, 6)
    assert done.wait(5)
    assert box[("t", 0)].error_code == 0 and box[("t", 0)].low_watermark == 6


def test_a_follower_out_of_the_isr_does_not_hold_the_answer(h):
    _fill(h, 0, 10, followers=(2, 3))
    h.replay(PartitionChange(TID, 0, isr=(1, 2)))
    done, box = _delete(h, {("t", 0): 5})
    assert not done.is_set()
    _follower_fetch(h, 2, 10, 5)
    assert done.wait(5) and box[("t", 0)].error_code == 0


def test_an_isr_shrink_completes_a_waiting_delete(h):
    _fill(h, 0, 10, followers=(2, 3))
    done, box = _delete(h, {("t", 0): 5})
    _follower_fetch(h, 2, 10, 5)
    assert not done.is_set()
    h.replay(PartitionChange(TID, 0, isr=(1, 2)))  # 3 dropped from the ISR
    assert done.wait(5) and box[("t", 0)].low_watermark == 5


def test_timeout_answers_request_timed_out_and_the_move_stays(h):
    _fill(h, 0, 10, followers=(2, 3))
    done, box = _delete(h, {("t", 0): 5}, timeout_ms=50)
    assert done.wait(5)
    assert box[("t", 0)].error_code == ErrorCode.REQUEST_TIMED_OUT
    assert "in time" in box[("t", 0)].error_message
    assert h.rm.get_partition("t", 0).log.log_start_offset == 5


def test_a_leader_change_fails_the_waiting_delete(h):
    _fill(h, 0, 10, followers=(2, 3))
    done, box = _delete(h, {("t", 0): 5})
    h.replay(PartitionChange(TID, 0, leader=2))
    assert done.wait(5)
    assert box[("t", 0)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_errors_per_partition(h):
    _fill(h, 1, 5)
    done, box = _delete(h, {("t", 1): 6, ("t", 2): 0, ("t", 9): 0, ("nope", 0): 0})
    assert done.is_set()
    assert box[("t", 1)].error_code == ErrorCode.OFFSET_OUT_OF_RANGE  # above the HW (5)
    assert "high watermark 5" in box[("t", 1)].error_message
    assert box[("t", 2)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert box[("t", 9)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert box[("nope", 0)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert h.rm.get_partition("t", 1).log.log_start_offset == 0
    _, box = _delete(h, {("t", 1): -2})
    assert box[("t", 1)].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_compacted_only_topics_refuse_with_policy_violation(h):
    _fill(h, 1, 5)
    log = h.rm.get_partition("t", 1).log
    log.config = dataclasses.replace(log.config, cleanup_policy=("compact",))
    _, box = _delete(h, {("t", 1): 2})
    assert box[("t", 1)].error_code == ErrorCode.POLICY_VIOLATION
    assert log.log_start_offset == 0
    log.config = dataclasses.replace(log.config, cleanup_policy=("compact", "delete"))
    _, box = _delete(h, {("t", 1): 2})
    assert box[("t", 1)].error_code == 0 and log.log_start_offset == 2


def test_a_follower_follows_the_leaders_log_start_up_to_its_own_end(h):
    part = h.rm.get_partition("t", 2)  # node 1 follows broker 2 here
    part.log.append_as_follower(build_batch([(None, b"x")] * 8, base_offset=0))
    entry = {"records": b"", "high_watermark": 8, "log_start_offset": 3}
    apply_fetched(part, entry)
    assert part.log.log_start_offset == 3
    apply_fetched(part, {**entry, "log_start_offset": 2})  # never backwards
    assert part.log.log_start_offset == 3
    apply_fetched(part, {**entry, "log_start_offset": 50})  # ahead of what it holds
    assert part.log.log_start_offset == 8 == part.log.end_offset


def test_the_leader_keeps_each_followers_log_start_as_reported(h):
    part = h.rm.get_partition("t", 0)

    def fetched(replica: int, log_start: int) -> bool:  # a fetch's arrival: did it move up?
        return part.follower_fetched(replica, 0, log_start, _now_ms(), False)[1]

    assert fetched(2, 5) is True  # moved up: may complete a delete
    assert fetched(2, 5) is False
    assert fetched(2, -1) is False  # not reported: kept
    assert part.followers[2].log_start_offset == 5
    assert fetched(2, 3) is False  # its log restarted lower
    assert part.followers[2].log_start_offset == 3
    assert fetched(9, 5) is False  # not a replica


def test_a_follower_long_polling_is_answered_when_the_log_start_moves(h):
    _fill(h, 0, 10, followers=(2, 3))
    got: list = []
    woke = threading.Event()
    spec = FetchPartitionSpec("t", 0, 10, MiB, -1, -1, 0)  # at the leader's end: nothing new
    res = h.rm.fetch_records(
        FetchParams(2, 120_000, 1, MiB), [spec], lambda r: (got.extend(r), woke.set())
    )
    assert res is None  # parked for up to two minutes
    _delete(h, {("t", 0): 4})
    assert woke.wait(60)  # answered by the move, not by max_wait_ms
    assert got[0]["log_start_offset"] == 4 and got[0]["records"] == b""
