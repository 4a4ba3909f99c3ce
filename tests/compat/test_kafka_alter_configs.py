"""AlterConfigs (33) and IncrementalAlterConfigs (44) through the Kafka listener with real
clients (confluent-kafka's AdminClient, kafka-python's KafkaAdminClient): AlterConfigs replaces
a topic's whole set of dynamic configs (a key not named goes back to its default);
IncrementalAlterConfigs sets, deletes, appends to and subtracts from (list-typed keys only, else
INVALID_CONFIG); validate_only changes nothing; an unknown topic is
UNKNOWN_TOPIC_OR_PARTITION; a broker resource takes Gregor's dynamic broker key and refuses the
others. DescribeConfigs, Gregor's admin client and `gregor topics describe` see the result."""

from __future__ import annotations

import subprocess

import pytest
from helpers import gregor_command, wait_until

from client import Admin

ck = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")

SET, DELETE = admin_mod.AlterConfigOpType.SET, admin_mod.AlterConfigOpType.DELETE
APPEND, SUBTRACT = admin_mod.AlterConfigOpType.APPEND, admin_mod.AlterConfigOpType.SUBTRACT
DYNAMIC = admin_mod.ConfigSource.DYNAMIC_TOPIC_CONFIG.value


def _topic(kafka_broker, name: str, config: dict[str, str]) -> None:
    a = admin_mod.AdminClient({"bootstrap.servers": kafka_broker.kafka})
    a.create_topics([admin_mod.NewTopic(name, 1, 1, config=config)])[name].result(30)
    with Admin(bootstrap_servers=kafka_broker.gregor) as gregor:
        wait_until(lambda: name in gregor.list_topics(), 30, f"{name} visible natively")


def _described(a, name: str) -> dict:
    res = admin_mod.ConfigResource(admin_mod.ResourceType.TOPIC, name)
    return a.describe_configs([res])[res].result(30)


def _dynamic(a, name: str) -> dict[str, str]:
    return {k: e.value for k, e in _described(a, name).items() if e.source == DYNAMIC}


def _incremental(a, name: str, *ops: tuple[str, str | None, object], validate: bool = False):
    res = admin_mod.ConfigResource(
        admin_mod.ResourceType.TOPIC, name,
        incremental_configs=[
            admin_mod.ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops
        ],
    )  # fmt: skip
    return a.incremental_alter_configs([res], validate_only=validate)[res]


def _code(fut) -> int:
    with pytest.raises(ck.KafkaException) as err:
        fut.result(30)
    return err.value.args[0].code()


def test_alter_configs_replaces_the_whole_set(kafka_broker) -> None:
    _topic(kafka_broker, "ac-replace", {"retention.ms": "3600000", "segment.ms": "600000"})
    a = admin_mod.AdminClient({"bootstrap.servers": kafka_broker.kafka})
    assert _dynamic(a, "ac-replace") == {"retention.ms": "3600000", "segment.ms": "600000"}

    res = admin_mod.ConfigResource(
        admin_mod.ResourceType.TOPIC, "ac-replace", set_config={"retention.bytes": "1048576"}
    )
    a.alter_configs([res], validate_only=True)[res].result(30)
    assert _dynamic(a, "ac-replace") == {"retention.ms": "3600000", "segment.ms": "600000"}
    a.alter_configs([res])[res].result(30)
    # retention.ms and segment.ms were not named: back to their defaults
    assert _dynamic(a, "ac-replace") == {"retention.bytes": "1048576"}
    described = _described(a, "ac-replace")
    assert described["retention.ms"].source == admin_mod.ConfigSource.DEFAULT_CONFIG.value
    with Admin(bootstrap_servers=kafka_broker.gregor) as gregor:
        entries = gregor.describe_configs(topics=["ac-replace"])[("topic", "ac-replace")]
        assert {k for k, e in entries.items() if not e.is_default} == {"retention.bytes"}
    bs = ["--bootstrap-server", kafka_broker.gregor]
    out = subprocess.run(
        [*gregor_command(), "topics", "describe", "ac-replace", *bs],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "Configs: retention.bytes=1048576" in out.stdout

    # a bad value refuses the whole resource: nothing changes
    bad = admin_mod.ConfigResource(
        admin_mod.ResourceType.TOPIC, "ac-replace", set_config={"retention.ms": "soon"}
    )
    assert _code(a.alter_configs([bad])[bad]) == ck.KafkaError.INVALID_CONFIG
    assert _dynamic(a, "ac-replace") == {"retention.bytes": "1048576"}
    gone = admin_mod.ConfigResource(
        admin_mod.ResourceType.TOPIC, "ac-no-such-topic", set_config={"retention.ms": "1000"}
    )
    assert _code(a.alter_configs([gone])[gone]) == ck.KafkaError.UNKNOWN_TOPIC_OR_PART


def test_incremental_set_delete_append_subtract(kafka_broker) -> None:
    _topic(kafka_broker, "ac-incr", {"retention.ms": "3600000"})
    a = admin_mod.AdminClient({"bootstrap.servers": kafka_broker.kafka})
    _incremental(a, "ac-incr", ("cleanup.policy", "compact", APPEND)).result(30)
    # appended to the default (delete), as Kafka does for a key the topic has not set
    assert _dynamic(a, "ac-incr") == {"retention.ms": "3600000", "cleanup.policy": "delete,compact"}
    _incremental(a, "ac-incr", ("cleanup.policy", "compact", APPEND)).result(30)  # already there
    _incremental(
        a, "ac-incr", ("cleanup.policy", "delete", SUBTRACT), ("retention.ms", None, DELETE),
        ("segment.ms", "600000", SET),
    ).result(30)  # fmt: skip
    assert _dynamic(a, "ac-incr") == {"cleanup.policy": "compact", "segment.ms": "600000"}
    # validate_only: checked, not applied
    _incremental(a, "ac-incr", ("segment.ms", "700000", SET), validate=True).result(30)
    assert _dynamic(a, "ac-incr")["segment.ms"] == "600000"

    # APPEND/SUBTRACT on a key that is not a list: INVALID_CONFIG, nothing applied
    for op in (APPEND, SUBTRACT):
        fut = _incremental(a, "ac-incr", ("segment.ms", "1", op))
        assert _code(fut) == ck.KafkaError.INVALID_CONFIG
    # removing the last policy leaves no valid value
    fut = _incremental(a, "ac-incr", ("cleanup.policy", "compact", SUBTRACT))
    assert _code(fut) == ck.KafkaError.INVALID_CONFIG
    assert _dynamic(a, "ac-incr") == {"cleanup.policy": "compact", "segment.ms": "600000"}
    fut = _incremental(a, "ac-no-such-topic", ("segment.ms", "1", SET))
    assert _code(fut) == ck.KafkaError.UNKNOWN_TOPIC_OR_PART


def test_broker_resource(kafka_broker) -> None:
    """Broker resources: Gregor's dynamic broker key is set and deleted; any other is refused
    with INVALID_CONFIG; AlterConfigs on the broker replaces its dynamic set as well."""
    a = admin_mod.AdminClient({"bootstrap.servers": kafka_broker.kafka})
    key = "follower.replication.throttled.rate"

    def broker_res(**kw):
        return admin_mod.ConfigResource(admin_mod.ResourceType.BROKER, "1", **kw)

    def image_rate() -> str | None:
        image = kafka_broker.handle.server.node.publisher.image
        return image.config_for(4, "1").get(key)

    res = broker_res(incremental_configs=[
        admin_mod.ConfigEntry(key, "1048576", incremental_operation=SET)])  # fmt: skip
    a.incremental_alter_configs([res])[res].result(30)
    wait_until(lambda: image_rate() == "1048576", 30, "the rate in the broker's image")
    res = broker_res(incremental_configs=[
        admin_mod.ConfigEntry(key, "1", incremental_operation=APPEND)])  # fmt: skip
    assert _code(a.incremental_alter_configs([res])[res]) == ck.KafkaError.INVALID_CONFIG
    res = broker_res(set_config={"log.retention.ms": "1000"})
    assert _code(a.alter_configs([res])[res]) == ck.KafkaError.INVALID_CONFIG
    res = broker_res(set_config={})  # replaces the set with nothing: the rate is deleted
    a.alter_configs([res])[res].result(30)
    wait_until(lambda: image_rate() is None, 30, "the rate deleted")


def test_kafka_python_alter_configs(kafka_broker) -> None:
    kadmin = pytest.importorskip("kafka.admin")
    _topic(kafka_broker, "ac-kp", {})
    kp = kadmin.KafkaAdminClient(bootstrap_servers=kafka_broker.kafka, request_timeout_ms=30_000)
    try:
        # AlterConfigs (33); the client adds the topic's other dynamic keys itself
        res = kadmin.ConfigResource(kadmin.ConfigResourceType.TOPIC, "ac-kp",
                                    configs={"retention.ms": "7200000"})  # fmt: skip
        out = kp.alter_configs([res], incremental=False, raise_on_unknown=False)
        assert out == {"topic": {"ac-kp": "OK"}}
        # IncrementalAlterConfigs (44) with APPEND
        res = kadmin.ConfigResource(kadmin.ConfigResourceType.TOPIC, "ac-kp",
                                    configs={"cleanup.policy": ("APPEND", "compact")})  # fmt: skip
        out = kp.alter_configs([res], incremental=True, raise_on_unknown=False)
        assert out == {"topic": {"ac-kp": "OK"}}
        res = kadmin.ConfigResource(kadmin.ConfigResourceType.TOPIC, "ac-kp",
                                    configs={"retention.ms": ("APPEND", "1")})  # fmt: skip
        out = kp.alter_configs([res], incremental=True, raise_on_unknown=False)
        assert out["topic"]["ac-kp"].startswith("[Error 40] InvalidConfigurationError")
    finally:
        kp.close()
    a = admin_mod.AdminClient({"bootstrap.servers": kafka_broker.kafka})
    assert _dynamic(a, "ac-kp") == {"retention.ms": "7200000", "cleanup.policy": "delete,compact"}


def test_message_format_version_v2_accepted_older_refused(kafka_broker) -> None:
    """message.format.version (librdkafka's 0092 sets 0.10.0.0 with AlterConfigs): a version
    meaning the v2 record batch format, the only one Gregor writes, is kept and described;
    an older format is INVALID_CONFIG, saying why, and changes nothing."""
    _topic(kafka_broker, "ac-mfv", {"message.format.version": "0.11.0"})
    a = admin_mod.AdminClient({"bootstrap.servers": kafka_broker.kafka})
    assert _dynamic(a, "ac-mfv") == {"message.format.version": "0.11.0"}
    _incremental(a, "ac-mfv", ("message.format.version", "3.0-IV1", SET)).result(30)
    assert _dynamic(a, "ac-mfv") == {"message.format.version": "3.0-IV1"}
    old = admin_mod.ConfigResource(
        admin_mod.ResourceType.TOPIC, "ac-mfv", set_config={"message.format.version": "0.10.0.0"}
    )
    with pytest.raises(ck.KafkaException) as err:
        a.alter_configs([old])[old].result(30)
    assert err.value.args[0].code() == ck.KafkaError.INVALID_CONFIG
    assert "only the v2 record batch format" in err.value.args[0].str()
    assert _dynamic(a, "ac-mfv") == {"message.format.version": "3.0-IV1"}
