"""CoordinatorShards (broker/coordination/shards.py), the table both coordinators keep their
internal topic's partitions in, over real logs: a shard per partition this broker leads, loaded
by the loader from the whole log (several reads); leadership lost or moved to a new epoch drops
or replaces the shard, and a load read for an epoch that is no longer current installs nothing;
a failed load is retried by the table's thread; the partition count comes from the image."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import wait_until

from broker.coordination import shards as shards_module
from broker.coordination.shards import CoordinatorShards, Loaded
from broker.log.log import Log, LogConfig
from client.records import build_batch, decode_records

TOPIC = "__internal"
NODE = 1
PARTS = 3


@dataclass
class KvShard:
    """The test coordinator's shard: the last value of each key in its partition."""

    partition: int
    leader_epoch: int
    loaded: bool = False
    values: dict[bytes, bytes] = field(default_factory=dict)

    def contents(self) -> str:
        return f"{len(self.values)} keys"


class Cluster:
    """The image and the replica manager's view of TOPIC's partitions, moved together, over
    one real log per partition."""

    def __init__(self, path: Path) -> None:
        self.logs = {
            p: Log(path / f"{TOPIC}-{p}", TOPIC, p, LogConfig(cleanup_policy=("compact",)))
            for p in range(PARTS)
        }
        self.parts = {
            p: SimpleNamespace(is_leader=False, leader_epoch=-1, log=self.logs[p])
            for p in range(PARTS)
        }
        self.regs = {p: SimpleNamespace(leader=2, leader_epoch=0) for p in range(PARTS)}
        self.image = SimpleNamespace(topics={TOPIC: SimpleNamespace(partitions=self.regs)})

    def lead(self, p: int, epoch: int, leader: int = NODE) -> None:
        self.regs[p].leader, self.regs[p].leader_epoch = leader, epoch
        self.parts[p].is_leader, self.parts[p].leader_epoch = leader == NODE, epoch

    def get_partition(self, topic: str, p: int) -> SimpleNamespace | None:
        return self.parts.get(p) if topic == TOPIC else None

    def write(self, p: int, *pairs: tuple[bytes, bytes]) -> None:
        self.logs[p].append_as_leader(build_batch(list(pairs)), 0)

    def close(self) -> None:
        for log in self.logs.values():
            log.close()


class KvLoader:
    """A loader that records what it was asked and can run something mid-read or fail."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.reads = 0
        self.during_read: list[object] = []  # callables run after the first chunk, or errors

    def __call__(self, chunks: Iterator[tuple[int, bytes]], where: str) -> Loaded[KvShard]:
        self.calls.append(where)
        values: dict[bytes, bytes] = {}
        for offset, data in chunks:
            self.reads += 1
            for r in decode_records(data):
                if r.offset >= offset:
                    values[r.key] = r.value
            while self.during_read:
                act = self.during_read.pop(0)
                if isinstance(act, Exception):
                    raise act
                act()

        def install(shard: KvShard) -> None:
            shard.values = values

        return Loaded(install, lambda: f"{len(values)} keys")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    yield c
    c.close()


def _table(
    cluster: Cluster, loader: KvLoader, ticks: list[bool] | None = None
) -> CoordinatorShards[KvShard]:
    return CoordinatorShards(
        NODE, TOPIC, cluster, lambda: cluster.image, 7,
        new_shard=KvShard, loader=loader,
        on_tick=(ticks.append if ticks is not None else lambda loaded: None),
        name="test-coordinator",
    )  # fmt: skip


def test_leading_a_partition_loads_its_shard_from_the_whole_log(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shards_module, "LOAD_READ_BYTES", 1)  # one batch per read
    for i in range(3):
        cluster.write(0, (b"k%d" % i, b"v%d" % i), (b"k0", b"latest%d" % i))
    cluster.write(2, (b"only", b"one"))
    cluster.lead(0, 4)
    cluster.lead(2, 1)
    loader = KvLoader()
    t = _table(cluster, loader)
    t.on_metadata(cluster.image, None)
    with t.lock:
        s0, s2 = t.at(0), t.at(2)
        assert s0 is not None and s2 is not None and t.at(1) is None  # 1 is led by broker 2
        assert (s0.leader_epoch, s0.loaded, s2.loaded) == (4, False, False)
        assert list(t.loaded()) == []
    t.load(0, 4)
    assert loader.reads == 3  # three batches, three reads
    assert loader.calls == [f"[broker=1 test-coordinator] {TOPIC}-0"]
    with t.lock:
        assert s0.loaded and t.at(0) is s0
        assert s0.values == {b"k0": b"latest2", b"k1": b"v1", b"k2": b"v2"}
        assert [s.partition for s in t.loaded()] == [0]
        assert sorted(s.partition for s in t.all()) == [0, 2]
    t.load(2, 1)
    assert s2.loaded and s2.values == {b"only": b"one"}


def test_losing_leadership_drops_the_shard_and_a_load_read_meanwhile_installs_nothing(
    cluster: Cluster,
) -> None:
    cluster.write(1, (b"a", b"1"))
    cluster.lead(1, 0)
    loader = KvLoader()
    t = _table(cluster, loader)
    t.on_metadata(cluster.image, None)
    with t.lock:
        shard = t.at(1)
    assert shard is not None

    def moves_away() -> None:  # the partition moves to broker 2 while the load reads
        cluster.lead(1, 1, leader=2)
        t.on_metadata(cluster.image, None)

    loader.during_read.append(moves_away)
    t.load(1, 0)
    with t.lock:
        assert t.at(1) is None and not t.is_current(shard)
    assert not shard.loaded and shard.values == {}  # read, never installed
    t.load(1, 0)  # this broker is no longer the leader: the log is not even read
    assert len(loader.calls) == 1


def test_a_new_leader_epoch_replaces_the_shard_and_only_its_own_load_installs(
    cluster: Cluster,
) -> None:
    cluster.write(0, (b"a", b"1"))
    cluster.lead(0, 1)
    loader = KvLoader()
    t = _table(cluster, loader)
    t.on_metadata(cluster.image, None)
    t.load(0, 1)
    with t.lock:
        old = t.at(0)
    assert old is not None and old.loaded
    t.on_metadata(cluster.image, None)  # same epoch: kept, not reloaded
    with t.lock:
        assert t.at(0) is old

    cluster.lead(0, 2)  # e.g. leadership went away and came back
    t.on_metadata(cluster.image, None)
    with t.lock:
        new = t.at(0)
        assert new is not None and new is not old
        assert (new.leader_epoch, new.loaded) == (2, False)
        assert not t.is_current(old) and t.is_current(new)
    t.load(0, 1)  # a load scheduled for the old epoch: the partition is at 2, nothing read
    assert len(loader.calls) == 1 and not new.loaded

    # a load of epoch 2 whose read sees the epoch move to 3: not installed in either shard
    loader.during_read.append(lambda: (cluster.lead(0, 3), t.on_metadata(cluster.image, None)))
    t.load(0, 2)
    with t.lock:
        newest = t.at(0)
    assert newest is not None and newest.leader_epoch == 3
    assert not new.loaded and not newest.loaded
    t.load(0, 3)
    assert newest.loaded and newest.values == {b"a": b"1"}


def test_a_failed_load_is_retried_by_the_thread(cluster: Cluster) -> None:
    cluster.write(0, (b"a", b"1"))
    cluster.lead(0, 0)
    loader = KvLoader()
    loader.during_read.append(OSError("disk said no"))
    ticks: list[bool] = []
    t = _table(cluster, loader, ticks)
    t.start()
    try:
        t.on_metadata(cluster.image, None)

        def loaded() -> bool:
            with t.lock:
                s = t.at(0)
                return s is not None and s.loaded

        wait_until(loaded, msg="the shard loaded on the second attempt")
        assert len(loader.calls) == 2  # the first raised, the retry read the log again
        wait_until(lambda: ticks.count(True) >= 2, msg="a tick after each round that loaded")
        with t.lock:
            s = t.at(0)
            assert s is not None and s.values == {b"a": b"1"}
    finally:
        t.shutdown()


def test_load_called_directly_raises_the_loaders_error_and_leaves_the_shard_unloaded(
    cluster: Cluster,
) -> None:
    cluster.write(0, (b"a", b"1"))
    cluster.lead(0, 0)
    loader = KvLoader()
    loader.during_read.append(ValueError("bad record"))
    t = _table(cluster, loader)
    t.on_metadata(cluster.image, None)
    with pytest.raises(ValueError, match="bad record"):
        t.load(0, 0)
    with t.lock:
        s = t.at(0)
        assert s is not None and not s.loaded


def test_the_topic_gone_drops_every_shard_and_the_count_falls_back_to_the_default(
    cluster: Cluster,
) -> None:
    for p in range(PARTS):
        cluster.lead(p, 0)
    t = _table(cluster, KvLoader())
    t.on_metadata(cluster.image, None)
    assert t.num_partitions() == PARTS
    with t.lock:
        assert sorted(s.partition for s in t.all()) == [0, 1, 2]
    del cluster.image.topics[TOPIC]
    t.on_metadata(cluster.image, None)
    with t.lock:
        assert list(t.all()) == []
    assert t.num_partitions() == 7  # the configured count, before the topic exists
