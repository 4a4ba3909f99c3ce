"""AlterPartition on the QuorumController: a leader's ISR changes, guarded by the leader and
partition epochs, and refused for brokers that may not join an ISR (KIP-841)."""

from __future__ import annotations

from test_controller import E, beat, env, topic, up  # noqa: F401  (env is a fixture)


def test_alter_partition(env):  # noqa: F811
    c, _, _ = env
    e = up(c, 1, 2, 3)
    c.replication.create_topics(
        [topic("t", assignments=[{"partition": 0, "broker_ids": [1, 2, 3]}])]
    )

    def req(isr, leader_epoch=0, partition_epoch=0, name="t", p=0):
        return [
            {
                "name": name,
                "partitions": [
                    {
                        "partition": p,
                        "leader_epoch": leader_epoch,
                        "new_isr": isr,
                        "partition_epoch": partition_epoch,
                    }
                ],
            }
        ]

    resp = c.replication.alter_partition(1, e[1], req([1, 2]))
    part = resp["topics"][0]["partitions"][0]
    assert resp["error_code"] == 0 and part["error_code"] == 0
    assert (part["isr"], part["partition_epoch"], part["leader_epoch"], part["leader_id"]) == (
        [1, 2],
        1,
        0,
        1,
    )
    # stale partition epoch (the retried old request) is refused
    part = c.replication.alter_partition(1, e[1], req([1]))["topics"][0]["partitions"][0]
    assert part["error_code"] == E.INVALID_UPDATE_VERSION and part["partition_epoch"] == 1
    part = c.replication.alter_partition(1, e[1], req([1], leader_epoch=5, partition_epoch=1))[
        "topics"
    ][0]["partitions"][0]
    assert part["error_code"] == E.FENCED_LEADER_EPOCH
    part = c.replication.alter_partition(2, e[2], req([2], partition_epoch=1))["topics"][0][
        "partitions"
    ][0]
    assert part["error_code"] == E.NOT_LEADER_OR_FOLLOWER
    part = c.replication.alter_partition(1, e[1], req([2, 3], partition_epoch=1))["topics"][0][
        "partitions"
    ][0]
    assert part["error_code"] == E.INVALID_REQUEST, "ISR must contain the leader"
    part = c.replication.alter_partition(1, e[1], req([1], name="zz"))["topics"][0]["partitions"][0]
    assert part["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert c.replication.alter_partition(1, 12345, req([1]))["error_code"] == E.STALE_BROKER_EPOCH
    part = c.replication.alter_partition(1, e[1], req([1, 2, 3], partition_epoch=1))["topics"][0][
        "partitions"
    ][0]
    assert part["error_code"] == 0 and part["isr"] == [1, 2, 3] and part["partition_epoch"] == 2


def test_alter_partition_refuses_ineligible_replicas(env):  # noqa: F811
    """KIP-841: an ISR expansion adding a fenced broker, or one in a controlled shutdown, is
    refused with INELIGIBLE_REPLICA (a broker shutting down still fetches until it stops; taken
    back into the ISR, it held every acks=all write of the partition until it lagged out)."""
    from controller.metadata.image import PartitionRegistration
    from controller.quorum.replication import check_isr_change

    c, clock, _ = env
    e = up(c, 1, 2, 3)
    c.replication.create_topics(
        [topic("t", assignments=[{"partition": 0, "broker_ids": [1, 2, 3]}])]
    )
    clock.advance(1000)
    beat(c, e, 1, 2)
    assert c.cluster.check_sessions() == [3]
    reg = c.image.partition("t", 0)
    assert reg is not None and 3 not in reg.isr
    req = [{"name": "t", "partitions": [{"partition": 0, "leader_epoch": reg.leader_epoch,
            "new_isr": [*reg.isr, 3], "partition_epoch": reg.partition_epoch}]}]  # fmt: skip
    part = c.replication.alter_partition(reg.leader, e[reg.leader], req)["topics"][0]["partitions"][
        0
    ]
    assert part["error_code"] == E.INELIGIBLE_REPLICA
    # the pure rule: eligibility is what the cluster manager says (a broker in a controlled
    # shutdown is unfenced until its changes are written, and not eligible all the same)
    shutting = PartitionRegistration((1, 2, 3), (1, 2), 1, 0, 0)
    request = {"leader_epoch": 0, "partition_epoch": 0, "new_isr": [1, 2, 3]}
    assert check_isr_change(shutting, 1, request, {1, 2}) == (E.INELIGIBLE_REPLICA, None)
    assert check_isr_change(shutting, 1, request, {1, 2, 3}) == (E.NONE, (1, 2, 3))
