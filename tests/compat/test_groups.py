"""The classic group protocol through the Kafka listener with confluent-kafka (librdkafka):
two members of one group split the partitions and rebalance when one leaves; commits made in
the group are resumed by the next member and seen by Gregor's admin client."""

from __future__ import annotations

import pytest
from helpers import wait_until

from client import Admin

ck = pytest.importorskip("confluent_kafka")


def _consumer(bootstrap: str, group: str, **extra: object):
    return ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200,
            **extra,
        }
    )


def _owned(c) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def test_group_of_two_splits_partitions_and_rebalances(kafka_broker) -> None:
    with Admin(bootstrap_servers=kafka_broker.gregor) as admin:
        admin.create_topic("grp", partitions=4)
    a = _consumer(kafka_broker.kafka, "g2")
    b = _consumer(kafka_broker.kafka, "g2")
    try:
        a.subscribe(["grp"])
        wait_until(lambda: a.poll(0.1) is None and _owned(a) == {0, 1, 2, 3}, 30, "a owns all")
        b.subscribe(["grp"])

        def split() -> bool:
            a.poll(0.1)
            b.poll(0.1)
            return _owned(a) | _owned(b) == {0, 1, 2, 3} and len(_owned(a)) == 2 == len(_owned(b))

        wait_until(split, 60, "the partitions split between the two members")
        assert not _owned(a) & _owned(b)
        b.close()  # LeaveGroup: a takes everything back
        wait_until(lambda: a.poll(0.1) is None and _owned(a) == {0, 1, 2, 3}, 60, "a owns all")
    finally:
        a.close()


def test_commit_in_group_and_resume(kafka_broker) -> None:
    p = ck.Producer({"bootstrap.servers": kafka_broker.kafka, "enable.idempotence": True})
    for i in range(30):
        p.produce("resume", b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    c = _consumer(kafka_broker.kafka, "g-resume")
    try:
        c.subscribe(["resume"])
        got: list = []
        wait_until(lambda: got.extend(c.consume(10 - len(got), 0.2)) or len(got) >= 10, 60, "10")
        assert [m.offset() for m in got] == list(range(10))
        c.commit(message=got[-1], asynchronous=False)  # commits offset 10
    finally:
        c.close()
    c = _consumer(kafka_broker.kafka, "g-resume")
    try:
        c.subscribe(["resume"])
        rest: list = []
        wait_until(lambda: rest.extend(c.consume(20 - len(rest), 0.2)) or len(rest) >= 20, 60, "20")
        assert [m.offset() for m in rest] == list(range(10, 30))
    finally:
        c.close()
    with Admin(bootstrap_servers=kafka_broker.gregor) as admin:
        described = admin.describe_group("g-resume")
    assert [(x.topic, x.partition, x.committed_offset) for x in described.partitions] == [
        ("resume", 0, 10)
    ]


def test_admin_lists_describes_and_deletes_classic_groups(kafka_broker) -> None:
    from confluent_kafka.admin import AdminClient

    with Admin(bootstrap_servers=kafka_broker.gregor) as admin:
        admin.create_topic("adm", partitions=2)
    a = AdminClient({"bootstrap.servers": kafka_broker.kafka})
    c = _consumer(kafka_broker.kafka, "g-admin")
    try:
        c.subscribe(["adm"])
        wait_until(lambda: c.poll(0.1) is None and _owned(c) == {0, 1}, 30, "assigned")
        listed = a.list_consumer_groups().result(30)
        states = {g.group_id: g.state.name for g in listed.valid}
        assert states["g-admin"] == "STABLE"
        [described] = [f.result(30) for f in a.describe_consumer_groups(["g-admin"]).values()]
        assert described.partition_assignor == "range" and not described.is_simple_consumer_group
        [member] = described.members
        assert {tp.partition for tp in member.assignment.topic_partitions} == {0, 1}
        with pytest.raises(ck.KafkaException) as err:
            a.delete_consumer_groups(["g-admin"])["g-admin"].result(30)
        assert err.value.args[0].code() == ck.KafkaError.NON_EMPTY_GROUP
        c.commit(offsets=[ck.TopicPartition("adm", 0, 0)], asynchronous=False)
    finally:
        c.close()
    a.delete_consumer_groups(["g-admin"])["g-admin"].result(30)


def test_kip848_consumer_shares_a_group_with_the_gregor_client(kafka_broker) -> None:
    """group.protocol=consumer: librdkafka heartbeats to Gregor's own coordinator, in the same
    group as a Gregor client; the partitions split between the two."""
    from client import Consumer as GregorConsumer

    with Admin(bootstrap_servers=kafka_broker.gregor) as admin:
        admin.create_topic("k848", partitions=4)
    k = ck.Consumer(
        {"bootstrap.servers": kafka_broker.kafka, "group.id": "g848",
         "group.protocol": "consumer", "auto.offset.reset": "earliest"}
    )  # fmt: skip
    try:
        k.subscribe(["k848"])
        wait_until(lambda: k.poll(0.1) is None and _owned(k) == {0, 1, 2, 3}, 60, "k owns all")
        with GregorConsumer(bootstrap_servers=kafka_broker.gregor, group_id="g848") as g:
            g.subscribe(["k848"])

            def split() -> bool:
                k.poll(0.1)
                g.poll(0.1)
                mine = {tp.partition for tp in g.assignment()}
                return len(mine) == 2 and _owned(k) == {0, 1, 2, 3} - mine

            wait_until(split, 60, "the partitions split between the two protocols' members")
    finally:
        k.close()


def test_admin_describes_a_kip848_group_with_consumer_group_describe(kafka_broker) -> None:
    """confluent-kafka's describe_consumer_groups sends ConsumerGroupDescribe (API 69) first:
    a KIP-848 group is described by Gregor's coordinator, members, epochs and assignment
    included; a classic group and an unknown one answer GROUP_ID_NOT_FOUND to API 69 (the
    client then falls back to DescribeGroups, which tells what the classic group is)."""
    from confluent_kafka.admin import AdminClient
    from kio.schema.consumer_group_describe.v1 import request as cgd

    from compat.test_wire_quirks import _request

    with Admin(bootstrap_servers=kafka_broker.gregor) as admin:
        admin.create_topic("cgd", partitions=3)
    k = ck.Consumer(
        {"bootstrap.servers": kafka_broker.kafka, "group.id": "g-cgd", "client.id": "cgd-1",
         "group.protocol": "consumer", "auto.offset.reset": "earliest"}
    )  # fmt: skip
    c = _consumer(kafka_broker.kafka, "g-cgd-classic")
    try:
        k.subscribe(["cgd"])
        wait_until(lambda: k.poll(0.1) is None and _owned(k) == {0, 1, 2}, 60, "k owns all")
        c.subscribe(["cgd"])
        wait_until(lambda: c.poll(0.1) is None and _owned(c) == {0, 1, 2}, 30, "c owns all")
        a = AdminClient({"bootstrap.servers": kafka_broker.kafka})
        [described] = [f.result(30) for f in a.describe_consumer_groups(["g-cgd"]).values()]
        assert described.type == ck.ConsumerGroupType.CONSUMER
        assert described.state == ck.ConsumerGroupState.STABLE
        [member] = described.members
        assert member.client_id == "cgd-1" and member.member_id
        assert {(tp.topic, tp.partition) for tp in member.assignment.topic_partitions} == {
            ("cgd", 0),
            ("cgd", 1),
            ("cgd", 2),
        }
        raw = cgd.ConsumerGroupDescribeRequest(
            group_ids=("g-cgd", "g-cgd-classic", "g-nobody"), include_authorized_operations=False
        )
        answer = _request(kafka_broker.kafka, 69, 1, raw)
        native, classic, nobody = answer.groups
        assert native.error_code == 0 and native.group_state == "Stable"
        assert native.group_epoch >= 1 and native.assignment_epoch == native.group_epoch
        [m] = native.members
        assert m.member_type == 1 and m.subscribed_topic_names == ("cgd",)
        [tps] = m.target_assignment.topic_partitions
        assert tps.topic_name == "cgd" and sorted(tps.partitions) == [0, 1, 2]
        assert tps.topic_id is not None and tps.topic_id.int != 0
        assert classic.error_code == 69 and nobody.error_code == 69  # GROUP_ID_NOT_FOUND
        [old] = [f.result(30) for f in a.describe_consumer_groups(["g-cgd-classic"]).values()]
        assert old.type == ck.ConsumerGroupType.CLASSIC and len(old.members) == 1
    finally:
        k.close()
        c.close()


def test_offset_delete_refuses_subscribed_topics_and_deletes_the_rest(kafka_broker) -> None:
    """OffsetDelete (47) with kafka-python's admin: a partition of a topic the classic group's
    member subscribes to is GROUP_SUBSCRIBED_TO_TOPIC, another topic's offset is deleted; once
    the group is empty every offset may go; an unknown group is GROUP_ID_NOT_FOUND."""
    kafka = pytest.importorskip("kafka")
    errors = pytest.importorskip("kafka.errors")
    with Admin(bootstrap_servers=kafka_broker.gregor) as admin:
        admin.create_topic("od-a", partitions=1)
        admin.create_topic("od-b", partitions=1)
    a, b = kafka.TopicPartition("od-a", 0), kafka.TopicPartition("od-b", 0)
    admin = kafka.KafkaAdminClient(bootstrap_servers=kafka_broker.kafka)
    c = _consumer(kafka_broker.kafka, "g-od")
    try:
        c.subscribe(["od-a"])
        wait_until(lambda: c.poll(0.1) is None and _owned(c) == {0}, 30, "assigned")
        c.commit(offsets=[ck.TopicPartition("od-a", 0, 3), ck.TopicPartition("od-b", 0, 5)],
                 asynchronous=False)  # fmt: skip
        assert admin.delete_group_offsets("g-od", [a, b]) == {
            a: errors.GroupSubscribedToTopicError,
            b: errors.NoError,
        }
        left = admin.list_group_offsets("g-od")["g-od"]
        assert {tp: o.offset for tp, o in left.items()} == {a: 3}
    finally:
        c.close()
    assert admin.delete_group_offsets("g-od", [a]) == {a: errors.NoError}
    assert admin.list_group_offsets("g-od")["g-od"] == {}
    with pytest.raises(errors.GroupIdNotFoundError):
        admin.delete_group_offsets("g-od-nobody", [a])
    admin.close()


def test_send_offsets_to_transaction_from_a_classic_group_member(kafka_broker) -> None:
    """TxnOffsetCommit v3 (KIP-447) carrying a classic group member's id and generation (as
    librdkafka's 0103 sends them): checked against the classic group, then committed with the
    transaction; an aborted transaction's offsets are dropped."""
    with Admin(bootstrap_servers=kafka_broker.gregor) as admin:
        admin.create_topic("ctx-in", partitions=1)
        admin.create_topic("ctx-out", partitions=1)
    c = _consumer(kafka_broker.kafka, "g-ctx")
    p = ck.Producer({"bootstrap.servers": kafka_broker.kafka, "transactional.id": "g-ctx-app"})
    try:
        c.subscribe(["ctx-in"])
        wait_until(lambda: c.poll(0.1) is None and _owned(c) == {0}, 30, "assigned")
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("ctx-out", b"out", partition=0)
        p.send_offsets_to_transaction(
            [ck.TopicPartition("ctx-in", 0, 6)], c.consumer_group_metadata(), 30
        )
        p.commit_transaction(30)
        p.begin_transaction()
        p.send_offsets_to_transaction(
            [ck.TopicPartition("ctx-in", 0, 9)], c.consumer_group_metadata(), 30
        )
        p.abort_transaction(30)
        (got,) = c.committed([ck.TopicPartition("ctx-in", 0)], timeout=30)
        assert got.offset == 6
    finally:
        c.close()
        p.flush(1)


def test_alter_offsets_from_outside_is_refused_while_the_group_has_members(kafka_broker) -> None:
    """AlterConsumerGroupOffsets (an OffsetCommit with generation -1 and no member id) is
    UNKNOWN_MEMBER_ID while the classic group has members, as Kafka answers (librdkafka's
    0081 do_test_AlterConsumerGroupOffsets); once the group is empty it is stored."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    with Admin(bootstrap_servers=kafka_broker.gregor) as admin:
        admin.create_topic("alt", partitions=1)
    a = AdminClient({"bootstrap.servers": kafka_broker.kafka})
    req = ConsumerGroupTopicPartitions("g-alt", [ck.TopicPartition("alt", 0, 7)])
    c = _consumer(kafka_broker.kafka, "g-alt")
    try:
        c.subscribe(["alt"])
        wait_until(lambda: c.poll(0.1) is None and _owned(c) == {0}, 30, "assigned")
        refused = a.alter_consumer_group_offsets([req])["g-alt"].result(30)
        [tp] = refused.topic_partitions
        assert tp.error is not None and tp.error.code() == ck.KafkaError.UNKNOWN_MEMBER_ID
        assert c.committed([ck.TopicPartition("alt", 0)], 30)[0].offset == ck.OFFSET_INVALID
    finally:
        c.close()
    done = a.alter_consumer_group_offsets([req])["g-alt"].result(30)
    assert [(tp.partition, tp.offset, tp.error) for tp in done.topic_partitions] == [(0, 7, None)]
