"""`gregor cluster rebalance` across real processes: 3 `gregor controller` and 4 `gregor
broker` processes; a topic of 6 partitions (RF 2) placed skewed on brokers 4, 5 and 6 (4
holds 6 replicas and leads 4 partitions, 7 is new and holds nothing), automatic balancing off.
Under acks=all load from an idempotent producer writing to every partition, `--dry-run` shows
the plan and moves nothing; then the rebalance moves the fewest replicas (5), runs a preferred
leader election, and afterwards every broker holds 3 replicas and leads 1 or 2 partitions.
The history is checked: nothing acknowledged lost, nothing twice, order kept.
"""

from __future__ import annotations

import subprocess
from collections import Counter

import pytest
from cluster_history import Load, check_history
from helpers import gregor_command, known_partitions, wait_until

from client import Admin

# long tier: the plan is checked without a cluster in tests/unit/cli/test_rebalance_plan.py
pytestmark = [pytest.mark.slow, pytest.mark.long]

OVERRIDES = {"replica.lag.time.max.ms": 10_000, "replica.fetch.backoff.ms": 200}
TOPIC = "rb"


def _gregor(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*gregor_command(), *args], capture_output=True, text=True, timeout=timeout
    )


def _counts(bootstrap: str) -> tuple[Counter, Counter]:
    """Replicas and leaders per broker, over every partition of every topic."""
    replicas: Counter = Counter()
    leaders: Counter = Counter()
    with Admin(bootstrap_servers=bootstrap) as admin:
        for name in admin.list_topics():
            for p in admin.describe_topic(name).partitions:
                replicas.update(p.replicas)
                leaders[p.leader] += 1
    return replicas, leaders


def test_rebalance_evens_a_skewed_cluster_with_a_new_broker(
    controller_quorum, brokers, tmp_path
) -> None:
    q = controller_quorum(**{"broker.session.timeout.ms": 3000, "auto.balance.mode": "off"})
    q.start_all()
    q.wait_leader(10, "a controller leader")
    d = tmp_path / "brokers"
    d.mkdir()
    b = brokers(d, q.voters, [4, 5, 6, 7], OVERRIDES)
    b.start_all((4, 5, 6))
    bs = ["--bootstrap-server", b.bootstrap_all()]
    with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
        wait_until(
            lambda: {x.node_id for x in admin.describe_cluster().brokers} == {4, 5, 6},
            30,
            "brokers 4, 5, 6 unfenced",
        )
    r = _gregor("topics", "create", TOPIC, "--replica-assignment", "4:5,5:4,4:5,5:4,4:6,4:5", *bs)
    assert r.returncode == 0, r.stderr
    wait_until(
        lambda: (
            (ps := known_partitions(b.bootstrap_all(), TOPIC))
            and len(ps) == 6
            and all(len(p.isr) == 2 for p in ps)
        ),
        30,
        "every partition in sync",
    )
    b.start(7)
    with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
        wait_until(
            lambda: 7 in {x.node_id for x in admin.describe_cluster().brokers},
            30,
            "broker 7 unfenced",
        )
    replicas, _ = _counts(b.bootstrap_all())
    assert replicas == Counter({4: 6, 5: 5, 6: 1}), replicas

    load = Load(b.bootstrap_all(), TOPIC, 6)
    try:
        load.wait_acked(300)
        r = _gregor("cluster", "rebalance", "--dry-run", *bs)
        assert r.returncode == 0, r.stderr
        assert "(5 replicas copied)" in r.stdout, r.stdout  # the fewest that even them
        assert _counts(b.bootstrap_all())[0] == replicas  # a dry run moves nothing
        with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
            assert not admin.list_partition_reassignments()

        r = _gregor("cluster", "rebalance", "--timeout", "150", *bs, timeout=200)
        assert r.returncode == 0, r.stdout + r.stderr + b.stderr()
        assert "Rebalanced in" in r.stdout, r.stdout
        load.wait_acked(300)
    finally:
        load.stop()
    replicas, leaders = _counts(b.bootstrap_all())
    assert replicas == Counter({4: 3, 5: 3, 6: 3, 7: 3}), replicas
    assert sorted(leaders) == [4, 5, 6, 7] and max(leaders.values()) <= 2, leaders
    ps = known_partitions(b.bootstrap_all(), TOPIC)
    assert all(len(p.isr) == 2 and p.leader == p.replicas[0] for p in ps), ps
    # balanced now: another rebalance has nothing to do
    r = _gregor("cluster", "rebalance", "--dry-run", *bs)
    assert r.returncode == 0 and "0 partitions move" in r.stdout, r.stdout
    check_history(b.bootstrap_all(), load, minimum=300)
