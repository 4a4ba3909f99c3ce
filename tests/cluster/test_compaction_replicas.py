"""A compacted topic across replicas (issue 13): 3 `gregor controller` + 3 `gregor broker`
processes, replication factor 3. A follower that was down while the leader compacted catches up
across the leader's gaps (it accepts batches that start past its end), rejoins the ISR, and
after the leader is killed the new leader serves the latest value of every key."""

from __future__ import annotations

import signal

import pytest
from helpers import known_partitions, read_to_end, wait_until

from client import Admin, Producer

KEYS = 15


def _describe(bootstrap: str):
    with Admin(bootstrap_servers=bootstrap) as admin:
        return admin.describe_topic("ck").partitions[0]


def _read_latest(bootstrap: str) -> tuple[dict[bytes, bytes], list[int]]:
    got = read_to_end(bootstrap, "ck")
    return {r.key: r.value for r in got}, [r.offset for r in got]


@pytest.mark.slow
def test_a_follower_catches_up_across_the_leaders_gaps(broker_cluster) -> None:
    _q, b = broker_cluster(log_cleaner_backoff_ms=50, replica_fetch_backoff_ms=200)
    with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
        admin.create_topic(
            "ck", 1, 3,
            {"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"},
        )  # fmt: skip
    d = wait_until(lambda: (lambda ps: ps[0] if ps and len(ps[0].isr) == 3 else None)(known_partitions(b.bootstrap_all(), "ck")), 30, "ISR 3")  # fmt: skip
    leader = d.leader
    follower = next(n for n in d.replicas if n != leader)
    b.stop(follower, signal.SIGKILL)
    latest: dict[bytes, bytes] = {}
    with Producer(bootstrap_servers=b.bootstrap(leader), acks="all", linger_ms=0) as p:
        for i in range(600):
            key, value = b"k%d" % (i % KEYS), b"v%d-" % i + b"x" * 50
            p.send("ck", value, key=key, partition=0).result(30)
            latest[key] = value
    checkpoint = b.data_dirs[leader] / "ck-0" / "cleaner-offset-checkpoint"
    wait_until(
        lambda: checkpoint.exists() and int(checkpoint.read_text()) > 400, 60, "leader cleaned"
    )
    b.start(follower)
    wait_until(
        lambda: follower in _describe(b.bootstrap_all()).isr, 60, "the follower back in the ISR"
    )
    b.stop(leader, signal.SIGKILL)
    wait_until(lambda: _describe(b.bootstrap_all()).leader not in (-1, leader), 60, "a new leader")
    values, offsets = _read_latest(b.bootstrap_all())
    assert values == latest
    assert offsets == sorted(set(offsets)) and len(offsets) < 600
