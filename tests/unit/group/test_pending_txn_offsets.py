"""Offsets committed inside a transaction (TxnOffsetCommit) at the group coordinator, on a real
log of `__consumer_offsets`: pending (hidden from OffsetFetch, UNSTABLE_OFFSET_COMMIT with
require_stable) until the producer's COMMIT marker makes them the group's offsets or its ABORT
marker drops them; a reload from the log resolves pending offsets whose marker is in it; an
older producer epoch is fenced; the member check of TxnOffsetCommit v3."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from broker.group import GroupCoordinator, GroupSettings, partition_for
from broker.group.state import ConsumerGroup
from broker.log.log import Log, LogConfig
from broker.replica.delayed import ProducePartitionStatus
from client.errors import BrokerResponseError, ErrorCode
from client.records.control import build_marker

TOPIC = "__consumer_offsets"
PARTS = 1
GROUP = "g"
assert partition_for(GROUP, PARTS) == 0


class LogReplicaManager:
    """The ReplicaManager's append path over one real Log (leader, answered at once)."""

    def __init__(self, log: Log) -> None:
        self.part = SimpleNamespace(is_leader=True, leader_epoch=0, log=log)

    def get_partition(self, topic: str, p: int):
        return self.part if (topic, p) == (TOPIC, 0) else None

    def append_records(self, acks, timeout_ms, entries, callback, *, control=False,
                       coordinator=False):  # fmt: skip
        out = {}
        for tp, batch in entries.items():
            try:
                info = self.part.log.append_as_leader(
                    batch, 0, control=control, coordinator=coordinator
                )
                out[tp] = ProducePartitionStatus(0, base_offset=info.first_offset)
            except BrokerResponseError as exc:
                out[tp] = ProducePartitionStatus(int(exc.code), error_message=str(exc))
        return out


def _image():
    reg = {0: SimpleNamespace(leader=1, leader_epoch=0)}
    return SimpleNamespace(topics={TOPIC: SimpleNamespace(partitions=reg)}, brokers={})


def _open(path) -> tuple[GroupCoordinator, LogReplicaManager]:
    log = Log(path / f"{TOPIC}-0", TOPIC, 0, LogConfig(cleanup_policy=("compact",)))
    rm = LogReplicaManager(log)
    image = _image()
    gc = GroupCoordinator(1, rm, GroupSettings(offsets_partitions=PARTS), lambda: image)
    gc.on_metadata(image, None)
    gc.shards.load(0, 0)
    return gc, rm


def _txn_commit(gc, pid: int, epoch: int, offset: int, partition: int = 0,
                member: str = "", generation: int = -1) -> int:  # fmt: skip
    got: list[dict] = []
    gc.txn_commit(
        {"transactional_id": "tx", "group_id": GROUP, "producer_id": pid,
         "producer_epoch": epoch, "generation_id": generation, "member_id": member,
         "group_instance_id": None,
         "topics": [{"name": "in", "partitions": [
             {"partition": partition, "committed_offset": offset, "committed_leader_epoch": -1,
              "committed_metadata": None}]}]},
        got.append,
    )  # fmt: skip
    (answer,) = got
    return answer["topics"][0]["partitions"][0]["error_code"]


def _marker(gc, rm, pid: int, epoch: int, commit: bool) -> None:
    """What WriteTxnMarkers does on an offsets partition: append, then tell the coordinator."""
    status = rm.append_records(
        -1, 1000, {(TOPIC, 0): build_marker(pid, epoch, commit, 0, 0)}, None, control=True
    )[(TOPIC, 0)]
    assert status.error_code == 0
    gc.on_txn_marker(0, pid, commit)


def _fetched(gc, stable: bool = False, partition: int = 0) -> tuple[int, int]:
    (t,) = gc.fetch_offsets(GROUP, [{"name": "in", "partitions": [partition]}], stable)
    (p,) = t["partitions"]
    return p["committed_offset"], p["error_code"]


def test_pending_until_commit_marker_and_dropped_by_abort(tmp_path) -> None:
    gc, rm = _open(tmp_path)
    assert _txn_commit(gc, pid=7, epoch=0, offset=10) == 0
    assert _fetched(gc) == (-1, 0)  # pending: not shown
    assert _fetched(gc, stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    _marker(gc, rm, 7, 0, commit=True)
    assert _fetched(gc, stable=True) == (10, 0)

    assert _txn_commit(gc, pid=7, epoch=0, offset=20) == 0
    assert _fetched(gc, stable=True) == (10, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    _marker(gc, rm, 7, 0, commit=False)
    assert _fetched(gc, stable=True) == (10, 0)  # the aborted 20 is gone


def test_reload_resolves_pending_offsets_by_the_markers_in_the_log(tmp_path) -> None:
    gc, rm = _open(tmp_path)
    assert _txn_commit(gc, pid=1, epoch=0, offset=5, partition=0) == 0
    assert _txn_commit(gc, pid=2, epoch=0, offset=6, partition=1) == 0
    assert _txn_commit(gc, pid=3, epoch=0, offset=7, partition=2) == 0
    _marker(gc, rm, 1, 0, commit=True)
    _marker(gc, rm, 2, 0, commit=False)
    rm.part.log.close()  # pid 3 has no marker yet: still pending after the reload

    gc2, rm2 = _open(tmp_path)
    assert _fetched(gc2, True, 0) == (5, 0)
    assert _fetched(gc2, True, 1) == (-1, 0)
    assert _fetched(gc2, True, 2) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    _marker(gc2, rm2, 3, 0, commit=True)
    assert _fetched(gc2, True, 2) == (7, 0)
    rm2.part.log.close()


def test_marker_landing_while_the_shard_loads_is_applied_after_the_load(tmp_path) -> None:
    gc, rm = _open(tmp_path)
    assert _txn_commit(gc, pid=4, epoch=0, offset=9) == 0
    log = rm.part.log
    image = _image()
    gc2 = GroupCoordinator(1, rm, GroupSettings(offsets_partitions=PARTS), lambda: image)
    gc2.on_metadata(image, None)  # leader: loading scheduled, not yet run
    real_read = log.read

    def read_then_marker(offset, max_bytes, max_offset=None):
        got = real_read(offset, max_bytes, max_offset)
        if offset == 0:  # the load read the log; the marker lands past what it read
            _marker(gc2, rm, 4, 0, commit=True)
        return got

    log.read = read_then_marker
    gc2.shards.load(0, 0)
    assert _fetched(gc2, stable=True) == (9, 0)
    log.close()


def test_an_older_producer_epoch_is_fenced(tmp_path) -> None:
    gc, rm = _open(tmp_path)
    assert _txn_commit(gc, pid=7, epoch=1, offset=3) == 0
    _marker(gc, rm, 7, 1, commit=True)
    assert _txn_commit(gc, pid=7, epoch=0, offset=4) == ErrorCode.PRODUCER_FENCED
    assert _fetched(gc, stable=True) == (3, 0)
    rm.part.log.close()


@pytest.mark.parametrize(
    ("member", "generation", "code"),
    [
        ("m1", 3, ErrorCode.NONE),
        ("m1", 2, ErrorCode.STALE_MEMBER_EPOCH),
        ("m2", 3, ErrorCode.UNKNOWN_MEMBER_ID),
        ("", -1, ErrorCode.NONE),  # no group metadata (TxnOffsetCommit v0-2): not checked
    ],
)
def test_member_check(tmp_path, member: str, generation: int, code: int) -> None:
    gc, rm = _open(tmp_path)
    with gc.shards.lock:
        shard = gc.shards.get(GROUP)
        group = shard.groups[GROUP] = ConsumerGroup(GROUP, "uniform")
        group.members["m1"] = SimpleNamespace(member_epoch=3)
    assert _txn_commit(gc, 7, 0, 11, member=member, generation=generation) == code
    rm.part.log.close()


def test_deleting_the_group_drops_its_pending_offsets_too(tmp_path) -> None:
    gc, rm = _open(tmp_path)
    assert _txn_commit(gc, pid=5, epoch=0, offset=2) == 0
    got: list[tuple[int, str | None]] = []
    gc.delete_group(GROUP, lambda code, msg: got.append((code, msg)))
    assert got == [(0, None)]
    _marker(gc, rm, 5, 0, commit=True)  # the transaction commits after the deletion
    assert _fetched(gc, stable=True) == (-1, 0)
    rm.part.log.close()
    gc2, rm2 = _open(tmp_path)  # the tombstone, after the pending record, wins on reload too
    assert _fetched(gc2, stable=True) == (-1, 0)
    rm2.part.log.close()
