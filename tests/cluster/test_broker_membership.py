"""Brokers join a remote controller quorum (issue 11, first step): 3 `gregor controller` and 3
`gregor broker` processes on loopback. Brokers register through the network ControllerChannel,
follow the metadata log as observers, are unfenced once caught up, serve the partitions they
lead (replication factor 1 here: tests/cluster/test_replication.py replicates), are fenced when
killed, and rejoin at once when restarted; SIGTERM is a controlled shutdown."""

from __future__ import annotations

import signal
import time

import pytest
from helpers import known_partitions, poll_n, wait_until

from client import Admin, Consumer, Producer, TopicPartition
from client.errors import InvalidReplicationFactorError

SESSION_MS = 3000


@pytest.fixture
def cluster(broker_cluster):
    return broker_cluster(session_ms=SESSION_MS)


def _brokers(bootstrap: str) -> set[int]:
    with Admin(bootstrap_servers=bootstrap) as admin:
        return {x.node_id for x in admin.describe_cluster().brokers}


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's leader as `bootstrap` sees it; empty while that broker has not applied
    the topic yet."""
    return {p.partition: p.leader for p in known_partitions(bootstrap, topic) or []}


@pytest.mark.slow
def test_brokers_join_serve_fail_and_rejoin(cluster) -> None:
    _q, b = cluster
    wait_until(lambda: _brokers(b.bootstrap(4)) == {4, 5, 6}, 20, "3 unfenced brokers")
    with Admin(bootstrap_servers=b.bootstrap(4)) as admin:
        admin.create_topic("spread", partitions=6)
        with pytest.raises(InvalidReplicationFactorError):
            admin.create_topic("too-many", partitions=1, replication_factor=4)
    leaders = wait_until(
        lambda: (lambda m: m if m and all(v >= 0 for v in m.values()) else None)(
            _leaders(b.bootstrap(5), "spread")
        ),
        20,
        "leaders for every partition",
    )
    assert set(leaders.values()) == {4, 5, 6}  # spread over the three brokers
    values = [b"v%04d" % i for i in range(3000)]
    with Producer(bootstrap_servers=b.bootstrap(4), linger_ms=5) as p:
        for i, v in enumerate(values):
            p.send("spread", v, partition=i % 6)
        p.flush(60)
    tps = [TopicPartition("spread", i) for i in range(6)]
    with Consumer(bootstrap_servers=b.bootstrap(6)) as c:
        c.assign(tps)
        assert sorted(r.value for r in poll_n(c, 3000, timeout=60)) == values

    # SIGKILL broker 5: fenced after the session timeout, its partitions offline
    mine = [p for p, leader in leaders.items() if leader == 5]
    b.stop(5, signal.SIGKILL)
    t0 = time.monotonic()
    wait_until(
        lambda: _brokers(b.bootstrap(4)) == {4, 6}, SESSION_MS / 1000 + 60, "broker 5 fenced"
    )
    print(f"broker 5 fenced {time.monotonic() - t0:.2f}s after SIGKILL (session {SESSION_MS} ms)")
    assert all(_leaders(b.bootstrap(4), "spread")[p] == -1 for p in mine)

    # restarted: a new incarnation registers at once and leads its partitions again
    b.start(5)
    wait_until(
        lambda: all(_leaders(b.bootstrap(4), "spread")[p] == 5 for p in mine), 20, "5 leads again"
    )
    with Consumer(bootstrap_servers=b.bootstrap(5)) as c:
        c.assign([TopicPartition("spread", p) for p in mine])
        assert len(poll_n(c, 500 * len(mine), timeout=60)) == 500 * len(mine)

    # SIGTERM broker 6: a controlled shutdown fences it at once, not after the session timeout
    assert b.stop(6, signal.SIGTERM) == 0
    wait_until(lambda: _brokers(b.bootstrap(4)) == {4, 5}, SESSION_MS / 1000 - 0.5, "6 fenced")
