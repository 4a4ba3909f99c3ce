"""GroupCoordinator with a fake replica manager: a new leader of an offsets partition answers
COORDINATOR_LOAD_IN_PROGRESS until it has read the partition, then serves the offsets it
loaded; other brokers' groups get NOT_COORDINATOR; a commit updates the table only once its
write is acknowledged, and a failed write maps to the coordinator errors."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from helpers import wait_until

import broker.group.offset_writes as offset_writes_module
from broker.group import GroupCoordinator, GroupError, GroupSettings, partition_for
from broker.group.offsets import offset_key, offset_value
from broker.replica.delayed import ProducePartitionStatus
from client.errors import ErrorCode
from client.records import build_batch

TOPIC = "__consumer_offsets"
PARTS = 3


class FakeLog:
    def __init__(self, batches: list[bytes], end: int) -> None:
        self.batches = batches  # each starting where the previous ended
        self.log_start_offset = 0
        self.end_offset = end

    def read(self, offset: int, max_bytes: int):
        data = b"".join(self.batches)
        return SimpleNamespace(
            data=data if offset == 0 and data else b"", next_offset=self.end_offset
        )


class FakeReplicaManager:
    def __init__(self) -> None:
        self.partitions: dict[int, SimpleNamespace] = {}
        self.appended: list = []
        self.answer: ProducePartitionStatus | None = None
        self.later = None

    def get_partition(self, topic: str, p: int):
        return self.partitions.get(p)

    def append_records(self, acks, timeout_ms, entries, callback):
        assert acks == -1
        self.appended.append(entries)
        (tp,) = entries
        if self.answer is None:  # acknowledged later (a DelayedProduce)
            self.later = lambda status: callback({tp: status})
            return None
        return {tp: self.answer}


def _image(leaders: dict[int, int]):
    reg = {p: SimpleNamespace(leader=leader, leader_epoch=0) for p, leader in leaders.items()}
    return SimpleNamespace(topics={TOPIC: SimpleNamespace(partitions=reg)}, brokers={})


def _batch(base: int, rows: list[tuple[str, str, int, int]]) -> bytes:
    return build_batch(
        [(offset_key(g, t, p), offset_value(o, -1, None, 0)) for g, t, p, o in rows],
        base_offset=base,
    )


def _coordinator(leaders: dict[int, int]) -> tuple[GroupCoordinator, FakeReplicaManager, dict]:
    rm = FakeReplicaManager()
    image = {"now": _image(leaders)}
    gc = GroupCoordinator(1, rm, GroupSettings(offsets_partitions=PARTS), lambda: image["now"])
    return gc, rm, image


def _group_in(p: int) -> str:
    return next(f"g{i}" for i in range(1000) if partition_for(f"g{i}", PARTS) == p)


def test_load_then_serve_and_not_coordinator_elsewhere() -> None:
    gc, rm, image = _coordinator({0: 1, 1: 1, 2: 2})
    g0, g2 = _group_in(0), _group_in(2)
    garbage = build_batch([(b"\xc1 not msgpack", b"x")], base_offset=3)  # skipped
    log = FakeLog(
        [_batch(0, [(g0, "t", 0, 5), (g0, "t", 1, 7)]), _batch(2, [(g0, "t", 0, 9)]), garbage],
        end=4,
    )
    rm.partitions[0] = SimpleNamespace(is_leader=True, leader_epoch=0, log=log)
    rm.partitions[1] = SimpleNamespace(is_leader=True, leader_epoch=0, log=FakeLog([], 0))
    gc.on_metadata(image["now"], None)
    with pytest.raises(GroupError) as e:
        gc.fetch_offsets(g0, None)
    assert e.value.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    gc.shards.load(0, 0)
    rows = gc.fetch_offsets(g0, None)
    assert rows == [{"name": "t", "partitions": [
        {"partition": 0, "committed_offset": 9, "committed_leader_epoch": -1, "metadata": None,
         "error_code": 0},
        {"partition": 1, "committed_offset": 7, "committed_leader_epoch": -1, "metadata": None,
         "error_code": 0},
    ]}]  # fmt: skip
    with pytest.raises(GroupError) as e:
        gc.fetch_offsets(g2, None)
    assert e.value.code == ErrorCode.NOT_COORDINATOR
    # Leadership moves away: the shard is dropped.
    image["now"] = _image({0: 2, 1: 1, 2: 2})
    gc.on_metadata(image["now"], None)
    with pytest.raises(GroupError) as e:
        gc.fetch_offsets(g0, None)
    assert e.value.code == ErrorCode.NOT_COORDINATOR


def _commit_body(group: str, offset: int) -> dict:
    return {
        "group_id": group, "member_id": "", "member_epoch": -1,
        "topics": [{"name": "t", "partitions": [{"partition": 0, "committed_offset": offset,
                    "committed_leader_epoch": -1, "committed_metadata": None}]}],
    }  # fmt: skip


def test_commit_is_visible_only_once_acknowledged() -> None:
    gc, rm, image = _coordinator({0: 1, 1: 1, 2: 1})
    for p in range(PARTS):
        rm.partitions[p] = SimpleNamespace(is_leader=True, leader_epoch=0, log=FakeLog([], 0))
    gc.on_metadata(image["now"], None)
    for p in range(PARTS):
        gc.shards.load(p, 0)
    g = _group_in(1)
    answers: list[dict] = []
    gc.commit(_commit_body(g, 42), answers.append)
    assert answers == [] and len(rm.appended) == 1
    assert gc.fetch_offsets(g, None) == []  # not acknowledged yet
    rm.later(ProducePartitionStatus(0, base_offset=10))
    assert answers[0]["topics"][0]["partitions"][0]["error_code"] == 0
    assert gc.fetch_offsets(g, None)[0]["partitions"][0]["committed_offset"] == 42
    # A failed write: NOT_LEADER -> NOT_COORDINATOR, and nothing changes.
    rm.answer = ProducePartitionStatus(int(ErrorCode.NOT_LEADER_OR_FOLLOWER))
    gc.commit(_commit_body(g, 50), answers.append)
    assert answers[1]["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NOT_COORDINATOR
    rm.answer = ProducePartitionStatus(int(ErrorCode.REQUEST_TIMED_OUT))
    gc.commit(_commit_body(g, 51), answers.append)
    code = answers[2]["topics"][0]["partitions"][0]["error_code"]
    assert code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert gc.fetch_offsets(g, None)[0]["partitions"][0]["committed_offset"] == 42


class _WatchedLock:
    """A lock that says when a thread starts waiting for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.waiting = threading.Event()

    def __enter__(self) -> None:
        if not self._lock.acquire(blocking=False):
            self.waiting.set()
            self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def test_writes_reach_the_log_in_the_order_they_were_validated(monkeypatch) -> None:
    """A commit validated while its member still owned the partition must not be appended after
    a commit validated later (the next owner's, after a rebalance): replayed from the log, the
    stale one would win. Commit A (offset 5) is held between its validation and its append while
    commit B (offset 9) is made from another thread; B must wait for A's append."""
    gc, rm, image = _coordinator({0: 1, 1: 1, 2: 1})
    for p in range(PARTS):
        rm.partitions[p] = SimpleNamespace(is_leader=True, leader_epoch=0, log=FakeLog([], 0))
    gc.on_metadata(image["now"], None)
    for p in range(PARTS):
        gc.shards.load(p, 0)
    g = _group_in(0)
    watched = _WatchedLock()
    gc.writes.append_order = watched  # type: ignore[assignment]
    real_batch = offset_writes_module.commit_batch
    made: dict[bytes, int] = {}
    b_done = threading.Event()

    def b_commit() -> None:
        gc.commit(_commit_body(g, 9), lambda _answer: None)
        b_done.set()

    def between_validation_and_append(group_id, commits):
        if commits[0][2] == 5:  # commit A is validated: B runs now
            threading.Thread(target=b_commit, daemon=True).start()
            wait_until(lambda: watched.waiting.is_set() or b_done.is_set(), msg="commit B")
        batch = real_batch(group_id, commits)
        made[batch] = commits[0][2]
        return batch

    monkeypatch.setattr(offset_writes_module, "commit_batch", between_validation_and_append)
    gc.commit(_commit_body(g, 5), lambda _answer: None)
    wait_until(b_done.is_set, msg="commit B to finish")
    order = [made[next(iter(entries.values()))] for entries in rm.appended]
    assert order == [5, 9], f"appended in the order {order}; validated 5, then 9"
