"""Follower fetches in incremental fetch sessions (KIP-227) on a real ReplicaManager (real
logs, purgatories, flushers): an idle incremental fetch names and answers no partition, a
parked one wakes for a partition it did not name, HW-only changes are reported, session
errors, and the ISR rules for followers that no longer name their partitions."""

from __future__ import annotations

import threading

import pytest
from helpers import wait_until
from test_replica_manager import TID, Harness

from broker.replica import FetchParams, FetchPartitionSpec
from client.errors import ErrorCode
from client.records import build_batch
from controller.metadata.records import Partition as PartitionRecord
from controller.metadata.records import Topic

MiB = 1 << 20


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    harness.replay(
        Topic("t", TID),
        *(PartitionRecord(TID, p, (1, 2, 3), (1, 2, 3), 1, 0, 0) for p in range(4)),
    )
    yield harness
    harness.close()


def _spec(p: int, offset: int, epoch: int = 0) -> FetchPartitionSpec:
    return FetchPartitionSpec("t", p, offset, MiB, epoch, -1)


def sfetch(h, replica, session_id, epoch, specs=(), forgotten=(), max_wait_ms=0):
    done = threading.Event()
    box: list = []

    def cb(res):
        box.append(res)
        done.set()

    params = FetchParams(replica, max_wait_ms, 1, 10 * MiB)
    res = h.rm.session_fetches.fetch_with_session(
        params, session_id, epoch, list(specs), list(forgotten), cb
    )
    if res is not None:
        return res
    assert done.wait(10), "the session fetch never completed"
    return box[0]


def _parts(res) -> dict[int, dict]:
    return {e["partition"]: e for e in res.results}


def _append(h, p: int, n: int) -> None:
    res = h.rm.append_records(1, 5000, {("t", p): build_batch([(None, b"x")] * n)}, lambda _: 0)
    assert res is None or res[("t", p)].error_code == 0


def test_full_then_idle_incremental_answers_nothing(h):
    full = sfetch(h, 2, 0, 0, [_spec(p, 0) for p in range(4)])
    assert full.error_code == 0 and full.session_id > 0
    assert sorted(_parts(full)) == [0, 1, 2, 3]  # a full answer names every partition
    for epoch in (1, 2, 3):
        inc = sfetch(h, 2, full.session_id, epoch)
        assert (inc.error_code, inc.session_id, inc.results) == (0, full.session_id, [])


def test_parked_incremental_fetch_wakes_for_a_partition_it_did_not_name(h):
    sid = sfetch(h, 2, 0, 0, [_spec(p, 0) for p in range(4)]).session_id
    assert sfetch(h, 2, sid, 1).results == []
    box: list = []
    t = threading.Thread(target=lambda: box.append(sfetch(h, 2, sid, 2, max_wait_ms=10_000)))
    t.start()
    wait_until(lambda: h.fetch.watched() > 0, 5, "the session fetch parked")
    _append(h, 2, 3)
    t.join(10)
    assert not t.is_alive() and box
    got = _parts(box[0])
    assert list(got) == [2] and got[2]["records"]


def test_a_parked_fetch_looks_again_only_at_the_partitions_that_changed(h):
    sid = sfetch(h, 2, 0, 0, [_spec(p, 0) for p in range(4)]).session_id
    checked: list[list[int]] = []
    real = h.rm.fetch_satisfied

    def spy(params, partitions):
        specs = list(partitions)
        checked.append([s.partition for s in specs])
        return real(params, specs)

    h.rm.fetch_satisfied = spy  # the session fetches reach it through the manager
    box: list = []
    t = threading.Thread(
        target=lambda: box.append(sfetch(h, 2, sid, 1, [_spec(0, 0)], max_wait_ms=10_000))
    )
    t.start()
    wait_until(lambda: h.fetch.watched() > 0, 5, "the session fetch parked")
    assert checked[0] == [0]  # the arrival: the named partition (nothing else changed)
    assert all(c == [] for c in checked[1:])  # the purgatory's tries: nothing changed since
    n = len(checked)
    _append(h, 3, 2)
    t.join(10)
    assert not t.is_alive() and box
    assert [3] in checked[n:]  # the wake-up looked at the appended partition alone
    assert all(0 not in c for c in checked[n:])
    got = _parts(box[0])
    assert list(got) == [3] and got[3]["records"]


def test_a_parked_fetch_with_min_bytes_adds_up_every_partition(h):
    sid = sfetch(h, 2, 0, 0, [_spec(p, 0) for p in range(4)]).session_id
    one = len(build_batch([(None, b"x")] * 3))
    done = threading.Event()
    box: list = []

    def cb(res):
        box.append(res)
        done.set()

    params = FetchParams(2, 10_000, one + 1, 10 * MiB)  # more than one partition's batch
    assert h.rm.session_fetches.fetch_with_session(params, sid, 1, [], [], cb) is None
    _append(h, 1, 3)  # (the append's wake-up runs the check on this thread)
    assert not done.is_set()  # one partition's bytes are not enough
    _append(h, 2, 3)  # the second partition's batch makes min_bytes, with the first's
    assert done.wait(10), "the session fetch never completed"
    got = _parts(box[0])
    assert sorted(got) == [1, 2] and got[1]["records"] and got[2]["records"]


def test_a_high_watermark_change_without_records_is_reported(h):
    _append(h, 0, 3)
    part = h.rm.get_partition("t", 0)
    wait_until(lambda: part.log.flushed_offset == 3, 5, "leader flushed")
    sid = sfetch(h, 2, 0, 0, [_spec(p, 0) for p in range(4)]).session_id
    got = _parts(sfetch(h, 2, sid, 1, [_spec(0, 3)]))  # follower 2 took the records
    assert part.high_watermark == 0  # follower 3 has not fetched yet
    assert got == {} or got[0]["high_watermark"] == 0
    # follower 3 catches up: the HW moves; follower 2 names nothing but learns it
    h.rm.fetch_records(FetchParams(3, 0, 1, MiB), [_spec(0, 3)], lambda _: None)  # no session
    assert part.high_watermark == 3
    got = _parts(sfetch(h, 2, sid, 2))
    assert list(got) == [0] and got[0]["high_watermark"] == 3 and not got[0]["records"]
    assert sfetch(h, 2, sid, 3).results == []  # reported once


def test_session_errors(h):
    sid = sfetch(h, 2, 0, 0, [_spec(0, 0)]).session_id
    assert sfetch(h, 2, sid, 2).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert sfetch(h, 2, sid + 1, 1).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert sfetch(h, 3, sid, 1).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # a full fetch naming the old session closes it and opens another
    new = sfetch(h, 2, sid, 0, [_spec(0, 0)])
    assert new.session_id not in (0, sid) and len(h.rm.session_fetches.cache) == 1
    assert sfetch(h, 2, sid, 1).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_forgotten_partitions_are_no_longer_answered(h):
    sid = sfetch(h, 2, 0, 0, [_spec(p, 0) for p in range(4)]).session_id
    sfetch(h, 2, sid, 1, forgotten=[("t", 1)])
    _append(h, 1, 2)
    assert sfetch(h, 2, sid, 2).results == []


def test_an_idle_follower_in_a_session_stays_in_the_isr(h):
    proposals = []
    h.rm.isr_proposer = lambda p, isr: proposals.append((p.partition, isr))
    sid = sfetch(h, 2, 0, 0, [_spec(p, 0) for p in range(4)]).session_id
    part = h.rm.get_partition("t", 0)
    for p in range(4):  # long ago, for both followers
        for r in (2, 3):
            h.rm.get_partition("t", p).followers[r].last_caught_up_ms -= 120_000
    assert sfetch(h, 2, sid, 1).results == []  # idle: names nothing, but fetched just now
    assert h.rm.shrink_isrs(60_000) == 4
    # follower 3 (no session) is dropped everywhere, follower 2 nowhere
    assert sorted(proposals) == [(p, (1, 2)) for p in range(4)]
    assert part.followers[2].last_caught_up_ms > part.followers[3].last_caught_up_ms


def test_isr_expansion_is_retried_for_an_idle_follower_outside_the_isr(tmp_path):
    h = Harness(tmp_path)
    try:
        h.replay(Topic("t", TID), PartitionRecord(TID, 0, (1, 2), (1,), 1, 0, 0))
        proposals = []
        h.rm.isr_proposer = lambda p, isr: proposals.append(isr)
        sid = sfetch(h, 2, 0, 0, [_spec(0, 0)]).session_id
        assert proposals == [(1, 2)]
        h.rm.get_partition("t", 0).isr_change_failed(backoff_ms=0)  # the controller refused
        assert sfetch(h, 2, sid, 1).results == []  # names nothing...
        assert proposals == [(1, 2), (1, 2)]  # ...and the expansion is proposed again
    finally:
        h.close()
