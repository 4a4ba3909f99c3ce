"""The fault harness's checker (tests/cluster/fault_checker.py, docs/fault-harness.md) on a
history written through the Kafka listener: a confluent-kafka (librdkafka) idempotent acks=all
producer writes unique values round-robin over 3 partitions (RF 3, min ISR 2) and a
confluent-kafka assign-mode reader reads every partition from offset 0, both through the
KAFKA listeners, while the leader of partition 0 is SIGKILLed and restarted. Every outcome goes
into a History (ok with its offset; NOT_ENOUGH_REPLICAS fail; anything else info), the final
read and the brokers' leader events are Gregor's own, and every check must hold: nothing
acknowledged lost, nothing duplicated or reordered, no gap, skip, phantom or aborted read."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest
from fault_checker import check
from fault_history import History
from fault_workload import IsrMonitor, final_read, leader_events
from helpers import wait_until

from client import Admin
from client.errors import GregorError

ck = pytest.importorskip("confluent_kafka")

TOPIC, PARTITIONS, MIN_ISR = "kchaos", 3, 2
PACE_S = 0.002
MAX_OUTSTANDING = 2000


class KafkaWorkload:
    """The fault workload's producer and reader, as Kafka clients (confluent-kafka)."""

    def __init__(self, bootstrap: str, history: History) -> None:
        self.bootstrap = bootstrap
        self.history = history
        self.stop_event = threading.Event()
        self.errors: list[BaseException] = []
        self.threads = [
            threading.Thread(target=self._guard, args=(self._produce,), name="k-p1"),
            threading.Thread(target=self._guard, args=(self._read,), name="k-r1"),
        ]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        self.stop_event.set()
        for t in self.threads:
            t.join(90)
        assert not any(t.is_alive() for t in self.threads), "workload threads did not stop"
        assert not self.errors, self.errors

    def acked_since(self, t: float) -> int:
        invoked = {e["op"] for e in list(self.history.entries)
                   if e["type"] == "invoke" and e["time"] >= t}  # fmt: skip
        return sum(
            1 for e in list(self.history.entries) if e["type"] == "ok" and e["op"] in invoked
        )

    def _guard(self, target) -> None:
        try:
            target()
        except BaseException as exc:  # (reported by stop())
            self.errors.append(exc)

    def _settle(self, op: int, err, msg) -> None:
        if err is None:
            self.history.ok(op, msg.offset())
        elif err.code() == ck.KafkaError.NOT_ENOUGH_REPLICAS:
            self.history.fail(op, err.str())  # refused before appending
        else:  # timeouts, lost connections, AFTER_APPEND, fatal idempotence errors: unknown
            self.history.info(op, err.str())

    def _produce(self) -> None:
        p = ck.Producer(
            {"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
             "linger.ms": 2, "max.in.flight.requests.per.connection": 5,
             "request.timeout.ms": 2000, "message.timeout.ms": 30_000,
             "retry.backoff.ms": 50, "topic.metadata.refresh.interval.ms": 1000}
        )  # fmt: skip
        seq = [0] * PARTITIONS
        i = 0
        while not self.stop_event.is_set():
            if len(p) >= MAX_OUTSTANDING:
                p.poll(0.05)
                continue
            part = i % PARTITIONS
            i += 1
            value = f"k1-{seq[part]}"
            seq[part] += 1
            op = self.history.invoke("k1", "send", part, value)
            p.produce(TOPIC, value.encode(), partition=part,
                      on_delivery=lambda err, msg, op=op: self._settle(op, err, msg))  # fmt: skip
            p.poll(0)
            self.stop_event.wait(PACE_S)
        # every write resolves: acknowledged, or failed by message.timeout.ms
        assert p.flush(60) == 0, "writes still unresolved 60 s after the workload stopped"

    def _read(self) -> None:
        c = ck.Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": "k-reader-unused",
             "enable.auto.commit": False, "auto.offset.reset": "earliest",
             "topic.metadata.refresh.interval.ms": 1000}
        )  # fmt: skip
        try:
            c.assign([ck.TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
            while not self.stop_event.is_set():
                for m in c.consume(500, timeout=0.1):
                    if m.error() is None:
                        self.history.polled("r1", m.partition(), m.offset(), m.value().decode())
        finally:
            c.close()


def _leader_of_p0(bootstrap: str) -> int | None:
    """None while the cluster cannot say (a failover under way)."""
    try:
        with Admin(bootstrap_servers=bootstrap, request_timeout_ms=2000) as admin:
            return admin.describe_topic(TOPIC).partitions[0].leader
    except GregorError:
        return None


@pytest.mark.long  # CI time; tests/cluster/test_kafka_listener.py kills a leader under a Kafka client in the default run
def test_checker_on_a_kafka_listener_history_across_a_leader_kill(
    broker_cluster, tmp_path: Path
) -> None:
    _, brokers = broker_cluster(kafka=True, min_insync_replicas=MIN_ISR)
    with Admin(bootstrap_servers=brokers.bootstrap_all()) as admin:
        admin.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    history = History(tmp_path / "kafka-history.jsonl")
    workload = KafkaWorkload(brokers.kafka_bootstrap(), history)
    monitor = IsrMonitor(brokers.bootstrap_all(), TOPIC, history)
    workload.start()
    monitor.start()
    try:
        t0 = time.monotonic()
        wait_until(lambda: workload.acked_since(t0) > 300, 60, "steady writes")
        leader = _leader_of_p0(brokers.bootstrap_all())
        assert leader is not None
        history.nemesis("start", "kill", node=leader)
        brokers.stop(leader, signal.SIGKILL)
        alive = ",".join(brokers.bootstrap(n) for n in brokers.procs)
        wait_until(lambda: _leader_of_p0(alive) not in (None, leader), 30, "a new p0 leader")
        killed = time.monotonic()
        wait_until(lambda: workload.acked_since(killed) > 300, 60, "writes after the kill")
        brokers.start(leader)
        history.nemesis("stop", "kill", node=leader)
        healed = time.monotonic()
        wait_until(lambda: workload.acked_since(healed) > 300, 60, "writes after the restart")
    finally:
        workload.stop()
        monitor.stop()
        history.close()
    final = final_read(brokers.bootstrap_all(), TOPIC, PARTITIONS)
    logs = {n: sorted(brokers.tmp.glob(f"broker-{n}.*.stderr")) for n in brokers.ports}
    report = check(history.entries, final, leader_events(logs, TOPIC), MIN_ISR)
    print(report)
    assert report["valid"], report["anomalies"]
    assert report["writes"]["ok"] > 900 and report["reads"] > 0
