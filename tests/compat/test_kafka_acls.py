"""ACLs through the KAFKA listener with a real Kafka client (confluent-kafka / librdkafka):
a SCRAM user without ACLs is refused (TOPIC_AUTHORIZATION_FAILED on produce, as Kafka
answers), the super user creates the ACL with librdkafka's CreateAcls, the same produce then
succeeds, DescribeAcls lists the ACL and DeleteAcls removes it, after which the user is
refused again. The broker (its own, with the authorizer on) has one KAFKA listener on
SASL_PLAINTEXT; `admin` comes from sasl.scram.bootstrap.file and is the only super user."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from helpers import broker_config, wait_until

ck = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from broker.server import BrokerServer
    from client import Admin

    d = tmp_path_factory.mktemp("kafka-acl-broker")
    users = d / "users.txt"
    users.write_text("SCRAM-SHA-256=[name=admin,password=admin-pw-77]\n")
    cfg = broker_config(
        d / "data",
        listeners="GREGOR://127.0.0.1:0,KSASL://127.0.0.1:0",
        **{
            "inter.broker.listener.name": "GREGOR",
            "listener.protocol.map": "KSASL:KAFKA",
            "listener.security.protocol.map": "GREGOR:SASL_PLAINTEXT,KSASL:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "sasl.scram.bootstrap.file": str(users),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
            "sasl.inter.broker.username": "admin",  # (a single broker has no followers)
            "sasl.inter.broker.password": "admin-pw-77",
        },
    )
    server = BrokerServer(cfg)
    server.start()
    try:
        ports = {e.name: e.port for e in server.listeners.bind}
        gregor = {
            "bootstrap_servers": f"127.0.0.1:{ports['GREGOR']}",
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_username": "admin",
            "sasl_password": "admin-pw-77",
        }
        with Admin(**gregor) as admin:
            admin.create_user("alice", "alice-pw-77", mechanism="SCRAM-SHA-256")
            admin.create_topic("kt", 1, 1)
        server.kafka_address = f"127.0.0.1:{ports['KSASL']}"
        yield server
    finally:
        server.shutdown(timeout=10.0)


def _conf(b: Any, user: str, password: str) -> dict:
    return {
        "bootstrap.servers": b.kafka_address,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": password,
    }


def _produce(b: Any) -> Any:
    """One record to kt as alice: the delivery error (None: delivered)."""
    p = ck.Producer({**_conf(b, "alice", "alice-pw-77"), "message.timeout.ms": 10_000})
    result: list = []
    p.produce("kt", value=b"hello", partition=0, on_delivery=lambda err, _m: result.append(err))
    p.flush(30)
    assert len(result) == 1
    return result[0]


def _binding() -> Any:
    return admin_mod.AclBinding(
        admin_mod.ResourceType.TOPIC, "kt", admin_mod.ResourcePatternType.LITERAL,
        "User:alice", "*", admin_mod.AclOperation.WRITE, admin_mod.AclPermissionType.ALLOW,
    )  # fmt: skip


def test_refused_then_allowed_through_kafkas_own_acl_apis(acl_broker) -> None:
    err = _produce(acl_broker)
    assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    admin = admin_mod.AdminClient(_conf(acl_broker, "admin", "admin-pw-77"))
    for f in admin.create_acls([_binding()], request_timeout=30).values():
        assert f.result(30) is None
    image_acls = lambda: acl_broker.node.publisher.image.acls  # noqa: E731
    wait_until(lambda: len(image_acls()) == 1, 30, "the ACL in the broker's image")
    assert _produce(acl_broker) is None  # allowed now (WRITE implies the DESCRIBE it asks)
    flt = admin_mod.AclBindingFilter(
        admin_mod.ResourceType.ANY, None, admin_mod.ResourcePatternType.ANY, None, None,
        admin_mod.AclOperation.ANY, admin_mod.AclPermissionType.ANY,
    )  # fmt: skip
    listed = admin.describe_acls(flt, request_timeout=30).result(30)
    assert [(b.name, b.principal, b.operation) for b in listed] == [
        ("kt", "User:alice", admin_mod.AclOperation.WRITE)
    ]
    # a principal without ALTER on the cluster may not create ACLs
    alice_admin = admin_mod.AdminClient(_conf(acl_broker, "alice", "alice-pw-77"))
    with pytest.raises(ck.KafkaException) as e:
        for f in alice_admin.create_acls([_binding()], request_timeout=30).values():
            f.result(30)
    assert e.value.args[0].code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED, e.value
    deleted = admin.delete_acls([flt], request_timeout=30)[flt].result(30)
    assert [b.name for b in deleted] == ["kt"]
    wait_until(lambda: len(image_acls()) == 0, 30, "the ACL gone from the broker's image")
    err = _produce(acl_broker)
    assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, err


def _acl(rtype: Any, name: str, op: Any) -> Any:
    return admin_mod.AclBinding(
        rtype, name, admin_mod.ResourcePatternType.LITERAL, "User:alice", "*", op,
        admin_mod.AclPermissionType.ALLOW,
    )  # fmt: skip


def test_a_classic_group_needs_read_on_the_group(acl_broker) -> None:
    """librdkafka's classic consumer group: FindCoordinator passes with DESCRIBE on the group,
    JoinGroup is refused without READ (GROUP_AUTHORIZATION_FAILED); with READ the consumer
    joins, reads and commits."""
    admin = admin_mod.AdminClient(_conf(acl_broker, "admin", "admin-pw-77"))
    grants = [
        _acl(admin_mod.ResourceType.TOPIC, "kt", admin_mod.AclOperation.READ),
        _acl(admin_mod.ResourceType.TOPIC, "kt", admin_mod.AclOperation.WRITE),
        _acl(admin_mod.ResourceType.GROUP, "kg", admin_mod.AclOperation.DESCRIBE),
    ]
    for f in admin.create_acls(grants, request_timeout=30).values():
        assert f.result(30) is None
    image_acls = lambda: acl_broker.node.publisher.image.acls  # noqa: E731
    wait_until(lambda: len(image_acls()) == 3, 30, "the ACLs in the broker's image")
    assert _produce(acl_broker) is None
    conf = {**_conf(acl_broker, "alice", "alice-pw-77"), "group.id": "kg",
            "auto.offset.reset": "earliest", "enable.auto.commit": False}  # fmt: skip
    c = ck.Consumer(conf)
    try:
        c.subscribe(["kt"])
        errors: list = []

        def refused() -> bool:
            m = c.poll(0.5)
            if m is not None and m.error() is not None:
                errors.append(m.error())
            return any(e.code() == ck.KafkaError.GROUP_AUTHORIZATION_FAILED for e in errors)

        wait_until(refused, 30, "GROUP_AUTHORIZATION_FAILED from JoinGroup")
        listed = admin.list_consumer_groups(request_timeout=30).result(30).valid
        assert "kg" not in {g.group_id for g in listed}  # the refused join made no group
    finally:
        c.close()
    read = _acl(admin_mod.ResourceType.GROUP, "kg", admin_mod.AclOperation.READ)
    admin.create_acls([read], request_timeout=30)[read].result(30)
    wait_until(lambda: len(image_acls()) == 4, 30, "READ on the group")
    c = ck.Consumer(conf)
    try:
        c.subscribe(["kt"])
        got: list = []

        def read_one() -> bool:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m)
            return bool(got)

        wait_until(read_one, 60, "a record through the group")
        c.commit(message=got[0], asynchronous=False)
        listed = admin.list_consumer_groups(request_timeout=30).result(30).valid
        assert "kg" in {g.group_id for g in listed}
    finally:
        c.close()
    # the group admin APIs of the Kafka listener, as alice (DESCRIBE and READ on kg only)
    alice = admin_mod.AdminClient(_conf(acl_broker, "alice", "alice-pw-77"))
    listed = alice.list_consumer_groups(request_timeout=30).result(30).valid
    assert {g.group_id for g in listed} == {"kg"}  # what she may DESCRIBE, not every group
    futures = alice.describe_consumer_groups(["kg", "other-group"], request_timeout=30)
    assert futures["kg"].result(30).group_id == "kg"
    with pytest.raises(ck.KafkaException) as e:
        futures["other-group"].result(30)
    assert e.value.args[0].code() == ck.KafkaError.GROUP_AUTHORIZATION_FAILED
    with pytest.raises(ck.KafkaException) as e:  # DELETE on the group is not held
        alice.delete_consumer_groups(["kg"], request_timeout=30)["kg"].result(30)
    assert e.value.args[0].code() == ck.KafkaError.GROUP_AUTHORIZATION_FAILED
    listed = admin.list_consumer_groups(request_timeout=30).result(30).valid
    assert "kg" in {g.group_id for g in listed}  # not deleted


def test_alter_configs_needs_alter_configs(acl_broker) -> None:
    """AlterConfigs and IncrementalAlterConfigs as alice, who holds no ALTER_CONFIGS: the topic
    is refused with TOPIC_AUTHORIZATION_FAILED, the broker with CLUSTER_AUTHORIZATION_FAILED
    (ALTER_CONFIGS on the cluster), as Kafka answers; nothing changes."""
    alice = admin_mod.AdminClient(_conf(acl_broker, "alice", "alice-pw-77"))
    topic = admin_mod.ConfigResource(
        admin_mod.ResourceType.TOPIC, "kt", set_config={"retention.ms": "1000"}
    )
    broker = admin_mod.ConfigResource(
        admin_mod.ResourceType.BROKER, "1",
        incremental_configs=[admin_mod.ConfigEntry(
            "follower.replication.throttled.rate", "1048576",
            incremental_operation=admin_mod.AlterConfigOpType.SET)],
    )  # fmt: skip
    for fut, code in (
        (alice.alter_configs([topic])[topic], ck.KafkaError.TOPIC_AUTHORIZATION_FAILED),
        (alice.incremental_alter_configs([broker])[broker],
         ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED),
    ):  # fmt: skip
        with pytest.raises(ck.KafkaException) as e:
            fut.result(30)
        assert e.value.args[0].code() == code
    image = acl_broker.node.publisher.image
    assert image.topic_config("kt") == {} and image.config_for(4, "1") == {}


def test_offset_delete_needs_delete_on_the_group_and_read_on_the_topic(acl_broker) -> None:
    """OffsetDelete (47) as alice with kafka-python's admin: without DELETE on the group the
    whole request is GROUP_AUTHORIZATION_FAILED; with it, a partition of a topic she may not
    READ is TOPIC_AUTHORIZATION_FAILED and kept, the other one deleted."""
    kafka = pytest.importorskip("kafka")
    errors = pytest.importorskip("kafka.errors")
    admin = admin_mod.AdminClient(_conf(acl_broker, "admin", "admin-pw-77"))
    admin.create_topics([admin_mod.NewTopic("kt-od", 1, 1)])["kt-od"].result(30)
    c = ck.Consumer({**_conf(acl_broker, "admin", "admin-pw-77"), "group.id": "kod"})
    try:  # the super user commits both offsets (outside any generation)
        c.commit(offsets=[ck.TopicPartition("kt", 0, 1), ck.TopicPartition("kt-od", 0, 2)],
                 asynchronous=False)  # fmt: skip
    finally:
        c.close()
    alice = kafka.KafkaAdminClient(
        bootstrap_servers=acl_broker.kafka_address, security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
        sasl_plain_password="alice-pw-77",
    )  # fmt: skip
    kt, kt_od = kafka.TopicPartition("kt", 0), kafka.TopicPartition("kt-od", 0)
    # sent straight to the coordinator (node 1, the only broker): FindCoordinator would need
    # DESCRIBE on the group, and this checks OffsetDelete's own ACLs
    try:
        with pytest.raises(errors.GroupAuthorizationFailedError):
            alice.delete_group_offsets("kod", [kt, kt_od], group_coordinator_id=1)
        grants = [
            _acl(admin_mod.ResourceType.GROUP, "kod", admin_mod.AclOperation.DELETE),
            _acl(admin_mod.ResourceType.TOPIC, "kt", admin_mod.AclOperation.READ),
        ]
        for f in admin.create_acls(grants, request_timeout=30).values():
            f.result(30)
        expected = {kt: errors.NoError, kt_od: errors.TopicAuthorizationFailedError}

        def deleted() -> bool:  # retried until both grants reach the broker's image
            try:
                got = alice.delete_group_offsets("kod", [kt, kt_od], group_coordinator_id=1)
            except errors.GroupAuthorizationFailedError:
                return False
            return got == expected

        wait_until(deleted, 30, "kt's offset deleted, kt-od's refused")
    finally:
        alice.close()
    c = ck.Consumer({**_conf(acl_broker, "admin", "admin-pw-77"), "group.id": "kod"})
    try:
        got = c.committed([ck.TopicPartition("kt", 0), ck.TopicPartition("kt-od", 0)], 30)
        assert [(tp.topic, tp.offset) for tp in got] == [("kt", ck.OFFSET_INVALID), ("kt-od", 2)]
    finally:
        c.close()
