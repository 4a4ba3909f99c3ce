"""Brokers report replicas they could not create or open (BrokerHeartbeat.failed_replicas):
the controller moves their leadership and ISR membership, and gives a leader back when the
replica heals."""

from __future__ import annotations

from test_controller import beat, env, topic, up  # noqa: F401  (env is a fixture)

from controller.metadata import NO_LEADER


def test_failed_leader_replica_moves_to_another_isr_member(env):  # noqa: F811
    c, _, _ = env
    epochs = up(c, 1, 2, 3)
    c.replication.create_topics([topic("t", 3, 3)])
    led = [(p, reg) for p, reg in c.image.topics["t"].partitions.items() if reg.leader == 1]
    assert led
    p, _reg = led[0]
    hb = c.cluster.broker_heartbeat(1, epochs[1], c.last_written_offset, failed_replicas=[("t", p)])
    assert hb["error_code"] == 0
    reg = c.image.partition("t", p)
    assert reg.leader in (2, 3) and 1 not in reg.isr
    assert c.cluster.failed_replicas(1) == frozenset({("t", p)})
    # other partitions are untouched
    for q, other in c.image.topics["t"].partitions.items():
        if q != p:
            assert 1 in other.isr
    # the same report again changes nothing
    offset = c.last_written_offset
    c.cluster.broker_heartbeat(1, epochs[1], c.last_written_offset, failed_replicas=[("t", p)])
    assert c.last_written_offset == offset
    beat(c, epochs, 1)  # healed: reported no more
    assert c.cluster.failed_replicas(1) == frozenset()


def test_failed_sole_replica_goes_leaderless_and_returns_when_healed(env):  # noqa: F811
    c, _, _ = env
    epochs = up(c, 1)
    c.replication.create_topics([topic("solo", 2, 1)])
    hb = c.cluster.broker_heartbeat(
        1, epochs[1], c.last_written_offset, failed_replicas=[("solo", 1)]
    )
    assert hb["error_code"] == 0
    reg = c.image.partition("solo", 1)
    assert reg.leader == NO_LEADER and reg.isr == (1,)  # the last ISR member stays in it
    assert c.image.partition("solo", 0).leader == 1
    # unknown partitions in a report are ignored
    c.cluster.broker_heartbeat(
        1, epochs[1], c.last_written_offset, failed_replicas=[("solo", 1), ("x", 0)]
    )
    beat(c, epochs, 1)
    assert c.image.partition("solo", 1).leader == 1


def test_a_broker_leading_more_than_a_batch_reregisters_in_bounded_batches(env):  # noqa: F811
    """12,000 partitions led by one broker: its restart (leaderless all) and its unfencing
    (elected all) are written in batches the Raft log accepts (<= MAX_RECORDS_PER_BATCH + 1)."""
    from controller.quorum.state import MAX_RECORDS_PER_BATCH

    c, clock, log = env
    up(c, 1)
    assert c.replication.create_topics([topic("big", 6_000, 1)])[0]["error_code"] == 0
    [grown] = c.replication.create_partitions(
        [{"name": "big", "count": 12_000, "assignments": None}]
    )
    assert grown["error_code"] == 0  # (at most MAX_RECORDS_PER_USER_OP records per request)
    clock.advance(1500)  # the old incarnation's session is over (it was killed)
    sizes: list[int] = []
    append = log.append

    def spy(records):
        sizes.append(len(records))
        return append(records)

    log.append = spy
    r = c.cluster.register_broker(1, "127.0.0.1", 9001, None, "inc-again")
    assert r["error_code"] == 0
    assert all(reg.leader == NO_LEADER for reg in c.image.topics["big"].partitions.values())
    hb = c.cluster.broker_heartbeat(1, r["broker_epoch"], c.last_written_offset)
    assert not hb["is_fenced"]
    assert all(reg.leader == 1 for reg in c.image.topics["big"].partitions.values())
    assert max(sizes) <= MAX_RECORDS_PER_BATCH + 1 and sum(sizes) > 2 * 12_000, sizes
