"""Metrics read from the registry after real events: bytes per flusher round (real logs and
flusher), records out and per-partition labels (TopicMetrics), the followers' lag from the
replication core's state, and the quorum's commit latency and leader changes (three real
RaftMetadataLog voters on one event loop) (docs/metrics.md)."""

from __future__ import annotations

import asyncio
import random
import threading
from types import SimpleNamespace

import pytest
from helpers import async_wait_until, wait_until
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker.log import Flusher, LogConfig, LogManager
from broker.log.syncfs import SYNCFS_MIN_LOGS
from broker.metrics import BrokerMetrics
from broker.replica.state import PartitionState
from broker.topic_metrics import TopicMetrics, replica_lag
from client.records.builder import build_batch
from controller.metrics import QuorumCollector, QuorumMetrics
from controller.quorum.raft_log import RaftMetadataLog


def values(registry: CollectorRegistry) -> dict[tuple[str, tuple], float]:
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


@pytest.mark.parametrize("n_logs", [1, SYNCFS_MIN_LOGS + 2], ids=["one-log", "syncfs-round"])
def test_flush_rounds_report_the_bytes_they_made_durable(tmp_path, n_logs):
    mgr = LogManager([tmp_path / "d"], LogConfig())
    logs = [mgr.get_or_create("t", p) for p in range(n_logs)]
    metrics = BrokerMetrics(("127.0.0.1", 0))
    lock = threading.Lock()
    rounds: list[tuple[float, int]] = []

    def on_round(seconds: float, nbytes: int) -> None:
        with lock:
            rounds.append((seconds, nbytes))
        metrics.flush_round(seconds, nbytes)

    flusher = Flusher("r", None, directory=mgr.log_dirs[0])
    flusher.on_round = on_round
    flusher.start()
    try:
        appended = 0
        for i in range(3):
            for log in logs:
                data = build_batch([(None, b"v%d" % i * (10 + i))] * (i + 1))
                log.append_as_leader(data, 0)
                appended += len(data)
            for log in logs:
                flusher.request_flush(log)
            wait_until(flusher.idle, 30, "the round to finish")
        assert all(log.flushed_offset == log.end_offset for log in logs)
        with lock:
            assert sum(n for _, n in rounds) == appended, rounds
            assert all(n > 0 for _, n in rounds)
        v = values(metrics.registry)
        assert v[("gregor_log_flush_size_bytes_sum", ())] == appended
        assert v[("gregor_log_flush_size_bytes_count", ())] == len(rounds)
        assert v[("gregor_log_flush_duration_seconds_count", ())] == len(rounds)
        # nothing new appended: a round of an already flushed log makes no bytes durable
        seen = len(rounds)
        flusher.request_flush(logs[0])
        wait_until(lambda: flusher.idle() and len(rounds) > seen, 30, "one more round")
        with lock:
            assert rounds[-1][1] == 0
    finally:
        flusher.stop()
        mgr.close()


def test_records_out_and_per_partition_labels():
    per_topic = CollectorRegistry()
    t = TopicMetrics(per_topic)
    t.appended("a", 0, 100, 5)
    t.appended("a", 1, 50, 2)
    t.fetched("a", 0, 100, 5)
    t.fetched("a", 1, 20, 1)
    v = values(per_topic)
    assert v[("gregor_topic_records_out_total", (("topic", "a"),))] == 6
    assert v[("gregor_topic_bytes_out_total", (("topic", "a"),))] == 120
    assert v[("gregor_topic_records_in_total", (("topic", "a"),))] == 7
    assert not [k for k in v if ("partition", "0") in k[1]]

    per_partition = CollectorRegistry()
    t = TopicMetrics(per_partition, partition_labels=True)
    t.appended("a", 0, 100, 5)
    t.appended("a", 1, 50, 2)
    t.fetched("a", 1, 20, 1)
    t.appended("b", 0, 1, 1)
    v = values(per_partition)
    assert v[("gregor_topic_records_in_total", (("partition", "0"), ("topic", "a")))] == 5
    assert v[("gregor_topic_records_in_total", (("partition", "1"), ("topic", "a")))] == 2
    assert v[("gregor_topic_records_out_total", (("partition", "1"), ("topic", "a")))] == 1
    assert not [k for k in v if k[0].startswith("gregor_topic") and len(k[1]) != 2]
    t.forget("a")  # every partition's series go
    v = values(per_partition)
    assert not [k for k in v if ("topic", "a") in k[1]]
    assert v[("gregor_topic_bytes_in_total", (("partition", "0"), ("topic", "b")))] == 1


def test_topic_counters_from_many_threads_add_up():
    """Each thread counts in cells of its own; a scrape (here, during the counting too) sums
    them, and a thread's counts stay after it ends."""
    registry = CollectorRegistry()
    t = TopicMetrics(registry)
    n_threads, n = 4, 5000
    start = threading.Barrier(n_threads + 1)

    def count() -> None:
        start.wait()
        for _ in range(n):
            t.appended("a", 0, 10, 1)
            t.fetched("a", 0, 3, 1)

    threads = [threading.Thread(target=count) for _ in range(n_threads)]
    for th in threads:
        th.start()
    start.wait()
    during = values(registry).get(("gregor_topic_records_in_total", (("topic", "a"),)), 0)
    assert 0 <= during <= n_threads * n
    for th in threads:
        th.join()
    v = values(registry)
    assert v[("gregor_topic_bytes_in_total", (("topic", "a"),))] == 10 * n_threads * n
    assert v[("gregor_topic_records_in_total", (("topic", "a"),))] == n_threads * n
    assert v[("gregor_topic_bytes_out_total", (("topic", "a"),))] == 3 * n_threads * n
    assert v[("gregor_topic_records_out_total", (("topic", "a"),))] == n_threads * n


def _led(topic, partition, state: PartitionState, end: int):
    return SimpleNamespace(
        topic=topic,
        partition=partition,
        followers=state.followers,
        log=SimpleNamespace(end_offset=end),
    )


class _Lag:
    def __init__(self, leaders, partition_labels, now):
        self.collect = lambda: replica_lag(leaders, partition_labels, now)


def test_follower_lag_in_records_and_seconds_from_the_replication_state():
    t0 = 1_000_000
    # led since t0; follower 2 in the ISR, 3 not (it has never caught up)
    a0 = PartitionState(node_id=1)
    a0.become_leader(t0, 1, 1, (1, 2, 3), (1, 2), 0, 0, 0)
    a0.on_follower_fetch(2, 100, t0 + 500, 100, 100)  # caught up at t0 + 500
    a0.on_follower_fetch(3, 40, t0 + 600, 100, 100)  # 60 behind
    a1 = PartitionState(node_id=1)
    a1.become_leader(t0 + 1000, 1, 1, (1, 2), (1, 2), 0, 0, 0)
    a1.on_follower_fetch(2, 10, t0 + 1500, 10, 10)  # caught up
    b0 = PartitionState(node_id=1)
    b0.become_leader(t0, 1, 1, (1,), (1,), 0, 0, 0)  # no followers
    leaders = [_led("a", 0, a0, 100), _led("a", 1, a1, 10), _led("b", 0, b0, 7)]
    now = t0 + 3000

    registry = CollectorRegistry()
    registry.register(_Lag(leaders, False, now))
    v = values(registry)
    assert v[("gregor_replica_lag_records", (("topic", "a"),))] == 60
    # follower 3 of a-0 never caught up: tracked since the leader began, t0
    assert v[("gregor_replica_lag_seconds", (("topic", "a"),))] == 3.0
    assert v[("gregor_replica_lag_records", (("topic", "b"),))] == 0
    assert v[("gregor_replica_lag_seconds", (("topic", "b"),))] == 0

    registry = CollectorRegistry()
    registry.register(_Lag(leaders, True, now))
    v = values(registry)
    assert v[("gregor_replica_lag_seconds", (("partition", "1"), ("topic", "a")))] == 1.5
    assert v[("gregor_replica_lag_records", (("partition", "1"), ("topic", "a")))] == 0
    assert v[("gregor_replica_lag_seconds", (("partition", "0"), ("topic", "a")))] == 3.0

    # follower 3 catches up: a-0's lag is then follower 2's, since its last fetch at the end
    a0.on_follower_fetch(3, 100, t0 + 2800, 100, 100)
    registry = CollectorRegistry()
    registry.register(_Lag(leaders, True, now))
    v = values(registry)
    assert v[("gregor_replica_lag_records", (("partition", "0"), ("topic", "a")))] == 0
    assert v[("gregor_replica_lag_seconds", (("partition", "0"), ("topic", "a")))] == 2.5


def test_quorum_commit_latency_and_leader_changes(tmp_path):
    """Three voters exchange messages on one loop: each learns the first leader (1 change),
    proposals on the leader are timed from append to commit, a leadership transfer counts
    one more change everywhere."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        logs: dict[int, RaftMetadataLog] = {}

        def send(to: int, message: dict) -> None:
            loop.call_soon(
                lambda: to in logs and not logs[to]._closed and logs[to].receive(message)
            )

        for i in (1, 2, 3):
            logs[i] = RaftMetadataLog(
                i,
                [1, 2, 3],
                str(tmp_path / str(i)),
                send=send,
                tick_ms=5,
                election_timeout_ticks=6,
                rng=random.Random(i),
            )
        registries = {}
        for i, log in logs.items():
            registries[i] = CollectorRegistry()
            QuorumMetrics(registries[i], log)
            image = SimpleNamespace(topics={}, brokers={}, offset=-1)
            registries[i].register(QuorumCollector(log, lambda image=image: image))
        for log in logs.values():
            log.start(loop)

        def leader():
            return next((log for log in logs.values() if log.is_leader()), None)

        await async_wait_until(lambda: leader() is not None, 20, "a leader")
        first = leader()
        await async_wait_until(
            lambda: all(log.node.leader_id == first.node_id for log in logs.values()),
            20,
            "every voter knows the leader",
        )
        for _ in range(5):
            target = first.append([b"r"])
            await async_wait_until(lambda t=target: first.committed_offset() >= t, 20, "commit")
        v = values(registries[first.node_id])
        assert v[("gregor_raft_commit_latency_seconds_count", ())] == 5
        assert v[("gregor_raft_commit_latency_seconds_sum", ())] > 0
        for i in logs:
            assert values(registries[i])[("gregor_raft_leader_changes_total", ())] == 1
        for i in logs:  # followers time nothing
            if i != first.node_id:
                assert values(registries[i])[("gregor_raft_commit_latency_seconds_count", ())] == 0
        first.transfer_leadership()
        await async_wait_until(
            lambda: all(log.node.leader_id not in (None, first.node_id) for log in logs.values()),
            20,
            "a new leader known everywhere",
        )
        for i in logs:
            assert values(registries[i])[("gregor_raft_leader_changes_total", ())] == 2
        for log in logs.values():
            log.close()

    asyncio.run(main())


class _Coordinator:
    def snapshot(self):
        return [("g", "stable", 2, {("t", 0): 5, ("t", 1): 7, ("gone", 0): 1})]


@pytest.mark.parametrize("partition_labels", [False, True])
def test_group_lag_per_topic_or_per_partition(partition_labels):
    from broker.group_metrics import GroupCollector

    hw = {("t", 0): 10, ("t", 1): 7}
    rm = SimpleNamespace(
        get_partition=lambda t, p: (
            SimpleNamespace(high_watermark=hw[(t, p)]) if (t, p) in hw else None
        )
    )
    registry = CollectorRegistry()
    registry.register(GroupCollector(_Coordinator(), rm, partition_labels))
    lag = {k[1]: x for k, x in values(registry).items() if k[0] == "gregor_group_lag_records"}
    if partition_labels:
        assert lag == {
            (("group", "g"), ("partition", "0"), ("topic", "t")): 5,
            (("group", "g"), ("partition", "1"), ("topic", "t")): 0,
        }
    else:
        assert lag == {(("group", "g"), ("topic", "t")): 5}
    assert values(registry)[("gregor_group_lag_unknown_partitions", ())] == 1
