"""The Kafka listener on a 3-controller, 3-broker cluster of real processes: every broker is
advertised to Kafka clients at its KAFKA address, an idempotent confluent-kafka producer
spreads over leaders on every broker, and keeps writing across a leader kill without losing
an acknowledged record or writing one twice (read back by Gregor's own client)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess

import pytest
from helpers import wait_until

from client import Admin, Consumer, TopicPartition

ck = pytest.importorskip("confluent_kafka")


def _read_all(bootstrap: str, topic: str, partitions: int, n: int) -> list:
    got: list = []
    with Consumer(bootstrap_servers=bootstrap) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        c.seek_to_beginning()
        wait_until(lambda: got.extend(c.poll(0.5)) or len(got) >= n, 60, f"{n} records")
        got.extend(c.poll(0.5))  # and nothing more
    return got


def test_kafka_clients_on_a_cluster_across_a_leader_kill(broker_cluster) -> None:
    _, brokers = broker_cluster(kafka=True)
    kcat = shutil.which("kcat")
    if kcat is not None:
        out = subprocess.run(
            [kcat, "-b", brokers.kafka_bootstrap(), "-L", "-J"],
            capture_output=True, timeout=60, check=True,
        )  # fmt: skip
        advertised = {b["id"]: b["name"] for b in json.loads(out.stdout)["brokers"]}
        assert advertised == {n: f"127.0.0.1:{p}" for n, p in brokers.kafka_ports.items()}
    # Kafka's admin client sends CreateTopics to the controller Metadata names: a broker
    # (which forwards it), as in KRaft, since clients cannot reach Gregor's controllers
    from confluent_kafka.admin import AdminClient, NewTopic

    kadmin = AdminClient({"bootstrap.servers": brokers.kafka_bootstrap()})
    assert kadmin.list_topics(timeout=30).controller_id in brokers.kafka_ports
    [created] = kadmin.create_topics([NewTopic("kc", 3, 3)], operation_timeout=30).values()
    created.result(60)
    p = ck.Producer(
        {"bootstrap.servers": brokers.kafka_bootstrap(), "enable.idempotence": True,
         "linger.ms": 5, "message.timeout.ms": 60_000}
    )  # fmt: skip
    acked: list = []

    def sent(err, msg) -> None:
        assert err is None, err
        acked.append(msg.value())

    for i in range(300):
        p.produce("kc", b"before-%d" % i, partition=i % 3, on_delivery=sent)
    assert p.flush(60) == 0
    # kill the leader of partition 0 (Gregor's admin says who), then keep producing
    with Admin(bootstrap_servers=brokers.bootstrap_all()) as admin:
        leader = admin.describe_topic("kc").partitions[0].leader
    brokers.stop(leader, signal.SIGKILL)
    for i in range(300):
        p.produce("kc", b"after-%d" % i, partition=i % 3, on_delivery=sent)
        p.poll(0)
    assert p.flush(90) == 0
    assert len(acked) == 600
    alive = ",".join(brokers.bootstrap(n) for n in brokers.procs)
    got = _read_all(alive, "kc", 3, 600)
    values = [r.value for r in got]
    assert sorted(values) == sorted(acked)  # every acknowledged record, once
    for part in range(3):
        mine = [r for r in got if r.partition == part]
        assert [r.offset for r in mine] == list(range(len(mine)))
