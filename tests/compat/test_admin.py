"""confluent-kafka's AdminClient through the Kafka listener: create a topic with a config,
describe its configs (every entry, the topic's own value marked as such), delete it; the
changes are Gregor's (its admin client sees them)."""

from __future__ import annotations

import pytest
from helpers import wait_until

from client import Admin

ck = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")


def test_create_describe_delete(kafka_broker) -> None:
    a = admin_mod.AdminClient({"bootstrap.servers": kafka_broker.kafka})
    new = admin_mod.NewTopic("admin-t", 3, 1, config={"retention.ms": "3600000"})
    a.create_topics([new])["admin-t"].result(30)
    with Admin(bootstrap_servers=kafka_broker.gregor) as gregor:
        wait_until(lambda: "admin-t" in gregor.list_topics(), 30, "topic visible natively")
    res = admin_mod.ConfigResource(admin_mod.ResourceType.TOPIC, "admin-t")
    configs = a.describe_configs([res])[res].result(30)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == admin_mod.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].source == admin_mod.ConfigSource.DEFAULT_CONFIG.value
    # creating it again is Kafka's TOPIC_ALREADY_EXISTS
    with pytest.raises(ck.KafkaException) as err:
        a.create_topics([admin_mod.NewTopic("admin-t", 1, 1)])["admin-t"].result(30)
    assert err.value.args[0].code() == ck.KafkaError.TOPIC_ALREADY_EXISTS
    a.delete_topics(["admin-t"])["admin-t"].result(30)
    with Admin(bootstrap_servers=kafka_broker.gregor) as gregor:
        wait_until(lambda: "admin-t" not in gregor.list_topics(), 30, "topic gone natively")


def test_partitions_configs_records_and_cluster(kafka_broker) -> None:
    a = admin_mod.AdminClient({"bootstrap.servers": kafka_broker.kafka})
    a.create_topics([admin_mod.NewTopic("more", 1, 1)])["more"].result(30)
    a.create_partitions([admin_mod.NewPartitions("more", 3)])["more"].result(30)
    with Admin(bootstrap_servers=kafka_broker.gregor) as gregor:
        wait_until(lambda: len(gregor.describe_topic("more").partitions) == 3, 30, "3 partitions")
    res = admin_mod.ConfigResource(
        admin_mod.ResourceType.TOPIC,
        "more",
        incremental_configs=[
            admin_mod.ConfigEntry(
                "retention.ms", "7200000",
                incremental_operation=admin_mod.AlterConfigOpType.SET,
            )
        ],
    )  # fmt: skip
    a.incremental_alter_configs([res])[res].result(30)
    described = a.describe_configs([admin_mod.ConfigResource("topic", "more")])
    assert next(iter(described.values())).result(30)["retention.ms"].value == "7200000"

    p = ck.Producer({"bootstrap.servers": kafka_broker.kafka})
    for i in range(10):
        p.produce("more", b"%d" % i, partition=0)
    assert p.flush(30) == 0
    done = a.delete_records([ck.TopicPartition("more", 0, 4)])
    [result] = [f.result(30) for f in done.values()]
    assert result.low_watermark == 4

    cluster = a.describe_cluster().result(30)
    port = int(kafka_broker.kafka.rsplit(":", 1)[1])
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(1, "localhost", port)]

    # preferred leader election: on one broker the leader already is the preferred one
    from confluent_kafka import ElectionType

    elected = a.elect_leaders(ElectionType.PREFERRED, [ck.TopicPartition("more", 0)]).result(30)
    [(tp, err)] = elected.items()
    assert (tp.topic, tp.partition) == ("more", 0)
    assert err is not None and err.code() == ck.KafkaError.ELECTION_NOT_NEEDED
