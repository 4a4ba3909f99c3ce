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
