"""Incremental fetch sessions (KIP-227) on the wire: a real replica fetcher thread follows 50
partitions led by an in-process broker over a real socket. Every Fetch it sends and every
answer it gets is counted: after the first (full) fetch, an idle follower's requests and the
leader's answers carry no partition; a produce to one partition brings exactly that partition,
and the follower learns the new high watermark."""

from __future__ import annotations

import threading

import pytest
from helpers import RawClient, wait_until
from replica_helpers import batch, create_topic, produce

from broker.log import LogConfig, LogManager
from broker.purgatory import Purgatory, SystemTimer
from broker.replica import ReplicaManager
from broker.replica.fetcher import FetcherSettings, ReplicaFetcherThread
from broker.replica.leader_connection import LeaderConnection
from client.protocol import ApiKey
from controller.metadata.delta import MetadataDelta
from controller.metadata.image import MetadataImage
from controller.metadata.records import Partition as PartitionRecord
from controller.metadata.records import Topic

N = 50
TID = b"\x02" * 16


def _count(items: list[dict]) -> int:
    return sum(len(t["partitions"]) for t in items)


@pytest.fixture
def leader(broker_server):
    with RawClient(broker_server.address) as c:
        assert create_topic(c, "s", partitions=N)["error_code"] == 0
        rm = broker_server.server.services.replica_manager
        wait_until(lambda: all(rm.get_partition("s", p) for p in range(N)), 10, "leading")
        yield broker_server, c


@pytest.fixture
def follower(tmp_path, leader):
    """Broker 2's replica manager (real logs), following every partition of `s`."""
    server, _ = leader
    rm = server.server.services.replica_manager
    epoch = rm.get_partition("s", 0).leader_epoch
    leader_id = rm.node_id
    timer = SystemTimer("follower")
    produce, fetch = Purgatory("produce", timer), Purgatory("fetch", timer)
    lm = LogManager([tmp_path / "follower"], LogConfig())
    frm = ReplicaManager(2, lm, produce, fetch)
    lm.start_flushers(frm.on_flushed)
    delta = MetadataDelta(MetadataImage.EMPTY)
    delta.replay(Topic("s", TID), 0)
    for p in range(N):
        reg = PartitionRecord(TID, p, (leader_id, 2), (leader_id, 2), leader_id, epoch, 0)
        delta.replay(reg, 1 + p)
    frm.apply_metadata(delta.apply(), delta)
    yield frm, leader_id, epoch
    for purgatory in (produce, fetch):
        purgatory.shutdown()
    timer.shutdown()
    lm.close()


def test_idle_incremental_fetches_carry_no_partitions(leader, follower, monkeypatch):
    server, client = leader
    frm, leader_id, epoch = follower
    # (session epoch, partitions named, forgotten, answered) of every Fetch
    wire: list[tuple[int, int, int, int]] = []
    lock = threading.Lock()
    real = LeaderConnection.request

    def spy(self, api_key, body):
        resp = real(self, api_key, body)
        if api_key == ApiKey.FETCH:
            with lock:
                wire.append(
                    (
                        body["session_epoch"],
                        _count(body["topics"]),
                        _count(body["forgotten_topics"]),
                        _count(resp["topics"]),
                    )
                )
        return resp

    monkeypatch.setattr(LeaderConnection, "request", spy)
    thread = ReplicaFetcherThread(
        "fetcher-test",
        2,
        leader_id,
        frm,
        lambda _id: server.address,
        FetcherSettings(max_wait_ms=50),
    )
    for p in range(N):
        thread.add(("s", p), epoch)
    thread.start()
    try:

        def seen(n: int) -> list:
            wait_until(lambda: len(wire) >= n, 10, f"{n} fetches")
            with lock:
                return list(wire)

        got = seen(5)
        assert got[0] == (0, N, 0, N)  # full: every partition asked and answered
        assert all(w == (w[0], 0, 0, 0) and w[0] > 0 for w in got[1:5]), got

        assert produce(client, "s", 7, batch([b"a", b"b", b"c"]))["error_code"] == 0
        fpart = frm.get_partition("s", 7)
        wait_until(lambda: fpart.log.end_offset == 3, 10, "replicated")
        wait_until(lambda: fpart.high_watermark == 3, 10, "the follower learns the HW")
        mark = len(wire)
        got = seen(mark + 4)
        assert all(w[1:] == (0, 0, 0) for w in got[mark:]), got  # idle again
        busy = [w for w in got if w[1] or w[3]][1:]  # after the full fetch
        assert busy and all(w[1] <= 1 and w[3] <= 1 for w in busy), busy
        assert thread.session.full_fetches == 1
    finally:
        thread.stop()
        thread.join(5)


def test_a_partition_behind_fetches_the_catch_up_size(leader, follower, monkeypatch):
    """A replica below the leader's high watermark asks replica.fetch.catchup.max.bytes per
    fetch, and replica.fetch.max.bytes again once caught up."""
    server, client = leader
    frm, leader_id, epoch = follower
    for i in range(12):  # 12 batches of 200 kB: 2.4 MB behind before the fetcher starts
        assert produce(client, "s", 0, batch([bytes([i]) * 200_000]))["error_code"] == 0
    asked: list[int] = []  # partition_max_bytes of s-0 in every Fetch that names it
    lock = threading.Lock()
    real = LeaderConnection.request

    def spy(self, api_key, body):
        if api_key == ApiKey.FETCH:
            with lock:
                asked.extend(
                    p["partition_max_bytes"]
                    for t in body["topics"]
                    for p in t["partitions"]
                    if p["partition"] == 0
                )
        return real(self, api_key, body)

    monkeypatch.setattr(LeaderConnection, "request", spy)
    small, large = 256 * 1024, 2 * 1024 * 1024
    thread = ReplicaFetcherThread(
        "fetcher-test",
        2,
        leader_id,
        frm,
        lambda _id: server.address,
        FetcherSettings(max_wait_ms=50, partition_max_bytes=small, catchup_max_bytes=large),
    )
    thread.add(("s", 0), epoch)
    thread.start()
    try:
        fpart = frm.get_partition("s", 0)
        wait_until(lambda: fpart.log.end_offset == 12, 20, "caught up")
        wait_until(lambda: fpart.high_watermark == 12, 10, "the follower learns the HW")
        with lock:
            got = list(asked)
        assert got[0] == small, got  # nothing known yet: the ordinary size
        assert large in got, got  # behind: the catch-up size
        # 2.4 MB in 2 MiB fetches: far fewer rounds than in 256 KiB ones
        assert len(got) < 12, got
    finally:
        thread.stop()
        thread.join(5)
