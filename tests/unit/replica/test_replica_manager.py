"""ReplicaManager with real Logs on temp dirs, real purgatories and flushers: leadership from
metadata deltas, the flush wait, HW rules (flushed offset; ISR follower LEOs), delayed fetch,
per-partition errors, deletion."""

from __future__ import annotations

import errno
import threading
import time

import pytest
from helpers import wait_until

from broker.log import LogConfig, LogManager
from broker.purgatory import Purgatory, SystemTimer
from broker.replica import FetchParams, FetchPartitionSpec, ReplicaManager, ReplicaSettings
from client.errors import ErrorCode
from client.records import build_batch, decode_records
from controller.metadata.delta import MetadataDelta
from controller.metadata.image import MetadataImage
from controller.metadata.records import Partition as PartitionRecord
from controller.metadata.records import PartitionChange, RemoveTopic, Topic

TID = b"\x01" * 16


class Harness:
    def __init__(self, tmp_path, flush_on_ack: bool = True, start_flushers: bool = True) -> None:
        self.timer = SystemTimer("t")
        self.produce = Purgatory("produce", self.timer)
        self.fetch = Purgatory("fetch", self.timer)
        self.lm = LogManager([tmp_path / "logs"], LogConfig(flush_on_ack=flush_on_ack))
        self.rm = ReplicaManager(
            1, self.lm, self.produce, self.fetch, ReplicaSettings(flush_on_ack=flush_on_ack)
        )
        if start_flushers:
            self.lm.start_flushers(self.rm.on_flushed)
        self.image = MetadataImage.EMPTY
        self.offset = 0

    def replay(self, *records) -> MetadataDelta:
        delta = MetadataDelta(self.image)
        for r in records:
            delta.replay(r, self.offset)
            self.offset += 1
        self.image = delta.apply()
        self.rm.apply_metadata(self.image, delta)
        return delta

    def close(self) -> None:
        self.produce.shutdown()
        self.fetch.shutdown()
        self.timer.shutdown()
        self.lm.close()


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    harness.replay(
        Topic("t", TID),
        PartitionRecord(TID, 0, (1,), (1,), 1, 0, 0),
        PartitionRecord(TID, 1, (1, 2), (1, 2), 1, 0, 0),
    )
    yield harness
    harness.close()


def _append(h, entries, acks=-1, timeout_ms=5000):
    done = threading.Event()
    box: dict = {}

    def cb(statuses):
        box["statuses"] = statuses
        done.set()

    res = h.rm.append_records(acks, timeout_ms, entries, cb)
    if res is not None:
        return res
    assert done.wait(10), "DelayedProduce never completed"
    return box["statuses"]


def test_single_replica_ack_waits_for_flush(h):
    log = h.lm.get("t", 0)
    st = _append(h, {("t", 0): build_batch([(None, b"a"), (None, b"b")])})
    assert st[("t", 0)].error_code == 0 and st[("t", 0)].base_offset == 0
    assert log.flushed_offset >= 2
    assert h.rm.get_partition("t", 0).high_watermark == 2


def test_without_flushers_the_produce_times_out_and_hw_stays(tmp_path):
    h = Harness(tmp_path, start_flushers=False)
    try:
        h.replay(Topic("t", TID), PartitionRecord(TID, 0, (1,), (1,), 1, 0, 0))
        # request_flush needs a flusher: start one that is never woken for this log
        h.lm.start_flushers(None)
        h.lm.request_flush = lambda log: None  # the fsync never happens
        st = _append(h, {("t", 0): build_batch([(None, b"a")])}, timeout_ms=50)
        assert st[("t", 0)].error_code == ErrorCode.REQUEST_TIMED_OUT
        assert h.rm.get_partition("t", 0).high_watermark == 0  # never above the flushed offset
    finally:
        h.close()


def test_isr_follower_leo_bounds_the_high_watermark(h):
    """acks=all on a 2-replica ISR waits for the follower's fetch position too."""
    done = threading.Event()
    box: dict = {}

    def cb(statuses):
        box.update(statuses)
        done.set()

    res = h.rm.append_records(-1, 5000, {("t", 1): build_batch([(None, b"x")] * 3)}, cb)
    assert res is None
    part = h.rm.get_partition("t", 1)
    wait_until(lambda: h.lm.get("t", 1).flushed_offset >= 3, 5, "the leader's fsync")
    assert not done.wait(0.05)  # flushed by the leader, but the follower is at 0
    assert part.high_watermark == 0
    # the follower fetches from offset 3 (it has 0..2), long-polling at the leader's end: the
    # fetch waits for new bytes, but its arrival alone moves the HW to 3 and completes the
    # waiting produce (no flush callback involved, no wait for the long poll to end)
    answered = threading.Event()
    parked = h.rm.fetch_records(
        FetchParams(2, 5000, 1, 1 << 20),
        [FetchPartitionSpec("t", 1, 3, 1 << 20)],
        lambda _: answered.set(),
    )
    assert parked is None  # nothing new to read: the fetch waits
    assert done.wait(1)
    assert box[("t", 1)].error_code == 0 and part.high_watermark == 3
    assert not answered.is_set()


def test_acks_one_does_not_wait_for_followers(h):
    st = _append(h, {("t", 1): build_batch([(None, b"x")])}, acks=1)
    assert st[("t", 1)].error_code == 0
    assert h.rm.get_partition("t", 1).high_watermark == 0  # follower not caught up


def test_min_insync_replicas(tmp_path):
    h = Harness(tmp_path)
    try:
        h.rm.settings = ReplicaSettings(min_insync_replicas=2)
        h.replay(Topic("t", TID), PartitionRecord(TID, 0, (1,), (1,), 1, 0, 0))
        st = _append(h, {("t", 0): build_batch([(None, b"x")])})
        assert st[("t", 0)].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert _append(h, {("t", 0): build_batch([(None, b"x")])}, acks=1)[("t", 0)].error_code == 0
    finally:
        h.close()


def test_bad_partition_fails_alone(h):
    bad = bytearray(build_batch([(None, b"x")]))
    bad[-1] ^= 1
    st = _append(
        h,
        {
            ("t", 0): bytes(bad),
            ("t", 1): build_batch([(None, b"ok")]),
            ("t", 9): build_batch([(None, b"x")]),
            ("u", 0): b"",
        },
        acks=1,
    )
    assert st[("t", 0)].error_code == ErrorCode.CORRUPT_MESSAGE
    assert st[("t", 1)].error_code == 0
    assert st[("t", 9)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert st[("u", 0)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_leader_change_fails_waiting_produce_and_fences_fetch(h):
    part = h.rm.get_partition("t", 1)
    box: dict = {}
    done = threading.Event()
    h.rm.append_records(
        -1, 5000, {("t", 1): build_batch([(None, b"x")])}, lambda s: (box.update(s), done.set())
    )
    h.replay(PartitionChange(TID, 1, leader=2))  # leadership moves away
    assert done.wait(5)
    assert box[("t", 1)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert not part.is_leader and part.leader_epoch == 1
    out = h.rm.read_partitions(FetchParams(-1, 0, 1, 1 << 20), [FetchPartitionSpec("t", 1, 0, 100)])
    assert out[0]["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    h.replay(PartitionChange(TID, 1, leader=1))
    stale = FetchPartitionSpec("t", 1, 0, 100, current_leader_epoch=0)
    out = h.rm.read_partitions(FetchParams(-1, 0, 1, 1 << 20), [stale])
    assert out[0]["error_code"] == ErrorCode.FENCED_LEADER_EPOCH


def test_delayed_fetch_completes_on_flush_and_expires(h):
    box: dict = {}
    done = threading.Event()
    params = FetchParams(-1, 5000, 1, 1 << 20)
    spec = [FetchPartitionSpec("t", 0, 0, 1 << 20)]
    assert h.rm.fetch_records(params, spec, lambda r: (box.update(r=r), done.set())) is None
    assert not done.is_set()
    _append(h, {("t", 0): build_batch([(None, b"late")])})
    assert done.wait(5)
    assert [r.value for r in decode_records(box["r"][0]["records"])] == [b"late"]

    expired = threading.Event()
    t0 = time.monotonic()
    params = FetchParams(-1, 50, 1, 1 << 20)
    spec = [FetchPartitionSpec("t", 0, 1, 1 << 20)]
    assert h.rm.fetch_records(params, spec, lambda r: expired.set()) is None
    assert expired.wait(5) and time.monotonic() - t0 >= 0.04


def test_delete_topic_removes_logs(h):
    d = h.lm.get("t", 0).directory
    assert d.exists()
    h.replay(RemoveTopic(TID))
    assert h.rm.get_partition("t", 0) is None and not d.exists()
    assert h.lm.get("t", 1) is None


def test_full_resync_from_snapshot_drops_unknown_logs_once_caught_up(h):
    h.lm.get_or_create("stale", 0)
    h.lm.get_or_create("later", 0).append_as_leader(build_batch([(None, b"kept")]), 0)
    h.rm.apply_metadata(h.image, None)
    # kept until the broker has caught up: a later record may re-create them
    assert h.lm.get("stale", 0) is not None and h.rm.get_partition("stale", 0) is None
    assert h.rm.get_partition("t", 0).is_leader
    later = b"\x02" * 16
    h.replay(Topic("later", later), PartitionRecord(later, 0, (1,), (1,), 1, 0, 0))
    assert h.rm.get_partition("later", 0).log.end_offset == 1  # its data survived
    assert h.rm.applier.delete_strays(h.image) == 1
    assert h.lm.get("stale", 0) is None and h.lm.get("later", 0) is not None


def test_list_offsets_latest_is_high_watermark(h):
    _append(h, {("t", 0): build_batch([(None, b"a"), (None, b"b")])})
    out = h.rm.offsets.list_offsets(-1, [("t", 0, -1, -1), ("t", 0, -2, -1), ("x", 0, -1, -1)])
    assert [o["offset"] for o in out[:2]] == [2, 0]
    assert out[2]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_offline_log_fails_waiting_produce_with_storage_error(tmp_path):
    h = Harness(tmp_path)
    try:
        h.replay(Topic("t", TID), PartitionRecord(TID, 0, (1,), (1,), 1, 0, 0))
        h.lm.request_flush = lambda log: None  # the group commit never reports
        box: dict = {}
        done = threading.Event()
        cb = lambda s: (box.update(s), done.set())  # noqa: E731
        assert h.rm.append_records(-1, 10_000, {("t", 0): build_batch([(None, b"x")])}, cb) is None
        assert h.rm.wake_offline() == 0 and not done.is_set()
        log = h.lm.get("t", 0)  # what a failed fsync does: the log and its dir go offline
        log.fail(OSError(errno.EIO, "fdatasync: Input/output error"))
        assert h.rm.wake_offline() == 1
        assert done.wait(5)
        assert box[("t", 0)].error_code == ErrorCode.KAFKA_STORAGE_ERROR
        st = _append(h, {("t", 0): build_batch([(None, b"y")])})
        assert st[("t", 0)].error_code == ErrorCode.KAFKA_STORAGE_ERROR
    finally:
        h.close()


def test_replicas_of_an_offline_log_dir_are_reported_as_failed(tmp_path):
    """The heartbeat's failed replicas include every replica whose log dir went offline (a full
    disk, EIO), so the controller moves their leadership and ISR membership elsewhere (found by
    fault scenario S10: a leader with a full disk kept its partition unwritable)."""
    h = Harness(tmp_path)
    try:
        h.replay(
            Topic("t", TID),
            PartitionRecord(TID, 0, (1, 2), (1, 2), 1, 0, 0),
            PartitionRecord(TID, 1, (1, 2), (1, 2), 1, 0, 0),
            PartitionRecord(TID, 2, (1,), (1,), 1, 0, 0),  # an only replica: it stays leader
        )
        assert h.rm.applier.failed_replicas() == []
        h.lm.get("t", 0).fail(OSError(errno.ENOSPC, "No space left on device"))
        assert h.rm.applier.failed_replicas() == [("t", 0), ("t", 1)]  # the whole dir is offline
        st = _append(h, {("t", 2): build_batch([(None, b"x")])})  # the only replica says why
        assert st[("t", 2)].error_code == ErrorCode.KAFKA_STORAGE_ERROR
    finally:
        h.close()


def test_a_partition_whose_metadata_fails_to_apply_is_not_served_and_resyncs(h, caplog):
    """Issue 11: a failure to apply a delta is not swallowed. The partition stops being served,
    the error is reported, and the next image applies it again; the others are unaffected."""
    real = h.lm.get_or_create
    broken = {("t2", 0)}

    def flaky(topic, partition, *a, **k):
        if (topic, partition) in broken:
            raise OSError(24, "Too many open files")
        return real(topic, partition, *a, **k)

    h.lm.get_or_create = flaky
    tid2 = b"\x02" * 16
    h.replay(
        Topic("t2", tid2),
        PartitionRecord(tid2, 0, (1,), (1,), 1, 0, 0),
        PartitionRecord(tid2, 1, (1,), (1,), 1, 0, 0),
    )
    assert (
        h.rm.get_partition("t2", 0) is None
        and "Too many open files" in h.rm.table.failed[("t2", 0)]
    )
    assert h.rm.get_partition("t2", 1) is not None and h.rm.get_partition("t", 0) is not None
    assert "applying metadata failed" in caplog.text
    statuses = _append(h, {("t2", 0): build_batch([(None, b"x")])})
    assert statuses[("t2", 0)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    broken.clear()
    h.replay(PartitionChange(TID, 0, leader=1))  # any later image: t2-0 is applied again
    assert h.rm.table.failed == {} and h.rm.get_partition("t2", 0).is_leader
    statuses = _append(h, {("t2", 0): build_batch([(None, b"y")])})
    assert statuses[("t2", 0)].error_code == 0


def test_a_replica_refused_for_lack_of_descriptors_is_reported_once_by_the_monitor(h):
    """A FileLimitError creating a replica tells the next heartbeat that this broker cannot
    take new replicas (the controller then places them elsewhere); a plain OSError does not."""
    from broker.log.descriptors import DescriptorMonitor
    from broker.log.handles import fd_limit_error

    h.rm.applier.descriptors = DescriptorMonitor(limit=lambda: 1024, count_open=lambda: 100)
    real = h.lm.get_or_create
    error: list[OSError] = [OSError(errno.EIO, "Input/output error")]

    def failing(topic, partition, *a, **k):
        if topic == "t3":
            raise error[0]
        return real(topic, partition, *a, **k)

    h.lm.get_or_create = failing
    tid3 = b"\x03" * 16
    h.replay(Topic("t3", tid3), PartitionRecord(tid3, 0, (1,), (1,), 1, 0, 0))
    assert ("t3", 0) in h.rm.table.failed and h.rm.applier.descriptors.reason() is None
    error[0] = fd_limit_error(OSError(errno.EMFILE, "Too many open files"), "creating t3-0")
    h.replay(PartitionChange(TID, 0, leader=1))  # a later image retries t3-0
    reason = h.rm.applier.descriptors.reason()
    assert reason is not None and "open-files limit 1024" in reason, reason
    assert h.rm.applier.descriptors.reason() is None  # 924 free: the next heartbeat clears it


def test_a_produce_over_many_partitions_asks_for_one_flush_of_them_all(tmp_path, monkeypatch):
    """The logs of one request are handed to the flusher together, after every append (one
    group-commit round for the request), not one by one as they are appended."""
    h = Harness(tmp_path)
    try:
        n = 40
        h.replay(Topic("m", TID), *(PartitionRecord(TID, p, (1,), (1,), 1, 0, 0) for p in range(n)))
        calls: list[list[str]] = []
        real = h.lm.request_flush_many

        def spy(logs):
            logs = list(logs)
            # every append of the request is done by the time its logs are handed over
            assert all(log.end_offset == 1 for log in logs)
            calls.append([f"{log.topic}-{log.partition}" for log in logs])
            return real(logs)

        monkeypatch.setattr(h.lm, "request_flush_many", spy)
        st = _append(h, {("m", p): build_batch([(None, b"v")]) for p in range(n)})
        assert all(s.error_code == 0 for s in st.values())
        assert calls == [[f"m-{p}" for p in range(n)]]
    finally:
        h.close()


def test_a_metadata_change_over_many_partitions_retries_parked_requests_once(tmp_path, monkeypatch):
    """A leadership change over many partitions retries the produces and fetches parked on
    them once, after every partition is applied: a fetch session's parked fetch names thousands
    of partitions, and a controlled shutdown moving 10,000 re-evaluated it 10,000 times. The
    parked produce still fails with NOT_LEADER_OR_FOLLOWER."""
    h = Harness(tmp_path)
    try:
        n = 50
        h.replay(
            Topic("m", TID), *(PartitionRecord(TID, p, (1, 2), (1, 2), 1, 0, 0) for p in range(n))
        )
        box: dict = {}
        done = threading.Event()
        res = h.rm.append_records(
            -1, 5000, {("m", 0): build_batch([(None, b"x")])}, lambda s: (box.update(s), done.set())
        )
        assert res is None  # parked: follower 2 has not fetched it
        retries: list[int] = []
        for purgatory in (h.produce, h.fetch):
            real = purgatory.check_and_complete_many

            def counted(keys, real=real):
                retries.append(len(keys))
                return real(keys)

            monkeypatch.setattr(purgatory, "check_and_complete_many", counted)
        h.replay(*(PartitionChange(TID, p, leader=2) for p in range(n)))
        assert retries == [n, n], retries  # one pass per purgatory over all n partitions
        assert done.wait(5)
        assert box[("m", 0)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert all(not h.rm.get_partition("m", p).is_leader for p in range(n))
    finally:
        h.close()


def test_the_first_image_after_start_finds_logs_no_longer_this_brokers(tmp_path):
    """A broker restarted after its replica was reassigned away (or its topic deleted) while
    it was down: the first application (a delta from the empty image) keeps those logs until
    the broker has caught up, then deletes them; a log listed as its own again is kept."""
    h = Harness(tmp_path)
    try:
        moved, back = b"\x04" * 16, b"\x05" * 16
        h.lm.get_or_create("gone", 0)
        h.lm.get_or_create("moved", 0).append_as_leader(build_batch([(None, b"x")]), 0)
        h.lm.get_or_create("back", 0).append_as_leader(build_batch([(None, b"y")]), 0)
        h.replay(
            Topic("moved", moved),
            PartitionRecord(moved, 0, (2, 3), (2, 3), 2, 1, 5),  # reassigned away from 1
            Topic("back", back),
            PartitionRecord(back, 0, (2,), (2,), 2, 0, 0),
        )
        assert h.lm.get("moved", 0) is not None and h.rm.get_partition("moved", 0) is None
        # a later record makes "back" this broker's replica again: its log is kept
        h.replay(PartitionChange(back, 0, replicas=(2, 1)))
        assert h.rm.get_partition("back", 0) is not None
        assert h.rm.applier.delete_strays(h.image) == 2
        assert h.lm.get("gone", 0) is None and h.lm.get("moved", 0) is None
        assert h.lm.get("back", 0) is not None and h.lm.get("back", 0).end_offset == 1
    finally:
        h.close()


def test_a_flush_that_moves_no_high_watermark_leaves_the_parked_fetches_alone(h):
    # partition 1: ISR (1, 2), follower 2 has not fetched, so its HW stays at 0 once flushed
    done = threading.Event()
    box: list = []

    def cb(results):
        box.append(results)
        done.set()

    consumer = FetchParams(-1, 10_000, 1, 1 << 20)
    spec = FetchPartitionSpec("t", 1, 0, 1 << 20, 0, -1)
    assert h.rm.fetch_records(consumer, [spec], cb) is None  # parked: nothing below the HW
    res = _append(h, {("t", 1): build_batch([(None, b"x")] * 3)}, acks=1)
    assert res[("t", 1)].error_code == 0  # acks=1: answered once flushed
    part = h.rm.get_partition("t", 1)
    assert part.log.flushed_offset == 3 and part.high_watermark == 0
    checks: list[int] = []
    real = h.rm.fetch_satisfied
    h.rm.fetch_satisfied = lambda params, parts: checks.append(1) or real(params, parts)
    h.rm.on_flushed_many([("t", 1, 3)])  # the flush's report again: the HW does not move
    assert checks == [] and not done.is_set()
    # the follower's fetch moves the HW: the consumer's parked fetch is answered
    h.rm.fetch_records(FetchParams(2, 0, 1, 1 << 20), [spec._replace(fetch_offset=3)], lambda _: 0)
    assert part.high_watermark == 3
    assert done.wait(10), "the consumer's fetch was not answered when the HW moved"
    assert box[0][0]["records"]
