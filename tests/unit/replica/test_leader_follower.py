"""Replication rules on real Logs, purgatories and flushers (no network): Kafka's caught-up
rule, ISR shrink/expand proposals, the HW over the maximal ISR, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
and divergence (KIP-101/320): a follower truncates to the leader's end offset for its last
epoch, never to its HW alone."""

from __future__ import annotations

import threading

import pytest
from helpers import wait_until
from test_replica_manager import TID, Harness

from broker.replica import FetchParams, FetchPartitionSpec
from broker.replica.follower import apply_fetched, fetch_position
from broker.replica.partition import _now_ms
from client.errors import ErrorCode
from client.records import build_batch, decode_records
from controller.metadata.records import Partition as PartitionRecord
from controller.metadata.records import PartitionChange, Topic

MiB = 1 << 20


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    harness.replay(Topic("t", TID), PartitionRecord(TID, 0, (1, 2, 3), (1, 2, 3), 1, 0, 0))
    yield harness
    harness.close()


def _append_async(h, n: int, acks: int = -1):
    done = threading.Event()
    box: dict = {}

    def cb(statuses):
        box.update(statuses)
        done.set()

    res = h.rm.append_records(acks, 5000, {("t", 0): build_batch([(None, b"x")] * n)}, cb)
    if res is not None:
        box.update(res)
        done.set()
    return done, box


def _follower_fetch(h, replica: int, offset: int, last_epoch: int = -1) -> dict:
    spec = FetchPartitionSpec("t", 0, offset, MiB, -1, last_epoch)
    out = h.rm.fetch_records(FetchParams(replica, 0, 1, MiB), [spec], lambda _: None)
    assert out is not None  # max_wait_ms 0: answered at once
    return out[0]


def test_caught_up_as_of_the_previous_fetch(h):
    part = h.rm.get_partition("t", 0)
    st = part.followers[2]
    t0 = st.last_caught_up_ms  # the new leader gives ISR members the lag time from now
    part.log.append_as_leader(build_batch([(None, b"a")] * 3), 0)  # leader end 3
    part.follower_fetched(2, 0, -1, t0 + 1000, False)  # behind: not caught up now
    assert st.last_caught_up_ms == t0
    part.log.append_as_leader(build_batch([(None, b"b")] * 3), 0)  # leader end 6
    # fetches from 3: still behind the end (6) but at the end as of its previous fetch (3),
    # so caught up as of that fetch's time (Kafka's rule: steady load keeps it in the ISR)
    part.follower_fetched(2, 3, -1, t0 + 2000, False)
    assert st.last_caught_up_ms == t0 + 1000
    part.follower_fetched(2, 5, -1, t0 + 3000, False)  # behind the end as of its previous fetch
    assert st.last_caught_up_ms == t0 + 1000
    part.follower_fetched(2, 6, -1, t0 + 4000, False)  # at the end now
    assert st.last_caught_up_ms == t0 + 4000


def test_shrink_proposes_only_lagging_followers_once(h):
    part = h.rm.get_partition("t", 0)
    proposals = []
    h.rm.isr_proposer = lambda p, isr: proposals.append(isr)
    part.follower_fetched(2, 0, -1, _now_ms(), False)
    part.follower_fetched(3, 0, -1, _now_ms(), False)
    assert h.rm.shrink_isrs(60_000) == 0  # both fetched just now
    part.followers[3].last_caught_up_ms -= 120_000
    assert h.rm.shrink_isrs(60_000) == 1
    assert proposals == [(1, 2)]
    assert h.rm.shrink_isrs(60_000) == 0  # pending: not proposed again
    # committed: the metadata brings the new ISR and partition epoch; the pending one clears
    h.replay(PartitionChange(TID, 0, isr=(1, 2)))
    assert part.isr == (1, 2) and part.pending_isr is None


def test_a_refused_isr_change_is_proposed_again_only_after_a_back_off(h):
    from broker.replica.partition import ISR_RETRY_BACKOFF_MS

    part = h.rm.get_partition("t", 0)
    part.followers[3].last_caught_up_ms -= 120_000
    now = _now_ms()
    assert part.isr_to_shrink(60_000, now_ms=now) == (1, 2)
    part.isr_change_failed()  # e.g. the controller answered INVALID_REQUEST
    assert part.pending_isr is None  # the HW no longer counts the proposal
    assert part.isr_to_shrink(60_000, now_ms=now + 1) is None  # not at the next check
    later = now + ISR_RETRY_BACKOFF_MS + 1000
    assert part.isr_to_shrink(60_000, now_ms=later) == (1, 2)


def test_expand_when_the_follower_reaches_the_hw(h):
    h.replay(PartitionChange(TID, 0, isr=(1, 2)))
    part = h.rm.get_partition("t", 0)
    proposals = []
    h.rm.isr_proposer = lambda p, isr: proposals.append(isr)
    done, box = _append_async(h, 4)
    wait_until(lambda: part.log.flushed_offset >= 4, 5, "the leader's fsync")
    _follower_fetch(h, 2, 4)  # the ISR member: HW 4, the produce completes
    assert done.wait(5) and box[("t", 0)].error_code == 0
    _follower_fetch(h, 3, 0)  # out of the ISR and below the HW: nothing to propose
    assert proposals == []
    _follower_fetch(h, 3, 4)  # reached the HW: back into the ISR
    assert proposals == [(1, 2, 3)]
    # until committed, the HW counts the pending member too (maximal ISR)
    done2, _ = _append_async(h, 1)
    wait_until(lambda: part.log.flushed_offset >= 5, 5, "the leader's fsync")
    _follower_fetch(h, 2, 5)
    assert part.high_watermark == 4 and not done2.wait(0.05)
    _follower_fetch(h, 3, 5)
    assert part.high_watermark == 5 and done2.wait(5)


def test_isr_shrunk_after_the_append_answers_not_enough_replicas_after_append(h):
    h.rm._min_insync_for = lambda topic: 2
    done, box = _append_async(h, 2)
    assert not done.wait(0.1)  # the followers have not fetched
    h.replay(PartitionChange(TID, 0, isr=(1,)))  # both followers dropped from the ISR
    assert done.wait(5)
    assert box[("t", 0)].error_code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    # and a new acks=all produce is refused before appending
    done, box = _append_async(h, 1)
    assert done.wait(5) and box[("t", 0)].error_code == ErrorCode.NOT_ENOUGH_REPLICAS


@pytest.fixture
def pair(tmp_path):
    """Broker 1 leads t-0 at leader epoch 2; broker 2 follows it."""
    leader, follower = Harness(tmp_path / "b1"), Harness(tmp_path / "b2")
    follower.rm.table.node_id = 2
    recs = (Topic("t", TID), PartitionRecord(TID, 0, (1, 2), (1, 2), 1, 2, 0))
    leader.replay(*recs)
    follower.replay(*recs)
    yield leader, follower
    leader.close()
    follower.close()


def _values(log) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for r in decode_records(log.read(0, 1 << 24).data)]


def _replicate(leader, follower, rounds: int = 5) -> int:
    """Fetch rounds as the replica fetcher does them; returns how many truncated."""
    fpart = follower.rm.get_partition("t", 0)
    truncations = 0
    for _ in range(rounds):
        offset, epoch = fetch_position(fpart)
        entry = _follower_fetch(leader, 2, offset, epoch)
        assert entry["error_code"] == 0
        if entry.get("diverging_end_offset", -1) >= 0:
            truncations += 1
        apply_fetched(fpart, entry)
        fpart.log.flush()
    return truncations


def test_old_leader_truncates_its_unreplicated_writes(pair):
    """KIP-101/320: the follower (an old leader of epoch 1) holds records 5..9 that no one
    else has; the leader (epoch 2) wrote other records there. The follower truncates to the
    leader's end of epoch 0 (5) and copies the leader's records."""
    leader, follower = pair
    llog = leader.lm.get("t", 0)
    flog = follower.lm.get("t", 0)
    common = build_batch([(None, b"c%d" % i) for i in range(5)])
    llog.append_as_leader(common, 0)
    flog.append_as_leader(common, 0)
    flog.append_as_leader(build_batch([(None, b"lost%d" % i) for i in range(5)]), 1)
    llog.append_as_leader(build_batch([(None, b"new%d" % i) for i in range(3)]), 2)
    llog.flush()
    assert _replicate(leader, follower) == 1
    assert _values(flog) == _values(llog)
    assert [v for _, v in _values(flog)][5:] == [b"new0", b"new1", b"new2"]
    assert flog.latest_epoch == 2


def test_follower_keeps_replicated_records_above_its_stale_hw(pair):
    """KIP-101's lost write: truncating to the HW alone would drop records the leader has (and
    may have acknowledged). With the epoch check the follower keeps them."""
    leader, follower = pair
    llog = leader.lm.get("t", 0)
    flog = follower.lm.get("t", 0)
    batch = build_batch([(None, b"v%d" % i) for i in range(10)])
    llog.append_as_leader(batch, 0)
    flog.append_as_leader(build_batch([(None, b"v%d" % i) for i in range(10)]), 0)
    llog.flush()
    fpart = follower.rm.get_partition("t", 0)
    fpart.high_watermark = 5  # its HW lags its log end, as after a restart
    assert _replicate(leader, follower, rounds=2) == 0
    assert flog.end_offset == 10
    assert _values(flog) == _values(llog)


def test_leader_without_the_followers_epoch_sends_it_back_to_its_start(pair):
    leader, follower = pair
    flog = follower.lm.get("t", 0)
    flog.append_as_leader(build_batch([(None, b"orphan")] * 3), 1)
    entry = _follower_fetch(leader, 2, 3, 1)
    assert (entry["diverging_epoch"], entry["diverging_end_offset"]) == (-1, 0)
    apply_fetched(follower.rm.get_partition("t", 0), entry)
    assert flog.end_offset == 0


def test_offsets_for_leader_epoch(pair):
    """OffsetForLeaderEpoch (KIP-101/279) on the leader: the largest epoch <= the one asked and
    its end offset (the next epoch's start, or the log end); epoch fencing; leaders only."""
    leader, follower = pair
    llog = leader.lm.get("t", 0)
    llog.append_as_leader(build_batch([(None, b"a")] * 5), 0)
    llog.append_as_leader(build_batch([(None, b"b")] * 3), 2)
    ask = [("t", 0, -1, 0), ("t", 0, -1, 1), ("t", 0, -1, 2), ("t", 0, -1, 7)]
    got = leader.rm.offsets.offsets_for_leader_epoch(ask)
    assert [(r["error_code"], r["leader_epoch"], r["end_offset"]) for r in got] == [
        (0, 0, 5),
        (0, 0, 5),
        (0, 2, 8),
        (0, 2, 8),
    ]
    got = leader.rm.offsets.offsets_for_leader_epoch(
        [("t", 0, 3, 0), ("t", 0, 1, 0), ("t", 9, -1, 0)]
    )
    assert [r["error_code"] for r in got] == [
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]
    (r,) = follower.rm.offsets.offsets_for_leader_epoch([("t", 0, -1, 0)])
    assert r["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_describe_producers_on_the_leader_only(pair):
    """DescribeProducers: the leader's producer state; NOT_LEADER_OR_FOLLOWER on a follower,
    UNKNOWN_TOPIC_OR_PARTITION for a partition this broker has no replica of."""
    leader, follower = pair
    batch = build_batch([(None, b"a", None, 77)], producer_id=5, producer_epoch=2, base_sequence=0)
    leader.lm.get("t", 0).append_as_leader(batch, 0)
    (r,) = leader.rm.offsets.describe_producers([("t", 0)])
    assert r["error_code"] == 0
    assert r["active_producers"] == [
        {"producer_id": 5, "producer_epoch": 2, "last_sequence": 0, "last_timestamp": 77,
         "coordinator_epoch": -1, "current_txn_start_offset": -1}
    ]  # fmt: skip
    (r,) = follower.rm.offsets.describe_producers([("t", 0)])
    assert (r["error_code"], r["active_producers"]) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, [])
    (r,) = leader.rm.offsets.describe_producers([("t", 9)])
    assert r["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_refused_expansion_releases_the_high_watermark_it_held(h):
    """Issue 22's 120 s stall: a broker in controlled shutdown, already out of the ISR, fetched
    once more; the leader proposed it back (the maximal ISR then holds the HW at its offset) and
    the controller refused. The refusal must recompute the HW and complete the waiting produce:
    the other follower was idle in its session, so nothing else would have moved it, and the
    produce (and each retry of it) timed out until delivery.timeout.ms."""
    from test_isr_proposer import FakeChannel

    from broker.replica.isr import IsrProposer

    h.replay(PartitionChange(TID, 0, isr=(1, 2)))
    part = h.rm.get_partition("t", 0)
    ch = FakeChannel()
    proposer = IsrProposer(ch, 1, lambda: 1, h.rm.high_watermark_moved)  # type: ignore[arg-type]
    h.rm.isr_proposer = proposer.propose
    _follower_fetch(h, 3, 0)  # the departing broker, at the HW: proposed back into the ISR
    assert len(ch.calls) == 1 and part.pending_isr is not None
    done, box = _append_async(h, 2)
    wait_until(lambda: part.log.flushed_offset >= 2, 5, "the leader's fsync")
    _follower_fetch(h, 2, 2)  # the ISR member has it all; the pending member holds the HW
    assert part.high_watermark == 0 and not done.is_set()
    topics = ch.calls[0][2]
    ch.calls[0][3].set_result(
        {
            "error_code": 0,
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition": 0, "error_code": int(ErrorCode.INELIGIBLE_REPLICA)}
                    ],
                }
            ],
        }
    )
    assert topics[0]["partitions"][0]["new_isr"] == [1, 2, 3]
    assert part.pending_isr is None and part.high_watermark == 2
    assert done.wait(5), "the refusal completed nothing: the produce waits for its timeout"
    assert box[("t", 0)].error_code == 0


def test_a_follower_moving_the_high_watermark_answers_a_waiting_consumer(h):
    """A consumer long-polling at the HW gets the records as soon as the followers' fetches
    move the HW past them, not at its fetch.max.wait.ms (issue 28's 500 ms cliff)."""
    part = h.rm.get_partition("t", 0)
    answered = threading.Event()
    got: list = []

    def on_answer(out):
        got.extend(out)
        answered.set()

    spec = FetchPartitionSpec("t", 0, 0, MiB, -1, -1)
    # 60 s of long poll: answered only by a wake-up within the 10 s this test waits
    assert h.rm.fetch_records(FetchParams(-1, 60_000, 1, MiB), [spec], on_answer) is None
    done, _ = _append_async(h, 3)
    wait_until(lambda: part.log.flushed_offset >= 3, 5, "the leader's fsync")
    assert not answered.is_set()  # appended, but above the HW: nothing to read yet
    _follower_fetch(h, 2, 3)
    _follower_fetch(h, 3, 3)  # the HW moves to 3
    assert part.high_watermark == 3 and done.wait(5)
    assert answered.wait(10), "the parked consumer fetch missed the HW's move"
    assert got[0].get("records"), got
